// The page at / in headless Chromium: loaded with a prompt in its query string and run=1, it
// streams a completion into the page; the text shown must be the API's text for the same request.
//   node page.cjs PORT CHROMIUM
"use strict";
const { execFile } = require("node:child_process");
const { port, check, assert, equal, post } = require("./common.cjs");
const chromium = process.argv[3];

function dumpDom(url) {
  return new Promise((resolve, reject) => {
    // --no-sandbox: the tests run as root; virtual time waits for the page's fetches.
    execFile(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=120000", "--dump-dom", url],
             { timeout: 150000, maxBuffer: 1 << 24 }, (err, stdout, stderr) => {
               if (err) reject(new Error(`${chromium}: ${err.message}\n${stderr.slice(-2000)}`));
               else resolve(stdout);
             });
  });
}

(async () => {
  await check("the page streams a completion: the text shown is the API's", async () => {
    const body = { prompt: "The jury said", max_tokens: 16, temperature: 0.8, seed: 5, top_p: 1 };
    const api = await post("/v1/completions", body);
    equal(api.status, 200, api.text);
    const q = new URLSearchParams({ prompt: body.prompt, max_tokens: body.max_tokens, temperature: body.temperature,
                                    seed: body.seed, run: 1 });
    const dom = await dumpDom(`http://127.0.0.1:${port}/?${q}`);
    assert(/<body[^>]*data-state="done"/.test(dom), `the page did not finish:\n${dom.slice(0, 3000)}`);
    const m = /data-completion="([^"]*)"/.exec(dom);
    assert(m, "no data-completion");
    equal(decodeURIComponent(m[1]), api.json.choices[0].text, "text shown");
    const reason = /<span id="reason">([^<]*)<\/span>/.exec(dom);
    equal(reason && reason[1], api.json.choices[0].finish_reason, "finish reason shown");
    assert(/model: [^<]+\(lrt|model: [^<]+\(baseline/.test(dom), "the model line");
  });
})();
