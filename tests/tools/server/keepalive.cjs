// lrt-server's connections (examples/tools/server/http.hpp) as HTTP/1.1 clients use them, on raw
// sockets: several requests on one connection, pipelined requests answered in order, a stream
// (chunked) followed by another request, Connection: close and HTTP/1.0 honoured, a refused
// request closing its connection, an idle connection closed after --keep-alive-timeout.
//   node keepalive.cjs PORT KEEP_ALIVE_SECONDS
"use strict";
const net = require("node:net");
const { port, check, assert, equal, sleep } = require("./common.cjs");
const keepAliveS = Number(process.argv[3]);

/// A connection that reads whole responses (Content-Length or chunked) one after another.
function connection() {
  const s = net.connect(port, "127.0.0.1");
  let buf = Buffer.alloc(0), closed = false, wake = null;
  s.on("data", (d) => { buf = Buffer.concat([buf, d]); if (wake) wake(); });
  s.on("close", () => { closed = true; if (wake) wake(); });
  s.on("error", () => {});
  const more = () => new Promise((r) => { wake = () => { wake = null; r(); }; });
  const ready = new Promise((r) => s.on("connect", r));
  /// The next response: {status, headers (lower-case names), body}; null if the server closed first.
  async function response(timeoutMs = 10000) {
    const until = Date.now() + timeoutMs;
    const timer = setInterval(() => { if (wake) wake(); }, 50);
    try {
      for (;;) {
        const at = buf.indexOf("\r\n\r\n");
        if (at >= 0) {
          const lines = buf.slice(0, at).toString("latin1").split("\r\n");
          const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0])[1]);
          const headers = {};
          for (const l of lines.slice(1)) {
            const c = l.indexOf(":");
            headers[l.slice(0, c).toLowerCase()] = l.slice(c + 1).trim();
          }
          let rest = buf.slice(at + 4);
          if (headers["content-length"] !== undefined) {
            const n = Number(headers["content-length"]);
            if (rest.length >= n) {
              buf = rest.slice(n);
              return { status, headers, body: rest.slice(0, n).toString("utf8") };
            }
          } else if (headers["transfer-encoding"] === "chunked") {
            let body = "", ok = false;
            for (;;) {
              const nl = rest.indexOf("\r\n");
              if (nl < 0) break;
              const n = parseInt(rest.slice(0, nl).toString("latin1"), 16);
              if (rest.length < nl + 2 + n + 2) break;
              body += rest.slice(nl + 2, nl + 2 + n).toString("utf8");
              rest = rest.slice(nl + 2 + n + 2);
              if (n === 0) { ok = true; break; }
            }
            if (ok) {
              buf = rest;
              return { status, headers, body };
            }
          }
        }
        if (closed) return null;
        if (Date.now() > until) throw new Error(`no whole response in ${timeoutMs} ms: ${buf.toString("latin1").slice(0, 200)}`);
        await more();
      }
    } finally {
      clearInterval(timer);
    }
  }
  /// Whether the server closes the connection within timeoutMs.
  async function closes(timeoutMs) {
    const until = Date.now() + timeoutMs;
    while (!closed && Date.now() < until) await sleep(20);
    return closed;
  }
  return { s, ready, response, closes, send: (x) => s.write(x), close: () => s.destroy(), isClosed: () => closed };
}

const get = (path, extra = "") => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;
const post = (path, body, extra = "") =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

(async () => {
  await check("five requests on one connection, each answered with Connection: keep-alive", async () => {
    const c = connection();
    await c.ready;
    for (let i = 0; i < 5; ++i) {
      c.send(i % 2 ? get("/health") : post("/v1/completions", JSON.stringify({ prompt: "ab", max_tokens: 3, temperature: 0 })));
      const r = await c.response();
      assert(r, `the server closed after ${i} responses`);
      equal(r.status, 200, `response ${i}: ${r.body}`);
      equal(r.headers["connection"], "keep-alive", `response ${i}: Connection`);
    }
    assert(!c.isClosed(), "the connection is still open");
    c.close();
  });

  await check("pipelined requests: answered in order", async () => {
    const c = connection();
    await c.ready;
    const bodies = [1, 2, 3, 4].map((n) => JSON.stringify({ prompt: "x", max_tokens: n, temperature: 0, ignore_eos: true }));
    c.send(bodies.map((b) => post("/v1/completions", b)).join("") + get("/v1/models"));
    for (let i = 0; i < 4; ++i) {
      const r = await c.response();
      equal(r.status, 200, `response ${i}`);
      equal(JSON.parse(r.body).usage.completion_tokens, i + 1, `response ${i}: its tokens`);
    }
    const m = await c.response();
    equal(JSON.parse(m.body).object, "list", "the last response is /v1/models'");
    c.close();
  });

  await check("a stream (chunked events), then another request on the same connection", async () => {
    const c = connection();
    await c.ready;
    c.send(post("/v1/completions", JSON.stringify({ prompt: "ab", max_tokens: 6, stream: true, ignore_eos: true })));
    const r = await c.response();
    equal(r.status, 200, "stream status");
    equal(r.headers["transfer-encoding"], "chunked", "Transfer-Encoding");
    assert(r.body.endsWith("data: [DONE]\n\n"), `the stream ends with [DONE]: ${JSON.stringify(r.body.slice(-40))}`);
    c.send(get("/health"));
    equal((await c.response()).status, 200, "the request after the stream");
    c.close();
  });

  await check("Connection: close and HTTP/1.0 close after the answer; HTTP/1.0 with keep-alive does not", async () => {
    for (const [req, closes] of [
      [get("/health", "Connection: close\r\n"), true],
      ["GET /health HTTP/1.0\r\n\r\n", true],
      ["GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false],
    ]) {
      const c = connection();
      await c.ready;
      c.send(req);
      const r = await c.response();
      equal(r.status, 200, JSON.stringify(req));
      equal(r.headers["connection"], closes ? "close" : "keep-alive", `Connection of ${JSON.stringify(req)}`);
      equal(await c.closes(closes ? 3000 : 300), closes, `closed after ${JSON.stringify(req)}`);
      c.close();
    }
  });

  await check("a request refused before its body was read (413) closes its connection", async () => {
    const c = connection();
    await c.ready;
    c.send(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n{"prompt":`);
    const r = await c.response();
    equal(r.status, 413, r.body);
    equal(r.headers["connection"], "close", "Connection");
    assert(await c.closes(5000), "the connection was not closed");
  });

  await check(`an idle kept-alive connection is closed after --keep-alive-timeout (${keepAliveS} s)`, async () => {
    const c = connection();
    await c.ready;
    c.send(get("/health"));
    equal((await c.response()).status, 200, "status");
    const t0 = Date.now();
    assert(await c.closes(keepAliveS * 1000 + 3000), "still open");
    const s = (Date.now() - t0) / 1000;
    assert(s > keepAliveS * 0.8, `closed after ${s} s`);
  });
})();
