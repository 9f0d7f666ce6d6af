// The official openai client (npm openai@4) against lrt-server: completions with and without
// streaming, stop strings, seeds, usage, the error objects, /v1/models and chat completions, and
// a load of 64 requests on the connections the client keeps alive (counted by /metrics).
//   node openai_client.cjs PORT
"use strict";
const { port, check, assert, equal, post, raw, stream } = require("./common.cjs");
const OpenAI = require("openai");

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });

(async () => {
  let model;
  await check("models.list: one model with its id, context and variant", async () => {
    const list = await client.models.list();
    equal(list.data.length, 1, "models");
    model = list.data[0].id;
    assert(model.length > 0, "an id");
    equal(list.data[0].object, "model", "object");
    assert(list.data[0].meta.context > 0, "meta.context");
  });

  let greedy;
  await check("completions.create: text, finish_reason length, usage", async () => {
    const r = await client.completions.create({ model, prompt: "The jury said", max_tokens: 12, temperature: 0 });
    equal(r.object, "text_completion", "object");
    equal(r.choices.length, 1, "choices");
    equal(r.choices[0].finish_reason === "length" || r.choices[0].finish_reason === "stop", true, "finish_reason");
    greedy = r.choices[0].text;
    equal(r.usage.prompt_tokens > 1, true, "usage.prompt_tokens counts the prompt and BOS");
    equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, "usage.total_tokens");
    if (r.choices[0].finish_reason === "length") equal(r.usage.completion_tokens, 12, "completion_tokens");
  });

  await check("streaming: the chunks join to the same text, [DONE] ends it, usage with include_usage", async () => {
    const s = await client.completions.create({ model, prompt: "The jury said", max_tokens: 12, temperature: 0,
                                                stream: true, stream_options: { include_usage: true } });
    let text = "", reason = null, usage = null, n = 0;
    for await (const chunk of s) {
      n++;
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices.length) {
        text += chunk.choices[0].text;
        if (chunk.choices[0].finish_reason) reason = chunk.choices[0].finish_reason;
      }
    }
    equal(text, greedy, "streamed text");
    assert(reason === "length" || reason === "stop", "a finish_reason");
    assert(usage && usage.completion_tokens >= 1, "a usage chunk");
    assert(n >= 2, "several chunks");
  });

  await check("seeds: the same seed gives the same text, another seed another text", async () => {
    const ask = (seed) => client.completions.create({ model, prompt: "Once", max_tokens: 24, temperature: 1, seed });
    const [a, b, c] = await Promise.all([ask(7), ask(7), ask(8)]);
    equal(a.choices[0].text, b.choices[0].text, "seed 7 twice");
    assert(a.choices[0].text !== c.choices[0].text, "seeds 7 and 8 gave the same 24 tokens");
  });

  await check("stop strings: the text ends before the first one, finish_reason stop", async () => {
    // A stop string taken from the greedy text itself, so that it certainly occurs.
    const base = await client.completions.create({ model, prompt: "A", max_tokens: 20, temperature: 0 });
    const full = base.choices[0].text;
    assert(full.length >= 6, `a greedy text of 6+ characters, got ${JSON.stringify(full)}`);
    // Two characters from the fourth on that are text the model wrote: not a replacement character
    // (bytes that are not UTF-8, which a stop string never matches) nor half a surrogate pair.
    let from = 3;
    while (from + 2 <= full.length && /[\uFFFD\uD800-\uDFFF]/.test(full.slice(from, from + 2))) ++from;
    assert(from + 2 <= full.length, `two characters of UTF-8 text in the greedy text, got ${JSON.stringify(full)}`);
    const stop = full.slice(from, from + 2);
    const at = full.indexOf(stop);
    for (const stream of [false, true]) {
      let text = "", reason = null;
      if (stream) {
        for await (const c of await client.completions.create({ model, prompt: "A", max_tokens: 20, temperature: 0, stop: [stop, "\u0000never"], stream: true }))
          if (c.choices.length) { text += c.choices[0].text; reason = c.choices[0].finish_reason ?? reason; }
      } else {
        const r = await client.completions.create({ model, prompt: "A", max_tokens: 20, temperature: 0, stop });
        text = r.choices[0].text, reason = r.choices[0].finish_reason;
      }
      equal(text, full.slice(0, at), `text before stop ${JSON.stringify(stop)} (stream ${stream})`);
      equal(reason, "stop", "finish_reason");
    }
  });

  await check("a prompt as token ids gives the text of the same prompt as a string", async () => {
    const ids = (await post("/tokenize", { content: "The jury said" })).json.tokens;
    const r = await client.completions.create({ model, prompt: ids, max_tokens: 12, temperature: 0 });
    equal(r.choices[0].text, greedy, "text");
  });

  await check("errors: the client's BadRequestError with OpenAI's error object", async () => {
    for (const [body, param] of [[{ prompt: "x", n: 3 }, "n"], [{ prompt: "x", max_tokens: -1 }, "max_tokens"],
                                 [{ prompt: "x", temperature: "hot" }, "temperature"], [{ prompt: "x", best_of: 2 }, "best_of"],
                                 [{ max_tokens: 3 }, "prompt"], [{ prompt: "x", logprobs: 6 }, "logprobs"]]) {
      try {
        await client.completions.create({ model, ...body });
        throw new Error(`accepted ${JSON.stringify(body)}`);
      } catch (e) {
        assert(e instanceof OpenAI.BadRequestError, `${JSON.stringify(body)}: ${e}`);
        equal(e.status, 400, "status");
        equal(e.error.param, param, `param of ${JSON.stringify(body)}`);
        equal(e.error.type, "invalid_request_error", "type");
        assert(e.error.message.includes(param), `the message names ${param}: ${e.error.message}`);
      }
    }
  });

  await check("logprobs: one per token, the greedy token the most likely, top lists of the size asked", async () => {
    const r = await client.completions.create({ model, prompt: "The jury said", max_tokens: 12, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    equal(r.choices[0].text, greedy, "text");
    equal(lp.tokens.length, r.usage.completion_tokens, "tokens");
    equal(lp.token_logprobs.length, lp.tokens.length, "token_logprobs");
    lp.top_logprobs.forEach((top, i) => {
      const vals = Object.values(top);
      equal(vals.length, 3, `top_logprobs[${i}] size`);
      assert(vals.every((v) => v <= 0), "log-probabilities <= 0");
      equal(Math.max(...vals), lp.token_logprobs[i], `greedy token ${i} is the most likely`);
    });
  });

  await check("chat completions without a template: a 400 that says why", async () => {
    try {
      await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }] });
      throw new Error("accepted");
    } catch (e) {
      assert(e instanceof OpenAI.BadRequestError, String(e));
      assert(/chat template/.test(e.error.message), e.error.message);
      equal(e.error.code, "no_chat_template", "code");
    }
  });

  await check("64 requests from 8 concurrent clients on kept-alive connections", async () => {
    const accepted = async () => {
      const r = await raw("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      const m = /^lrt_connections_accepted_total (\d+)/m.exec(r.body);
      return Number(m[1]);
    };
    const a = await accepted();
    await Promise.all([...Array(8).keys()].map(async (k) => {
      for (let i = 0; i < 8; ++i) {
        const r = await client.completions.create({ model, prompt: `client ${k}`, max_tokens: 3, stream: i % 2 === 1 });
        if (i % 2 === 1) for await (const _ of r);
      }
    }));
    const used = (await accepted()) - a - 1;  // less the second count's own connection
    console.log(`  the client opened ${used} connections for 64 requests`);
    assert(used <= 16, `${used} connections for 64 requests: not kept alive`);
  });

  await check("a long prompt's stream begins with keep-alive comments while it is prefilled", async () => {
    const prompt = "abcdefghij ".repeat(400);  // 4,400 tokens
    const t0 = Date.now();
    const s = await stream("/v1/completions", { prompt, max_tokens: 2, temperature: 0 });
    equal(s.status, 200, "status");
    assert(s.done, "[DONE]");
    console.log(`  ${s.comments} comments in ${Date.now() - t0} ms (--stream-keep-alive 0.05)`);
    assert(s.comments >= 1, "no comment while the prompt was prefilled");
    const r = await client.completions.create({ model, prompt, max_tokens: 2, temperature: 0, stream: true });
    let text = "";
    for await (const chunk of r) text += chunk.choices.length ? chunk.choices[0].text : "";
    equal(text, s.text, "the openai client's text, past the comments");
  });

  await check("unknown parameters are ignored", async () => {
    const r = await client.completions.create({ model, prompt: "The jury said", max_tokens: 12, temperature: 0,
                                                user: "someone", frobnicate: 1 });
    equal(r.choices[0].text, greedy, "text");
  });
})();
