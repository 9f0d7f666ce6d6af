#!/usr/bin/env bash
# tools.runtime_quickstart: lrt-runtime-quickstart (lrt's light runtime headers, the pair "lrt"
# compiled once) against lrt-quickstart (the templates): the same model, text and options print the
# same losses; the run it saves is lrt-train's layout, and lrt-generate continues its prompt with the
# text it sampled.
#   runtime_quickstart.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
cd "$work"
fail() {
  echo "tools.runtime_quickstart: $*" >&2
  exit 1
}
"$bin/lrt-quickstart" >header_only.txt
"$bin/lrt-runtime-quickstart" run >runtime.txt
cat runtime.txt
grep '^step ' header_only.txt >a.txt
grep '^step ' runtime.txt >b.txt
[ "$(wc -l <a.txt)" -eq 4 ] || fail "lrt-quickstart printed $(wc -l <a.txt) step lines, expected 4"
diff a.txt b.txt || fail "the runtime's losses differ from the templates' (above: lrt-quickstart <, runtime >)"
grep -Eq '^parallel bits per byte [0-9]+\.[0-9]+$' runtime.txt || fail "no parallel score"
grep -Eq '^sequential bits per byte [0-9]+\.[0-9]+$' runtime.txt || fail "no sequential score"
[ -f run/latest ] && [ -f run/model.safetensors ] || fail "run/ is not a run folder (latest, model.safetensors)"
sample=$(tail -n 1 runtime.txt)
[ "${#sample}" -gt 7 ] || fail "no sample: '$sample'"
"$bin/lrt-generate" -m run -p "the cat" -n 24 --temp 0 >generated.txt 2>generate.err || {
  cat generate.err >&2
  fail "lrt-generate failed on the saved run"
}
[ "$(cat generated.txt)" = "$sample" ] || fail "lrt-generate: '$(cat generated.txt)'; the runtime sampled '$sample'"
echo "tools.runtime_quickstart: the same losses as the templates, and lrt-generate's text"
