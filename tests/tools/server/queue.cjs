// A full queue (a server started with --parallel 1 --queue 1 and a long context): the third of
// three long requests gets 503 with Retry-After and OpenAI's error object; once the others are
// cancelled (their clients close the streams), requests succeed again.
//   node queue.cjs PORT
"use strict";
const { check, assert, equal, post, get, stream, sleep } = require("./common.cjs");

(async () => {
  await check("a full queue answers 503 with Retry-After; later requests succeed", async () => {
    const ctrl = new AbortController();
    const long = (i) => stream("/v1/completions", { prompt: `long ${i}`, max_tokens: 1000000, temperature: 1, seed: i, ignore_eos: true },
                               { signal: ctrl.signal }).catch((e) => e.name);
    const a = long(1);
    const b = long(2);
    let h;
    for (let t = 0; t < 100; t++) {  // until both are in: one decoding, one waiting
      h = (await get("/health")).json;
      if (h.active + h.queue === 2) break;
      await sleep(20);
    }
    equal(h.active + h.queue, 2, `requests in: ${JSON.stringify(h)}`);
    const c = await post("/v1/completions", { prompt: "third", max_tokens: 4 });
    equal(c.status, 503, `status of the third ${c.text}`);
    equal(c.headers.get("retry-after"), "1", "Retry-After");
    equal(c.json.error.code, "queue_full", "error.code");
    assert(/--parallel/.test(c.json.error.message), c.json.error.message);
    ctrl.abort();
    equal(await a, "AbortError", "the first, cancelled");
    equal(await b, "AbortError", "the second, cancelled");
    for (let t = 0; t < 100 && (h = (await get("/health")).json).active + h.queue > 0; t++) await sleep(20);
    const d = await post("/v1/completions", { prompt: "later", max_tokens: 4 });
    equal(d.status, 200, "a later request");
  });
})();
