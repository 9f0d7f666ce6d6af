// lrt-server's page at /: a prompt, temperature and max tokens, and the completion streamed into
// the page as it comes (POST /v1/completions with stream: true, read as server-sent events).
// Plain HTML and JavaScript, no external resources. The query string can fill the form and
// start it (?prompt=...&max_tokens=...&temperature=...&seed=...&run=1); when a completion ends,
// the page sets data-state="done" on <body>, the text it showed percent-encoded in
// data-completion and the finish reason in #reason (tests/tools/server/page.cjs loads it in
// headless Chromium and reads the DOM).
#pragma once

namespace server {

inline constexpr const char* page_html = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>lrt-server</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  textarea { width: 100%; height: 7rem; font: 1rem/1.4 ui-monospace, monospace; box-sizing: border-box; }
  label { margin-right: 1rem; }
  input[type=number] { width: 6rem; }
  #out { white-space: pre-wrap; font: 1rem/1.4 ui-monospace, monospace; background: #f5f5f5; padding: 0.75rem;
         min-height: 4rem; border-radius: 4px; }
  #out .prompt { color: #777; }
  #status { color: #555; margin: 0.5rem 0; }
  .error { color: #b00; }
</style>
</head>
<body data-state="idle">
<h1>lrt-server</h1>
<p id="model">model: loading...</p>
<form id="form">
  <textarea id="prompt" placeholder="Type a prompt; the model continues it.">The </textarea>
  <p>
    <label>temperature <input id="temperature" type="number" min="0" max="100" step="0.05" value="0.8"></label>
    <label>max tokens <input id="max_tokens" type="number" min="0" step="1" value="128"></label>
    <label>top p <input id="top_p" type="number" min="0.01" max="1" step="0.01" value="1"></label>
    <label>seed <input id="seed" type="number" step="1" placeholder="random"></label>
    <label>API key <input id="key" type="password" size="10"></label>
  </p>
  <p><button id="go" type="submit">Generate</button> <button id="stop" type="button" disabled>Stop</button></p>
</form>
<div id="status"></div>
<div id="out"></div>
<p>finish reason: <span id="reason"></span></p>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let controller = null;

async function showModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    const j = await r.json();
    if (j.data) {
      const m = j.data[0];
      $("model").textContent = "model: " + m.id + " (" + m.meta.variant + ", context " + m.meta.context + ")";
    } else if (j.error) {
      $("model").textContent = "model: " + j.error.message;
    }
  } catch (e) { $("model").textContent = "model: " + e; }
}

function headers() {
  const h = { "Content-Type": "application/json" };
  if ($("key").value) h["Authorization"] = "Bearer " + $("key").value;
  return h;
}

async function generate(ev) {
  if (ev) ev.preventDefault();
  const body = {
    prompt: $("prompt").value,
    max_tokens: Number($("max_tokens").value),
    temperature: Number($("temperature").value),
    top_p: Number($("top_p").value),
    stream: true,
  };
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  const out = $("out");
  out.textContent = "";
  const shown = document.createElement("span");
  shown.className = "prompt";
  shown.textContent = body.prompt;
  out.appendChild(shown);
  const gen = document.createElement("span");
  gen.id = "completion";
  out.appendChild(gen);
  $("reason").textContent = "";
  $("status").textContent = "generating...";
  $("status").className = "";
  document.body.dataset.state = "running";
  $("go").disabled = true;
  $("stop").disabled = false;
  controller = new AbortController();
  const t0 = performance.now();
  let tokens = 0;
  try {
    const r = await fetch("/v1/completions", { method: "POST", headers: headers(), body: JSON.stringify(body),
                                               signal: controller.signal });
    if (!r.ok) {
      const j = await r.json().catch(() => ({ error: { message: r.statusText } }));
      throw new Error(r.status + ": " + j.error.message);
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let at;
      while ((at = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, at);
        buf = buf.slice(at + 2);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        const c = j.choices[0];
        if (c.text) { gen.textContent += c.text; tokens++; }
        if (c.finish_reason) $("reason").textContent = c.finish_reason;
      }
    }
    const s = (performance.now() - t0) / 1000;
    $("status").textContent = "done in " + s.toFixed(2) + " s";
  } catch (e) {
    $("status").textContent = e.name === "AbortError" ? "stopped" : String(e.message || e);
    $("status").className = e.name === "AbortError" ? "" : "error";
  } finally {
    $("go").disabled = false;
    $("stop").disabled = true;
    controller = null;
    document.body.dataset.completion = encodeURIComponent(gen.textContent);
    document.body.dataset.state = "done";
  }
}

$("form").addEventListener("submit", generate);
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
const q = new URLSearchParams(location.search);
for (const k of ["prompt", "max_tokens", "temperature", "top_p", "seed", "key"]) if (q.has(k)) $(k).value = q.get(k);
showModel();
if (q.get("run") === "1") generate();
</script>
</body>
</html>
)HTML";

}  // namespace server
