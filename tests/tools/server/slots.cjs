// Saved sessions (POST /slots/{id}?action=save|restore|erase, examples/tools/server/slots.hpp) on
// a server of one row with --slot-save-path DIR: a conversation saved, erased and restored
// continues with the bits of a server without a cache; damaged, truncated, foreign-model and
// path-escaping files are refused with one line, and nothing outside DIR is read or written.
//   node slots.cjs PORT PORT_OFF DIR phase   (phase: first, or again: a fresh server restoring
//   what `first` saved; FOREIGN, a session of another model, is DIR/foreign.bin when present)
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { check, assert, equal, post } = require("./common.cjs");

const [, , , offPort, dir, phase] = process.argv;

async function complete(port, body) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const text = await r.text();
  equal(r.status, 200, `status on port ${port}: ${text.slice(0, 300)}`);
  const j = JSON.parse(text);
  return { text: j.choices[0].text, logprobs: JSON.stringify(j.choices[0].logprobs),
           cached: j.usage.prompt_tokens_details.cached_tokens, slot: j.id_slot };
}
async function slot(action, body, id = 0) {
  return post(`/slots/${id}?action=${action}`, body);
}
function refused(r, status, pattern, label) {
  equal(r.status, status, `${label}: status (${r.text})`);
  const m = r.json && r.json.error && r.json.error.message;
  assert(typeof m === "string" && !m.includes("\n"), `${label}: not one line: ${r.text}`);
  assert(pattern.test(m), `${label}: ${m}`);
}
const first = "Notes on the river town. The bridge is old and the market opens early on Mondays.";
const body = (prompt, seed) => ({ prompt, max_tokens: 10, temperature: 0.9, seed, logprobs: 2 });

(async () => {
  if (phase === "first") {
    let saved = 0;
    await check("a slot saved, erased and restored: the conversation continues with the same bits", async () => {
      const a = await complete(process.argv[2], body(first, 1));
      equal(a.slot, 0, "the answer's id_slot (one row)");
      const s = await slot("save", { filename: "s1.bin" });
      equal(s.status, 200, s.text);
      saved = s.json.n_saved;
      assert(saved > 10 && s.json.n_written > saved, `saved ${s.text}`);
      assert(fs.existsSync(path.join(dir, "s1.bin")), "no s1.bin in the slot folder");
      fs.writeFileSync(path.join(dir, "next_prompt.txt"), first + a.text + " And then?");
      const e = await slot("erase", {});
      equal(e.status, 200, e.text);
      equal(e.json.n_erased, saved, "erased positions");
      refused(await slot("save", { filename: "s2.bin" }), 400, /slot 0 holds no state/, "saving an erased slot");
      const r = await slot("restore", { filename: "s1.bin" });
      equal(r.status, 200, r.text);
      equal(r.json.n_restored, saved, "restored positions");
      const next = fs.readFileSync(path.join(dir, "next_prompt.txt"), "utf8");
      const [x, y] = await Promise.all([complete(process.argv[2], body(next, 2)), complete(offPort, body(next, 2))]);
      // At least the first prompt (the answer, resent as text, may encode differently: random weights
      // write ill-formed UTF-8, which the text replaces).
      assert(x.cached > 20, `the restored session supplied ${x.cached} of ${saved} tokens`);
      equal(x.text, y.text, "text after the restore");
      equal(x.logprobs, y.logprobs, "log-probabilities after the restore");
    });
    await check("bad slot requests: one line each, nothing outside the folder", async () => {
      refused(await slot("save", { filename: "../escape.bin" }), 400, /starts with '\.'/, "../");
      refused(await slot("save", { filename: "x/../../escape.bin" }), 400, /only letters, digits/, "x/../..");
      refused(await slot("save", { filename: "/tmp/abs.bin" }), 400, /only letters, digits/, "absolute");
      refused(await slot("save", { filename: ".hidden" }), 400, /starts with '\.'/, "hidden");
      refused(await slot("restore", { filename: "a/b" }), 400, /only letters, digits/, "a/b");
      refused(await slot("restore", { filename: "missing.bin" }), 404, /cannot be read/, "missing");
      refused(await slot("save", {}), 400, /filename/, "no filename");
      refused(await slot("save", { filename: "x.bin" }, 7), 400, /slot id 7 outside \[0, 1\)/, "slot id");
      refused(await slot("load", { filename: "x.bin" }), 400, /action=save, restore or erase/, "action");
      assert(!fs.existsSync(path.join(dir, "..", "escape.bin")), "a file was written outside the folder");
    });
    return;
  }
  await check("a fresh server restores the session and continues with the same bits", async () => {
    const r = await slot("restore", { filename: "s1.bin" });
    equal(r.status, 200, r.text);
    const next = fs.readFileSync(path.join(dir, "next_prompt.txt"), "utf8");
    const [x, y] = await Promise.all([complete(process.argv[2], body(next, 2)), complete(offPort, body(next, 2))]);
    assert(x.cached > 20, `the restored session supplied ${x.cached} of ${r.json.n_restored}`);
    equal(x.text, y.text, "text after the restore");
    equal(x.logprobs, y.logprobs, "log-probabilities after the restore");
  });
  await check("damaged, truncated and foreign session files are refused with one line", async () => {
    const good = fs.readFileSync(path.join(dir, "s1.bin"));
    const damaged = Buffer.from(good);
    damaged[damaged.length - 5] ^= 0x40;  // a bit of the last state
    fs.writeFileSync(path.join(dir, "damaged.bin"), damaged);
    refused(await slot("restore", { filename: "damaged.bin" }), 400, /damaged: its checksum/, "damaged");
    fs.writeFileSync(path.join(dir, "truncated.bin"), good.subarray(0, good.length - 100));
    refused(await slot("restore", { filename: "truncated.bin" }), 400, /truncated\.bin/, "truncated");
    fs.writeFileSync(path.join(dir, "garbage.bin"), "not a session at all");
    refused(await slot("restore", { filename: "garbage.bin" }), 400, /garbage\.bin/, "garbage");
    if (fs.existsSync(path.join(dir, "foreign.bin")))
      refused(await slot("restore", { filename: "foreign.bin" }), 400, /saved from another model/, "foreign");
  });
})();
