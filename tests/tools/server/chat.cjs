// Chat completions with --chat-template plain: the openai client's chat.completions gives the
// text of /v1/completions on the template's prompt with its stop strings, streamed or not.
//   node chat.cjs PORT
"use strict";
const { port, check, assert, equal, post } = require("./common.cjs");
const OpenAI = require("openai");
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });

(async () => {
  await check("chat.completions: the plain template's completion, as a message and as deltas", async () => {
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Name a colour." }];
    const opts = { model: "m", messages, max_tokens: 20, temperature: 0.7, seed: 4 };
    const r = await client.chat.completions.create(opts);
    equal(r.object, "chat.completion", "object");
    equal(r.choices[0].message.role, "assistant", "role");
    const prompt = "System: Be brief.\n\nUser: Name a colour.\n\nAssistant:";
    const ref = await post("/v1/completions", { prompt, max_tokens: 20, temperature: 0.7, seed: 4,
                                                stop: ["\nUser:", "\nSystem:"] });
    equal(r.choices[0].message.content, ref.json.choices[0].text, "content = the template's completion");
    equal(r.choices[0].finish_reason, ref.json.choices[0].finish_reason, "finish_reason");
    let text = "", role = null;
    for await (const c of await client.chat.completions.create({ ...opts, stream: true })) {
      if (c.choices[0].delta.role) role = c.choices[0].delta.role;
      text += c.choices[0].delta.content ?? "";
    }
    equal(role, "assistant", "the first delta's role");
    equal(text, r.choices[0].message.content, "streamed content");
  });
  await check("chat.completions: bad messages are a 400 naming messages", async () => {
    for (const messages of [[], [{ role: "robot", content: "x" }], [{ role: "user" }], "hi"]) {
      try {
        await client.chat.completions.create({ model: "m", messages });
        throw new Error(`accepted ${JSON.stringify(messages)}`);
      } catch (e) {
        assert(e instanceof OpenAI.BadRequestError, String(e));
        equal(e.error.param, "messages", "param");
      }
    }
  });
})();
