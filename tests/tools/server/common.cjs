// Helpers of the lrt-server tests (tests/tools/server_tests.sh runs each script with the
// server's port as its first argument): plain HTTP with node's fetch and net, server-sent
// events, and a check() that prints one line per case and fails the script on the first error.
"use strict";
const net = require("node:net");

const port = Number(process.argv[2]);
if (!port) throw new Error("usage: node SCRIPT PORT [...]");
const base = `http://127.0.0.1:${port}`;

let failed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok - ${name} (${((Date.now() - t0) / 1000).toFixed(2)} s)`);
  } catch (e) {
    failed++;
    console.log(`FAIL - ${name}: ${e && e.stack ? e.stack : e}`);
    process.exitCode = 1;
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function equal(a, b, msg) {
  if (a !== b) throw new Error(`${msg}: got ${JSON.stringify(a)}, expected ${JSON.stringify(b)}`);
}

/// POST a JSON body (or a string as is); returns {status, headers, json, text}.
async function post(path, body, headers = {}, signal = undefined) {
  const r = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
    signal,
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: r.status, headers: r.headers, json, text };
}
async function get(path, headers = {}) {
  const r = await fetch(base + path, { headers });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: r.status, headers: r.headers, json, text };
}

/// A streamed completion read to its end: {status, chunks (parsed events), text, done ([DONE] seen),
/// comments (": ..." lines, skipped)}.
async function stream(path, body, { signal, onChunk } = {}) {
  const r = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  if (r.status !== 200) return { status: r.status, json: await r.json(), chunks: [], text: "", done: false };
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "", text = "", done = false, comments = 0;
  const chunks = [];
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += dec.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (ev.startsWith(":")) { comments++; continue; }  // a comment (": keep-alive" while the prompt is prefilled)
      assert(ev.startsWith("data: "), `an event without data: ${JSON.stringify(ev)}`);
      const data = ev.slice(6);
      if (data === "[DONE]") { done = true; continue; }
      const j = JSON.parse(data);
      chunks.push(j);
      if (j.choices && j.choices[0]) text += j.choices[0].text ?? j.choices[0].delta?.content ?? "";
      if (onChunk) await onChunk(j, chunks.length);
    }
  }
  assert(buf === "", `bytes after the last event: ${JSON.stringify(buf)}`);
  return { status: 200, chunks, text, done, comments };
}

/// Sends raw bytes (a string or Buffer, or a function(socket) that writes) and returns the
/// server's first answer (whole by its Content-Length, or what came before the server closed):
/// {status, head, body, ms, closed (the server closed the connection)}. end: close this side
/// after sending.
function raw(send, { timeoutMs = 20000, end = false } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const s = net.connect(port, "127.0.0.1");
    const got = [];
    let settled = false;
    const timer = setTimeout(() => { s.destroy(); reject(new Error(`no answer in ${timeoutMs} ms`)); }, timeoutMs);
    const finish = (closed) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const all = Buffer.concat(got).toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(all);
      const at = all.indexOf("\r\n\r\n");
      resolve({ status: m ? Number(m[1]) : 0, head: all.slice(0, at), body: at >= 0 ? all.slice(at + 4) : "",
                ms: Date.now() - t0, closed });
      s.destroy();
    };
    s.on("connect", () => {
      if (typeof send === "function") send(s);
      else s.write(send);
      if (end) s.end();  // no more bytes from this side
    });
    s.on("data", (d) => {
      got.push(d);
      const all = Buffer.concat(got).toString("latin1");
      const at = all.indexOf("\r\n\r\n");
      const len = at >= 0 ? /\r\ncontent-length: *(\d+)/i.exec(all.slice(0, at)) : null;
      if (len && Buffer.byteLength(all.slice(at + 4), "latin1") >= Number(len[1])) finish(false);
    });
    s.on("error", () => {});  // a reset after the answer: what was read counts
    s.on("close", () => finish(true));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

module.exports = { port, base, check, assert, equal, post, get, stream, raw, sleep, failed: () => failed };
