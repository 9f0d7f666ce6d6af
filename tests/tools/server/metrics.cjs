// GET /metrics (examples/tools/server/metrics.hpp) read by a Prometheus text-format parser (npm
// parse-prometheus-text-format): the families a dashboard reads are there with their types, and
// the counters move with a completion, a stream and a refused request.
//   node metrics.cjs PORT
"use strict";
const { check, assert, equal, post, get, stream } = require("./common.cjs");
const parse = require("parse-prometheus-text-format");

async function scrape() {
  const r = await get("/metrics");
  equal(r.status, 200, "status");
  assert(/^text\/plain; version=0\.0\.4/.test(r.headers.get("content-type")), `Content-Type ${r.headers.get("content-type")}`);
  const families = {};
  for (const f of parse(r.text)) families[f.name] = f;
  return families;
}
/// The value of a counter or gauge (summed over the samples whose labels include `labels`).
function value(fams, name, labels = {}) {
  const f = fams[name];
  if (!f) return 0;
  let v = 0;
  for (const m of f.metrics)
    if (Object.entries(labels).every(([k, x]) => m.labels && m.labels[k] === x)) v += Number(m.value);
  return v;
}
const histogramCount = (fams, name) => (fams[name] ? Number(fams[name].metrics[0].count) : 0);

(async () => {
  await check("/metrics: Prometheus text that a parser reads, with the families and types expected", async () => {
    const f = await scrape();
    const want = {
      lrt_requests_total: "COUNTER", lrt_prompt_tokens_total: "COUNTER", lrt_generation_tokens_total: "COUNTER",
      lrt_connections_accepted_total: "COUNTER", lrt_queue_requests: "GAUGE", lrt_busy_rows: "GAUGE",
      lrt_rows: "GAUGE", lrt_open_connections: "GAUGE", lrt_connections_in_request: "GAUGE",
      lrt_time_to_first_token_seconds: "HISTOGRAM", lrt_time_per_output_token_seconds: "HISTOGRAM",
    };
    for (const [name, type] of Object.entries(want)) {
      assert(f[name], `no ${name}`);
      equal(f[name].type, type, `${name}'s type`);
    }
    assert(value(f, "lrt_open_connections") >= 1, "this connection is open");
    assert(value(f, "lrt_rows") >= 1, "rows");
  });

  await check("/metrics: the counters move with a completion, a stream and a refusal", async () => {
    const a = await scrape();
    const r = await post("/v1/completions", { prompt: "count me", max_tokens: 5, temperature: 0, ignore_eos: true });
    equal(r.status, 200, "completion");
    const s = await stream("/v1/completions", { prompt: "and me", max_tokens: 7, temperature: 0, ignore_eos: true });
    equal(s.status, 200, "stream");
    equal((await post("/v1/completions", "{not json")).status, 400, "a bad body");
    const b = await scrape();
    const ok = { endpoint: "/v1/completions", status: "200" }, bad = { endpoint: "/v1/completions", status: "400" };
    equal(value(b, "lrt_requests_total", ok) - value(a, "lrt_requests_total", ok), 2, "completions answered 200");
    equal(value(b, "lrt_requests_total", bad) - value(a, "lrt_requests_total", bad), 1, "completions answered 400");
    equal(value(b, "lrt_generation_tokens_total") - value(a, "lrt_generation_tokens_total"), 12, "tokens generated");
    equal(value(b, "lrt_prompt_tokens_total") - value(a, "lrt_prompt_tokens_total"),
          r.json.usage.prompt_tokens + "and me".length + 1, "prompt tokens (with BOS)");
    equal(histogramCount(b, "lrt_time_to_first_token_seconds") - histogramCount(a, "lrt_time_to_first_token_seconds"), 2,
          "time-to-first-token observations");
    equal(histogramCount(b, "lrt_time_per_output_token_seconds") - histogramCount(a, "lrt_time_per_output_token_seconds"), 2,
          "time-per-token observations");
    const h = b.lrt_time_to_first_token_seconds.metrics[0];
    const buckets = Object.entries(h.buckets).map(([le, n]) => [Number(le), Number(n)]).sort((x, y) => x[0] - y[0]);
    for (let i = 1; i < buckets.length; ++i) assert(buckets[i][1] >= buckets[i - 1][1], "cumulative buckets");
  });
})();
