// Bad input, each answered with a clean status while the server goes on serving: malformed JSON,
// wrong types, negative or huge max_tokens, a prompt longer than the context, invalid UTF-8, a
// 10 MB body, a request sent one byte per second (ended by --read-timeout), broken HTTP, unknown
// paths and methods, a wrong API key.
//   node bad_input.cjs PORT [API_KEY]
"use strict";
const { check, assert, equal, post, get, raw } = require("./common.cjs");
const key = process.argv[3];
const auth = key ? { Authorization: `Bearer ${key}` } : {};

function errorObject(r, status, what) {
  equal(r.status, status, `${what}: status (${r.text})`);
  const e = r.json && r.json.error;
  assert(e && typeof e.message === "string" && e.message.length > 0 && typeof e.type === "string" &&
         "param" in e && "code" in e, `${what}: OpenAI's error object, got ${r.text}`);
  return e;
}
async function stillServing() {
  const r = await post("/v1/completions", { prompt: "ok", max_tokens: 2, temperature: 0 }, auth);
  equal(r.status, 200, `the server still serves (${r.text})`);
}

(async () => {
  const ctx = (await get("/v1/models", auth)).json.data[0].meta.context;

  await check("malformed JSON and wrong types: 400 naming the parameter", async () => {
    const cases = [
      ['{"prompt": "x",', null], ["[1, 2]", null], ["", null], ['{"prompt": "x"} trailing', null],
      ['{"prompt": "x", "prompt": "y"}', null],
      [{ prompt: 5 }, "prompt"], [{ prompt: ["a", "b"] }, "prompt"], [{ prompt: [1, "a"] }, "prompt"],
      [{ prompt: [-1] }, "prompt"], [{ prompt: [1e9] }, "prompt"], [{ prompt: "x", max_tokens: "5" }, "max_tokens"],
      [{ prompt: "x", max_tokens: -1 }, "max_tokens"], [{ prompt: "x", max_tokens: 1e30 }, "max_tokens"],
      [{ prompt: "x", max_tokens: 2.5 }, "max_tokens"], [{ prompt: "x", temperature: -1 }, "temperature"],
      [{ prompt: "x", top_p: 0 }, "top_p"], [{ prompt: "x", top_k: -3 }, "top_k"], [{ prompt: "x", seed: 1.5 }, "seed"],
      [{ prompt: "x", stop: 3 }, "stop"], [{ prompt: "x", stop: ["a", "b", "c", "d", "e"] }, "stop"],
      [{ prompt: "x", stream: "yes" }, "stream"], [{ prompt: "x", suffix: "y" }, "suffix"], [{ prompt: "x", echo: true }, "echo"],
    ];
    for (const [body, param] of cases) {
      const r = await post("/v1/completions", body, auth);
      const e = errorObject(r, 400, JSON.stringify(body));
      equal(e.param, param, `param of ${JSON.stringify(body)}`);
    }
    // Malformed JSON says where, in the words of the request (no parser's tag).
    const e = errorObject(await post("/v1/completions", '{"prompt": "x"} trailing', auth), 400, "trailing bytes");
    equal(e.message, "the request body is not valid JSON: unexpected trailing characters at byte 16", "its message");
    equal(e.code, "invalid_json", "its code");
    await stillServing();
  });

  await check("integers written as 3.0 are taken; 2^70 is out of range, 2.5 not an integer", async () => {
    const r = await post("/v1/completions", '{"prompt": "x", "max_tokens": 3.0, "temperature": 0, "ignore_eos": true}', auth);
    equal(r.status, 200, `max_tokens 3.0 (${r.text})`);
    equal(r.json.usage.completion_tokens, 3, "completion_tokens of max_tokens 3.0");
    for (const [body, param, says] of [
      ['{"prompt": "x", "seed": 1180591620717411303424}', "seed", "seed must be in ["],
      ['{"prompt": "x", "max_tokens": 1e30}', "max_tokens", "max_tokens must be in [0, "],
      ['{"prompt": "x", "max_tokens": 2.5}', "max_tokens", "max_tokens must be an integer, got 2.5"],
      ['{"prompt": "x", "top_k": "3"}', "top_k", "top_k must be an integer, got a string"],
    ]) {
      const e = errorObject(await post("/v1/completions", body, auth), 400, body);
      equal(e.param, param, `param of ${body}`);
      assert(e.message.includes(says), `${body}: "${e.message}" does not say "${says}"`);
    }
  });

  await check("huge max_tokens within range is cut to the context (finish_reason length)", async () => {
    const r = await post("/v1/completions", { prompt: "x", max_tokens: 1 << 30, temperature: 0, ignore_eos: true }, auth);
    equal(r.status, 200, r.text);
    equal(r.json.choices[0].finish_reason, "length", "finish_reason");
    equal(r.json.usage.prompt_tokens + r.json.usage.completion_tokens, ctx + 1, "prompt + completion = context + 1");
  });

  await check("a prompt longer than the context: 413 context_length_exceeded", async () => {
    const e = errorObject(await post("/v1/completions", { prompt: "y".repeat(ctx) }, auth), 413, "long prompt");
    equal(e.code, "context_length_exceeded", "code");
    assert(e.message.includes(String(ctx)), e.message);
    const ok = await post("/v1/completions", { prompt: "y".repeat(ctx - 2), max_tokens: 5 }, auth);
    equal(ok.status, 200, "a prompt that fits (with BOS)");
  });

  await check("invalid UTF-8 in the body: 400", async () => {
    const body = Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const r = await raw(Buffer.concat([Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${key ? `Authorization: Bearer ${key}\r\n` : ""}Content-Length: ${body.length}\r\n\r\n`), body]));
    equal(r.status, 400, r.head);
    assert(/UTF-8/i.test(r.body), r.body);
  });

  await check("a 10 MB body: 413 before it is read", async () => {
    const big = Buffer.alloc(10 << 20, 0x61);
    const r = await raw((s) => {
      s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${big.length}\r\n\r\n`);
      s.write(big);
    });
    equal(r.status, 413, r.head);
    assert(/limit/.test(r.body), r.body);
    await stillServing();
  });

  await check("headers one byte per second: 408 at the read deadline, others served meanwhile", async () => {
    const req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n";
    let timer;
    const slow = raw((s) => {
      let i = 0;
      timer = setInterval(() => { if (i < req.length && !s.destroyed) s.write(req[i++]); }, 1000);
    }, { timeoutMs: 30000 });
    await stillServing();
    const r = await slow;
    clearInterval(timer);
    equal(r.status, 408, r.head);
    assert(r.ms < 15000, `ended after ${r.ms} ms`);
  });

  await check("broken HTTP: 400 / 501 / 505 / 431, and a silent close", async () => {
    equal((await raw("GARBAGE\r\n\r\n")).status, 400, "no target");
    equal((await raw("GET nopath HTTP/1.1\r\n\r\n")).status, 400, "a target without /");
    equal((await raw("GET / HTTP/2.0\r\n\r\n")).status, 505, "HTTP/2.0");
    equal((await raw("GET / HTTP/1.1\r\nbad header\r\n\r\n")).status, 400, "a header without a colon");
    equal((await raw("POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")).status, 501, "chunked");
    equal((await raw("POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n")).status, 400, "two lengths");
    equal((await raw(`GET / HTTP/1.1\r\nX: ${"a".repeat(20000)}\r\n\r\n`)).status, 431, "a 20 kB header");
    equal((await raw("POST /v1/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\n{}", { end: true })).status, 400, "a body shorter than its length, closed");
    equal((await raw("", { end: true })).status, 0, "a connection closed at once: closed without an answer");
    await stillServing();
  });

  await check("unknown paths 404, wrong methods 405, /health and the page without a key", async () => {
    errorObject(await get("/v1/nothing", auth), 404, "unknown path");
    errorObject(await get("/v1/completions", auth), 405, "GET on completions");
    errorObject(await post("/v1/models", {}, auth), 405, "POST on models");
    equal((await get("/health")).status, 200, "/health");
    const page = await get("/");
    equal(page.status, 200, "/");
    assert(page.headers.get("content-type").startsWith("text/html"), "the page is HTML");
  });

  if (key) {
    await check("a wrong or missing API key: 401", async () => {
      for (const h of [{}, { Authorization: "Bearer wrong" }, { Authorization: key }]) {
        const e = errorObject(await post("/v1/completions", { prompt: "x" }, h), 401, JSON.stringify(h));
        equal(e.code, "invalid_api_key", "code");
      }
      errorObject(await get("/v1/models"), 401, "models without a key");
      errorObject(await post("/tokenize", { content: "x" }), 401, "tokenize without a key");
      errorObject(await post("/detokenize", { tokens: [65] }), 401, "detokenize without a key");
      errorObject(await get("/metrics"), 401, "metrics without a key");
      equal((await get("/metrics", auth)).status, 200, "metrics with the key");
    });
  }
})();
