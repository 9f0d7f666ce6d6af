// The prompt cache (examples/tools/server/prompt_cache.hpp) against a server without one: every
// request served from a cached prefix gives the text and the log-probabilities, to the last bit,
// of the same request on a fresh server with --cache-mb 0. Prefixes come from an earlier turn of
// the same conversation (the whole earlier sequence), from a system prompt shared with another
// conversation (a part of an entry), from requests decoding at the same time, and from a small
// cache that evicts (its bytes never above its budget, read from /metrics after every request).
// The servers decode past the model's training context (--ctx above its sequence_len).
//   node prompt_cache.cjs PORT_CACHED PORT_OFF PORT_SMALL SMALL_BUDGET_BYTES
"use strict";
const { check, assert, equal } = require("./common.cjs");

const [, , cachedPort, offPort, smallPort, smallBudget] = process.argv;

async function complete(port, body) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  equal(r.status, 200, `status on port ${port}: ${text.slice(0, 300)}`);
  const j = JSON.parse(text);
  return {
    text: j.choices[0].text,
    logprobs: JSON.stringify(j.choices[0].logprobs),
    cached: j.usage.prompt_tokens_details.cached_tokens,
    prompt_tokens: j.usage.prompt_tokens,
  };
}
async function metrics(port) {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  const out = {};
  for (const line of (await r.text()).split("\n")) {
    const m = /^(lrt_prompt_cache_[a-z_]+) ([0-9.e+-]+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}
/// The request on `port` and on the server without a cache: the same text and logprobs.
async function same(port, body, label) {
  const [a, b] = await Promise.all([complete(port, body), complete(offPort, body)]);
  equal(a.text, b.text, `${label}: the text with the cache`);
  equal(a.logprobs, b.logprobs, `${label}: the log-probabilities with the cache`);
  equal(b.cached, 0, `${label}: cached tokens without a cache`);
  return a;
}
const sampled = (prompt, seed, n = 12) => ({ prompt, max_tokens: n, temperature: 0.9, seed, logprobs: 3 });

const system = "System: you answer in short sentences about rivers, towns and the weather. ".repeat(4);

(async () => {
  await check("a conversation of 4 turns: each turn starts from the one before, with the same bits", async () => {
    let prompt = system + "User: Tell me about the river.\nAssistant:";
    let last = 0;
    for (let turn = 1; turn <= 4; ++turn) {
      const a = await same(cachedPort, sampled(prompt, 100 + turn), `turn ${turn}`);
      if (turn > 1) assert(a.cached > 0, `turn ${turn} took no token from the cache (prompt of ${a.prompt_tokens})`);
      assert(a.cached < a.prompt_tokens, `turn ${turn}: ${a.cached} cached of ${a.prompt_tokens}`);
      last = a.cached;
      prompt += a.text + `\nUser: And then, in turn ${turn + 1}?\nAssistant:`;
    }
    assert(last > 100, `the last turn reused only ${last} tokens`);
  });
  await check("another conversation with the same system prompt reuses it, with the same bits", async () => {
    const a = await same(cachedPort, sampled(system + "User: What about the weather?\nAssistant:", 7), "shared");
    assert(a.cached > 20, `only ${a.cached} tokens of the shared system prompt were reused`);
  });
  await check("8 requests at once, repeats, extensions and new prompts, with the same bits", async () => {
    const prompts = [];
    for (let i = 0; i < 8; ++i)
      prompts.push(i % 3 === 0 ? system + `User: question ${i}?\nAssistant:` : i % 3 === 1 ? `Fresh prompt ${i} on towns.` : system);
    const together = await Promise.all(prompts.map((p, i) => complete(cachedPort, sampled(p, i))));
    for (const [i, p] of prompts.entries()) {
      const b = await complete(offPort, sampled(p, i));
      equal(together[i].text, b.text, `request ${i}: the text`);
      equal(together[i].logprobs, b.logprobs, `request ${i}: the log-probabilities`);
    }
    assert(together.some((a) => a.cached > 0), "no request of the 8 took tokens from the cache");
  });
  await check("cache_prompt: false computes the whole prompt, with the same bits", async () => {
    const body = { ...sampled(system + "User: Tell me about the river.\nAssistant:", 101), cache_prompt: false };
    const a = await same(cachedPort, body, "cache_prompt false");
    equal(a.cached, 0, "cached tokens with cache_prompt: false");
  });
  await check("a small cache evicts, stays within its budget, and what it serves has the same bits", async () => {
    const budget = Number(smallBudget);
    let hits = 0;
    // Six prompts that differ from their first token, of about two chunks (64 positions each) of
    // bytes; then the six again, extended, newest first: the newest are still cached.
    const prompt = (i) => `${i}${"QWERTY"[i]} says: ` + system.slice(0, 90) + "\nAssistant:";
    for (let round = 0; round < 2; ++round)
      for (let k = 0; k < 6; ++k) {
        const i = round === 0 ? k : 5 - k;
        const p = round === 0 ? prompt(i) : prompt(i) + " Yes.";
        const a = await same(smallPort, sampled(p, i, 6), `round ${round}, prompt ${i}`);
        hits += a.cached > 0 ? 1 : 0;
        const m = await metrics(smallPort);
        assert(m.lrt_prompt_cache_bytes <= budget, `${m.lrt_prompt_cache_bytes} bytes held, budget ${budget}`);
        equal(m.lrt_prompt_cache_budget_bytes, budget, "the budget in /metrics");
      }
    const m = await metrics(smallPort);
    assert(m.lrt_prompt_cache_evictions_total > 0, `no eviction: ${JSON.stringify(m)}`);
    assert(hits > 0, "the small cache served no prefix");
    console.log(`  small cache: ${JSON.stringify(m)}`);
  });
  await check("/metrics counts the cache's hits, misses and reused tokens", async () => {
    const m = await metrics(cachedPort);
    assert(m.lrt_prompt_cache_hits_total >= 5, `hits ${m.lrt_prompt_cache_hits_total}`);
    assert(m.lrt_prompt_cache_misses_total >= 1, `misses ${m.lrt_prompt_cache_misses_total}`);
    assert(m.lrt_prompt_cache_tokens_total > 200, `tokens ${m.lrt_prompt_cache_tokens_total}`);
    assert(m.lrt_prompt_cache_entries >= 1, `entries ${m.lrt_prompt_cache_entries}`);
    const off = await metrics(offPort);
    equal(off.lrt_prompt_cache_hits_total, 0, "hits without a cache");
  });
})();
