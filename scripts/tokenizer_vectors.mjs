// Writes the tokenizer test vectors of tests/data/tokenizer/ with the tiktoken package from npm
// (the WASM build of OpenAI's tiktoken): rank files cut from tiktoken's own encodings (their first
// 2,048 ranks, which hold all 256 single bytes) and, for each (rank file, pattern), the ids of
// tiktoken's encode_ordinary on curated texts and on random strings of a fixed character pool.
// Usage (from the repository root, once):
//   npm install --prefix /tmp/tt tiktoken@1.0.22 && NODE_PATH=/tmp/tt/node_modules node scripts/tokenizer_vectors.mjs
// Any other rank file (e.g. one lrt trained) is added with: node scripts/tokenizer_vectors.mjs FILE PATTERN_NAME
import { createRequire } from "module";
import { readFileSync, writeFileSync, appendFileSync } from "fs";
const require = createRequire(import.meta.url);
const { Tiktoken } = require("tiktoken/lite");
const tiktokenDir = require.resolve("tiktoken/lite").replace(/lite[/][^/]*$/, "");

const out = "tests/data/tokenizer";
export const patterns = {
  gpt2: String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
  cl100k: String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
  o200k: [
    String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
    String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
    String.raw`\p{N}{1,3}`, String.raw` ?[^\s\p{L}\p{N}]+[\r\n/]*`, String.raw`\s*[\r\n]+`, String.raw`\s+(?!\S)`, String.raw`\s+`,
  ].join("|"),
  nanochat: String.raw`'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`,
};

// tiktoken's npm encoders hold the ranks as lines "! FIRST_RANK tok tok ..." (consecutive ranks).
function npmRanks(name) {
  const d = JSON.parse(readFileSync(tiktokenDir + "encoders/" + name + ".json", "utf8"));
  const ranks = [];
  for (const line of d.bpe_ranks.split("\n")) {
    if (!line) continue;
    const f = line.split(" ");
    if (f[0] !== "!") throw new Error("unexpected line " + line.slice(0, 40));
    let r = Number(f[1]);
    for (const t of f.slice(2)) ranks.push([t, r++]);
  }
  return { ranks, pat: d.pat_str, special: d.special_tokens };
}

const curated = [
  "Hello, world! This is a test.",
  "The quick brown fox jumps over the lazy dog's back; it's what they'd do, isn't it? WE'LL SEE, YOU'VE GOT IT.",
  "I'm sure they've said they'll go, and she'd have 'em. 'Tis true: 's 't 're 've 'm 'll 'd 'S 'T 'RE 'Ve 'mM 'LL 'D",
  "Numbers: 1 12 123 1234 12345 123456 3.14159 -42 +7 1,000,000 0x1F 2026-12-02 10:30:45 1e-9",
  "    leading spaces\n\n\ntrailing spaces    \n\t\ttabs\tand\r\nwindows\r\n\r\nlines   \n   ",
  "a  b   c    d     e\n \n  \n   x\n\n\n\n",
  "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n\nint main() { std::vector<int> v{1,2,3}; return v[0] >= 1 && !false; }\n",
  "if (a != b) { c += d->e; } else if (x <= y || z >>= 2) { /* ... */ } // done?!",
  "café naïve résumé Ångström façade Straße über Œuvre jalapeño São Paulo Kraków",
  "Ελληνικά: Η γρήγορη καφέ αλεπού. Русский: Съешь же ещё этих мягких французских булок.",
  "中文：我们今天去公园散步。日本語：今日はいい天気ですね。한국어: 안녕하세요, 세계!",
  "العربية: مرحبا بالعالم ١٢٣ ٤٥٦. עברית: שלום עולם.",
  "हिन्दी: नमस्ते दुनिया। तमिழ்: வணக்கம். ไทย: สวัสดีครับ",
  "Emoji: 😀 😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🎉🎉🎉 — done…",
  "Combining: e\u0301 a\u0300\u0301 n\u0303 Z\u0335\u0321a\u0336l\u0334g\u0337o",
  "Spaces: a\u00a0b\u2003c\u3000d\u2028e\u0085f \u200bg",
  "Numbers elsewhere: ½ ¾ ² ³ Ⅻ ⅷ ٣٤٥ ०१२ 一二三 ①②③",
  "Long s: ſ 'ſ ſ's the 'ſt",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "!!!!!!!!!!????????........--------========********////////\\\\\\\\",
  "path/to/file.txt http://example.com/a/b?c=d&e=f#g user@example.com",
  "CamelCaseWordsAndHTTPServer getHTTPResponseCode XMLHttpRequest iPhone McDonald",
  "",
  " ",
  "\n",
  "x",
  "   \n",
];

// Random strings over a pool whose characters have had the same general category since long
// before Unicode 15.0 (the version of lrt's tables).
const pool = [..."aAbBzZeEsStT", ..."0123456789", ..." ", ..."  \t\n\r", ..."'\".,;:!?-_/\\()[]{}<>@#$%^&*+=|~`",
  ..."éÉñÑüÜßÅøæœŒ", ..."αβγΔΩ", ..."дЖЯщ", ..."中文字日本", ..."한국", ..."مرحب", ..."שלו", ..."नमस्ते", "\u0301", "\u0300",
  ..."٣०½²Ⅻ①", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028", "ſ", "😀", "👍", "🏽", "\u200d", "…", "—", "€", "©"];
let seed = 12345;
function rand(n) { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; }
const random = [];
for (let i = 0; i < 300; i++) {
  const len = 1 + rand(40);
  let s = "";
  for (let k = 0; k < len; k++) {
    // runs of one class make longer pieces
    const c = pool[rand(pool.length)];
    s += rand(4) === 0 ? c.repeat(1 + rand(4)) : c;
  }
  random.push(s);
}

function writeRanks(path, ranks) {
  writeFileSync(path, ranks.map(([t, r]) => t + " " + r).join("\n") + "\n");
}
function emit(file, enc, patName) {
  let lines = [];
  for (const text of [...curated, ...random]) {
    const ids = Array.from(enc.encode_ordinary(text));
    lines.push(patName + "\t" + Buffer.from(text, "utf8").toString("base64") + "\t" + ids.join(" "));
  }
  appendFileSync(file, lines.join("\n") + "\n");
}

const vectors = out + "/vectors.tsv";
writeFileSync(out + "/patterns.json", JSON.stringify(patterns, null, 1) + "\n");
if (process.argv.length >= 4) {
  const [file, patName] = process.argv.slice(2);
  const text = readFileSync(file, "utf8");
  const enc = new Tiktoken(text, {}, patterns[patName] ?? patName);
  const dest = out + "/vectors_" + file.split("/").pop().replace(/\.\w+$/, "") + ".tsv";
  writeFileSync(dest, "# pattern\tbase64(text)\tids of tiktoken 1.0.22 encode_ordinary with " + file + " (scripts/tokenizer_vectors.mjs)\n");
  emit(dest, enc, patName);
} else {
  writeFileSync(vectors, "# pattern\tbase64(text)\tids of tiktoken 1.0.22 encode_ordinary (scripts/tokenizer_vectors.mjs)\n");
  for (const [enc_name, short] of [["gpt2", "gpt2"], ["cl100k_base", "cl100k"], ["o200k_base", "o200k"]]) {
    const { ranks, pat } = npmRanks(enc_name);
    if (pat !== patterns[short]) throw new Error("pattern of " + enc_name + " differs from lrt's copy: " + pat);
    const cut = ranks.filter(([, r]) => r < 2048);
    const bytes = new Set(cut.map(([t]) => t).filter((t) => Buffer.from(t, "base64").length === 1));
    if (bytes.size !== 256) throw new Error(enc_name + ": the first 2048 ranks hold " + bytes.size + " single bytes");
    writeRanks(out + "/" + short + "_2k.tiktoken", cut);
    const text = cut.map(([t, r]) => t + " " + r).join("\n");
    emit(vectors, new Tiktoken(text, {}, pat), short);
    if (short === "cl100k") emit(vectors, new Tiktoken(text, {}, patterns.nanochat), "nanochat");
  }
}
