// lrt-server under a flood of connections (examples/tools/server/http.hpp): IDLE connections that
// send nothing and SLOW ones that send a request a byte a second (within --read-timeout) are held
// open while 32 clients run completions. Every completion must succeed, GET /health must answer
// within 100 ms (p99, polled throughout on fresh connections), the server's memory must grow by
// less than 200 MB, and once the flood has gone its threads and descriptors must return to
// their counts before it (read from /proc/PID).
//   node flood.cjs PORT SERVER_PID IDLE SLOW
"use strict";
const net = require("node:net");
const fs = require("node:fs");
const { port, check, assert, post, sleep } = require("./common.cjs");
const pid = Number(process.argv[3]);
const nIdle = Number(process.argv[4]), nSlow = Number(process.argv[5]);

function proc() {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)`, "m").exec(status)[1]);
  return { threads: field("Threads"), rssMB: field("VmRSS") / 1024, fds: fs.readdirSync(`/proc/${pid}/fd`).length };
}

/// Opens n connections (at most 500 connecting at a time); resolves with the sockets.
async function open(n, onConnect = () => {}) {
  const sockets = [];
  for (let at = 0; at < n; at += 500) {
    const batch = [];
    for (let i = at; i < Math.min(n, at + 500); ++i)
      batch.push(new Promise((resolve, reject) => {
        const s = net.connect(port, "127.0.0.1");
        s.on("error", reject);
        s.on("connect", () => { onConnect(s); resolve(s); });
      }));
    sockets.push(...(await Promise.all(batch)));
  }
  for (const s of sockets) s.on("error", () => {});
  return sockets;
}

/// GET /health on a fresh connection; its time in ms.
async function health() {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}/health`, { headers: { Connection: "close" } });
  await r.text();
  if (r.status !== 200) throw new Error(`/health: ${r.status}`);
  return performance.now() - t0;
}

(async () => {
  await check(`${nIdle} idle and ${nSlow} slow connections held while 32 clients run completions`, async () => {
    await post("/v1/completions", { prompt: "warm", max_tokens: 4 });  // the engine's threads and buffers exist
    await sleep(300);
    const before = proc();
    const t0 = Date.now();
    const idle = await open(nIdle);
    const request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    const slowTimers = [];
    const slow = await open(nSlow, (s) => {
      let i = 0;
      slowTimers.push(setInterval(() => { if (i < request.length - 1) s.write(request[i++]); }, 1000));
    });
    const opened = proc();
    console.log(`  opened ${nIdle + nSlow} connections in ${Date.now() - t0} ms; the server holds ${opened.fds} descriptors, ` +
                `${opened.threads} threads (before: ${before.fds}, ${before.threads})`);
    assert(opened.threads <= before.threads + 4, `the connections took threads: ${before.threads} -> ${opened.threads}`);

    const latencies = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        latencies.push(await health());
        await sleep(20);
      }
    })();
    let failures = 0, done = 0;
    const clients = [];
    for (let c = 0; c < 32; ++c)
      clients.push((async () => {
        for (let i = 0; i < 4; ++i) {
          const r = await post("/v1/completions", { prompt: `client ${c} request ${i}`, max_tokens: 16, ignore_eos: true, seed: c });
          if (r.status !== 200 || r.json.usage.completion_tokens !== 16) failures++;
          else done++;
        }
      })());
    await Promise.all(clients);
    await sleep(3000);  // the flood held a while longer, /health still polled
    polling = false;
    await poller;
    const during = proc();
    latencies.sort((a, b) => a - b);
    const p = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
    console.log(`  ${done} of 128 completions; /health ${latencies.length} times: p50 ${p(0.5).toFixed(1)} ms, ` +
                `p99 ${p(0.99).toFixed(1)} ms, max ${latencies[latencies.length - 1].toFixed(1)} ms; ` +
                `memory ${before.rssMB.toFixed(0)} -> ${during.rssMB.toFixed(0)} MB`);
    assert(failures === 0, `${failures} completions failed`);
    assert(p(0.99) < 100, `/health p99 ${p(0.99).toFixed(1)} ms`);
    assert(during.rssMB - before.rssMB < 200, `memory grew by ${(during.rssMB - before.rssMB).toFixed(0)} MB`);

    for (const t of slowTimers) clearInterval(t);
    for (const s of idle.concat(slow)) s.destroy();
    let after = proc();
    for (let i = 0; i < 100 && (after.fds > before.fds || after.threads > before.threads); ++i) {
      await sleep(100);
      after = proc();
    }
    console.log(`  after the flood: ${after.fds} descriptors, ${after.threads} threads`);
    assert(after.fds <= before.fds, `descriptors: ${before.fds} before, ${after.fds} after`);
    assert(after.threads <= before.threads, `threads: ${before.threads} before, ${after.threads} after`);
  });
})();
