// The tiktoken side of bench/tokenizer_vs_tiktoken.sh: encode_ordinary throughput of the tiktoken
// package from npm (the WASM build of OpenAI's tiktoken) on one thread.
//   node bench/tiktoken_bench.mjs RANKS_FILE PATTERN_REGEX TEXT_FILE [RUNS]
//   node bench/tiktoken_bench.mjs --export ENCODING OUT_FILE     (its built-in ranks as a rank file)
// Prints the same JSON line as lrt-bench-tokenizer (hash: 32-bit FNV-1a over the ids).
import { createRequire } from "module";
import { readFileSync, writeFileSync } from "fs";
const require = createRequire(import.meta.url);
const { Tiktoken } = require("tiktoken/lite");
const dir = require.resolve("tiktoken/lite").replace(/lite[/][^/]*$/, "");

if (process.argv[2] === "--export") {
  // the npm encoders hold the ranks as lines "! FIRST_RANK tok tok ..."
  const d = JSON.parse(readFileSync(dir + "encoders/" + process.argv[3] + ".json", "utf8"));
  const out = [];
  for (const line of d.bpe_ranks.split("\n")) {
    if (!line) continue;
    const f = line.split(" ");
    let r = Number(f[1]);
    for (const t of f.slice(2)) out.push(t + " " + r++);
  }
  writeFileSync(process.argv[4], out.join("\n") + "\n");
  console.log(JSON.stringify({ encoding: process.argv[3], pat_str: d.pat_str, ranks: out.length }));
  process.exit(0);
}
const [ranksFile, pattern, textFile, runsArg] = process.argv.slice(2);
const enc = new Tiktoken(readFileSync(ranksFile, "utf8"), {}, pattern);
const buf = readFileSync(textFile);
const text = buf.toString("utf8");
let best = Infinity, ids;
for (let r = 0; r < Number(runsArg ?? 3); r++) {
  const t0 = process.hrtime.bigint();
  ids = enc.encode_ordinary(text);
  best = Math.min(best, Number(process.hrtime.bigint() - t0) * 1e-9);
}
let h = 2166136261;
for (const id of ids) h = Math.imul(h ^ id, 16777619) >>> 0;
console.log(JSON.stringify({ impl: "tiktoken", text: textFile, bytes: buf.length, ids: ids.length,
  hash: h.toString(16).padStart(8, "0"), threads: 1, mb_per_s: Number((buf.length / best * 1e-6).toFixed(3)) }));
