// Load: 200 requests from 32 concurrent clients (streamed and not, greedy and sampled), none lost
// or failed and every one complete; streams cancelled by their clients free their rows; /health
// answers throughout.
//   node load.cjs PORT
"use strict";
const { check, assert, equal, post, get, stream, sleep } = require("./common.cjs");

async function idle(ms) {  // until /health shows no request decoding or waiting
  const until = Date.now() + ms;
  let h;
  while (Date.now() < until) {
    h = (await get("/health")).json;
    if (h.active === 0 && h.queue === 0) return h;
    await sleep(20);
  }
  throw new Error(`still busy after ${ms} ms: ${JSON.stringify(h)}`);
}

(async () => {
  await check("200 requests from 32 concurrent clients: all complete, with usage and a finish reason", async () => {
    let next = 0, done = 0, healthOk = 0;
    const failures = [];
    const client = async (k) => {
      for (let i; (i = next++) < 200;) {
        const body = { prompt: `Request ${i} from client ${k}:`, max_tokens: 4 + (i % 13), temperature: i % 3 ? 0.8 : 0, seed: i };
        if (i % 2) {
          const s = await stream("/v1/completions", body);
          if (s.status !== 200 || !s.done || !s.chunks.at(-1).choices[0].finish_reason) failures.push(`${i}: ${JSON.stringify(s).slice(0, 200)}`);
        } else {
          const r = await post("/v1/completions", body);
          const u = r.json && r.json.usage;
          if (r.status !== 200 || !u || u.completion_tokens < 1 || u.completion_tokens > body.max_tokens ||
              !r.json.choices[0].finish_reason)
            failures.push(`${i}: ${r.status} ${r.text.slice(0, 200)}`);
        }
        done++;
      }
    };
    const health = (async () => {
      while (done < 200) {
        const h = await get("/health");
        if (h.status === 200 && h.json.status === "ok") healthOk++;
        await sleep(25);
      }
    })();
    await Promise.all([...Array(32).keys()].map(client).concat([health]));
    equal(done, 200, "requests done");
    assert(failures.length === 0, `${failures.length} failed:\n${failures.slice(0, 5).join("\n")}`);
    assert(healthOk > 0, "/health answered during the load");
    await idle(5000);
  });

  await check("streams cancelled by their clients free their rows at once", async () => {
    const parallel = (await get("/v1/models")).json.data[0].meta.parallel;
    const ctrls = [];
    await Promise.all([...Array(parallel).keys()].map(async (i) => {
      const ctrl = new AbortController();
      ctrls.push(ctrl);
      try {
        await stream("/v1/completions", { prompt: `cancel ${i}`, max_tokens: 100000, temperature: 1, seed: i }, {
          signal: ctrl.signal,
          onChunk: async (c, n) => { if (n === 2) ctrl.abort(); },
        });
      } catch (e) {
        if (e.name !== "AbortError") throw e;
      }
    }));
    const h = await idle(3000);
    equal(h.active, 0, "rows in use after the cancels");
    // A client of a non-streamed request that hangs up frees its row too (the context allows
    // thousands of tokens: the request would otherwise run on).
    const ctrl = new AbortController();
    const gone = post("/v1/completions", { prompt: "hang up", max_tokens: 1 << 20, temperature: 1, seed: 9, ignore_eos: true },
                      {}, ctrl.signal).catch((e) => e.name);
    await sleep(150);
    equal((await get("/health")).json.active, 1, "the request decodes");
    ctrl.abort();
    equal(await gone, "AbortError", "the client hung up");
    await idle(2000);
    // The rows are free: a new request is served at once.
    const r = await post("/v1/completions", { prompt: "after", max_tokens: 4, temperature: 0 });
    equal(r.status, 200, "a request after the cancels");
  });
})();
