#!/usr/bin/env bash
# tools.readme_examples: the README's block of example commands for the programs (the first
# ``` block under "## The programs") runs as written. Its first three lines set bin, data and
# seconds; this test sets them to the build's bin directory, a generated text and 12 seconds,
# and runs every other line of the block unchanged, in WORK_DIR (which also gets the my-test.txt
# the block evaluates). Each command must succeed; their outputs must show what the README says.
#   tests/tools/readme_examples.sh SOURCE_DIR BIN_DIR WORK_DIR
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
readme="$src/README.md"
block=$(awk '/^## The programs/ { sect = 1; next }
             sect && /^## / { exit }
             sect && /^```/ { if (inb) exit; inb = 1; next }
             inb { print }' "$readme")
[ -n "$block" ] || fail "no code block under '## The programs' in $readme"
head3=$(printf '%s\n' "$block" | head -n 3 | sed 's/=.*//' | tr '\n' ' ')
[ "$head3" = "bin data seconds " ] || fail "the block's first three lines must set bin, data, seconds (got: $head3)"
body=$(printf '%s\n' "$block" | tail -n +4)
printf '%s\n' "$body" | grep -q 'lrt-train' || fail "the block runs no lrt-train"

rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
# ~170 KB of English: the repository's own documentation, three times over.
for _ in 1 2 3; do cat "$src/README.md" "$src"/docs/*.md; done > corpus.txt
head -c 3000 "$src/docs/model.md" > my-test.txt
export LRT_NUM_THREADS=1
{
  echo "set -euo pipefail"
  echo "bin='$bin'"
  echo "data='$work/corpus.txt'"
  echo "seconds=12"
  printf '%s\n' "$body"
} > block.sh
echo "running README.md's example block ($(printf '%s\n' "$body" | grep -c 'lrt-') commands):"
printf '%s\n' "$body" | sed 's/^/  | /'
rc=0
bash block.sh > out.txt 2> err.txt || rc=$?
[ $rc -eq 0 ] || { tail -n 20 out.txt err.txt; fail "the README's block failed (exit $rc)"; }
cat out.txt
grep -q '^val_bpb: [0-9]' out.txt || fail "no 'val_bpb: X' line from lrt-train or lrt-eval"
grep -q '^{.*"split":"all".*"val_bpb":[0-9]' out.txt || fail "no JSON line from lrt-eval --split all --json"
grep -q '^The ' out.txt || fail "no generated text starting with the prompt"
[ -f runs/tiny/model.safetensors ] || fail "runs/tiny/model.safetensors was not written"
echo "PASS: README.md's example block ran as written"
