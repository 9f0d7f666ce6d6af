#!/usr/bin/env bash
# tools.bpe: the BPE tokenizer from the programs, as a user types it: lrt-tokenizer train / encode /
# decode / stats / convert / ranks, then lrt-train --vocab-size (a tokenizer trained on the training
# split) and --tokenizer FILE, lrt-eval (--eval-bytes: the same bytes as a byte model), lrt-generate,
# and the refusals: a mismatched tokenizer on eval, generate and resume; bad rank files, patterns
# and vocabulary sizes, an empty corpus.
#   tests/tools/bpe_tools.sh SOURCE_DIR BIN_DIR WORK_DIR
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
export LRT_NUM_THREADS=1
tok="$bin/lrt-tokenizer"
# ~110 KB of English and code: the repository's own documentation, plus a file in other scripts.
cat "$src/README.md" "$src"/docs/*.md > corpus.txt
printf 'café naïve Straße — Ελληνικά русский 中文 日本語 😀 1234567\n' > mixed.txt

# expect RC REGEX CMD...: runs CMD, checks its exit status and that stdout+stderr match REGEX.
expect() {
  local rc=$1 re=$2; shift 2
  local out got=0
  out=$("$@" 2>&1) || got=$?
  [ "$got" -eq "$rc" ] || { printf '%s\n' "$out" | tail -n 20; fail "exit $got, not $rc: $*"; }
  printf "%s\n" "$out" | grep -Ezq -- "$re" || { printf '%s\n' "$out" | tail -n 20; fail "output does not match /$re/: $*"; }
  printf '%s\n' "$out" | tail -n 3 | sed 's/^/  | /'
}

echo "== lrt-tokenizer"
expect 0 "merges 255/255 .*trained 511 ranks \(256 bytes \+ 255 merges\) \+ 1 special = 512 ids .*wrote tok512.lrt" \
  "$tok" train --data corpus.txt --vocab-size 512 --out tok512.lrt
expect 0 "trained" "$tok" train --data corpus.txt --vocab-size 512 --out again.lrt --threads 2
cmp tok512.lrt again.lrt || fail "two trainings of the same corpus differ"
"$tok" encode --tokenizer tok512.lrt --file mixed.txt > mixed.ids || fail "encode"
grep -Eq '^[0-9]+( [0-9]+)*$' mixed.ids || fail "encode printed: $(head -c 200 mixed.ids)"
"$tok" decode --tokenizer tok512.lrt --file mixed.ids > mixed.back || fail "decode"
cmp mixed.txt mixed.back || fail "decode(encode(x)) != x"
printf 'hello world' | "$tok" encode --tokenizer tok512.lrt > stdin.ids || fail "encode from standard input"
[ "$(printf 'hello world' | "$tok" encode --tokenizer tok512.lrt | "$tok" decode --tokenizer tok512.lrt)" = "hello world" ] \
  || fail "round trip through standard input"
expect 0 "bytes_per_token: [1-9]" "$tok" stats --tokenizer tok512.lrt --data corpus.txt
expect 0 "wrote tok512.tiktoken: 511 ranks" "$tok" ranks --tokenizer tok512.lrt --out tok512.tiktoken
expect 0 "wrote conv.lrt: 511 ranks \+ 1 specials" "$tok" convert --ranks tok512.tiktoken --pattern nanochat --out conv.lrt
[ "$("$tok" encode --ranks tok512.tiktoken --pattern nanochat --file mixed.txt)" = "$(cat mixed.ids)" ] \
  || fail "--ranks FILE --pattern nanochat encodes otherwise than the tokenizer file"
expect 2 "unknown command 'tran'" "$tok" tran
expect 2 "lrt-tokenizer: no command \\(known: train, .*\\); see --help" "$tok"
expect 1 "unknown pattern 'nanochatt'" "$tok" train --data corpus.txt --vocab-size 512 --pattern nanochatt --out x.lrt
expect 1 "vocab" "$tok" train --data corpus.txt --vocab-size 200 --out x.lrt
: > empty.txt
expect 1 "empty" "$tok" train --data empty.txt --vocab-size 300 --out x.lrt
printf 'IQ== 0\nIQ== 1\n' > dup.tiktoken
expect 1 "dup.tiktoken:2: " "$tok" encode --ranks dup.tiktoken --file mixed.txt
printf 'not*base64 0\n' > bad.tiktoken
expect 1 "bad.tiktoken:1: " "$tok" encode --ranks bad.tiktoken --file mixed.txt
expect 2 "give --tokenizer FILE or --ranks FILE" "$tok" encode --file mixed.txt
expect 1 "not a token id" "$tok" decode --tokenizer tok512.lrt --file mixed.txt
expect 1 "999999" bash -c "echo 1 999999 | '$tok' decode --tokenizer tok512.lrt"

echo "== lrt-train / lrt-eval / lrt-generate with BPE"
common=(--preset tiny --sequence-len 32 --batch-rows 4 --steps 3 --eval-tokens 512)
expect 0 "tokenizer: trained BPE, 384 ids.*val_bpb: [0-9]" "$bin/lrt-train" --variant baseline --data corpus.txt --vocab-size 384 --out bpe_run "${common[@]}"
[ -f bpe_run/tokenizer.lrt ] || fail "no bpe_run/tokenizer.lrt"
expect 0 "tokenizer: BPE, 384 ids.*val_bpb: [0-9]" "$bin/lrt-train" --data corpus.txt --tokenizer bpe_run/tokenizer.lrt --out lrt_run "${common[@]}"
expect 0 "tokenizer: BPE, 384 ids.*val_bpb: [0-9]" "$bin/lrt-eval" --checkpoint bpe_run --data corpus.txt
expect 0 "tokenizer: BPE, 384 ids.*val_bpb_sequential: [0-9]" "$bin/lrt-eval" --checkpoint lrt_run --data corpus.txt
expect 0 "the first 3000 of .* bytes.*targets scored: [0-9]+ \(3000 bytes\)" "$bin/lrt-eval" --checkpoint bpe_run --data corpus.txt --eval-bytes 3000
expect 0 "^The" "$bin/lrt-generate" --checkpoint bpe_run --prompt "The" -n 20 --seed 1
expect 0 "^The" "$bin/lrt-generate" --checkpoint lrt_run/model.safetensors --prompt "The" -n 20 --temperature 0
# CORE with the checkpoint's BPE (its spans are token spans: the common prefix of the choices may
# end inside the query's last word), five of the test bundle's tasks, six items each.
core_tasks=lrt_next_word,lrt_next_phrase_3shot,lrt_halves_1shot,lrt_continue_2shot,lrt_mixed_length
expect 0 "tokenizer: BPE, 384 ids.*mode: parallel.*lrt_halves_1shot +schema +1 +6 .*core_metric: -?[0-9]" \
  "$bin/lrt-eval" --checkpoint lrt_run --core "$src/tests/data/core/bundle" --tasks "$core_tasks" --max-per-task 6
# a byte model on the same bytes
expect 0 "val_bpb" "$bin/lrt-train" --variant baseline --data corpus.txt --out byte_run "${common[@]}"
expect 0 "the first 3000 of .* bytes.*targets scored: 3000 \(3000 bytes\)" "$bin/lrt-eval" --checkpoint byte_run --data corpus.txt --eval-bytes 3000
# refusals
expect 0 "trained" "$tok" train --data corpus.txt --vocab-size 384 --pattern gpt2 --out other.lrt
expect 1 "was trained with BPE" "$bin/lrt-eval" --checkpoint bpe_run --data corpus.txt --tokenizer other.lrt
expect 1 "was trained with BPE" "$bin/lrt-generate" --checkpoint bpe_run --prompt x --tokenizer other.lrt
expect 1 "was trained with bytes" "$bin/lrt-eval" --checkpoint byte_run --data corpus.txt --tokenizer other.lrt
expect 1 "checkpoint was trained with BPE" "$bin/lrt-train" --resume bpe_run --tokenizer other.lrt --data corpus.txt --out bpe_run --steps 4
expect 2 "not both" "$bin/lrt-train" --data corpus.txt --tokenizer other.lrt --vocab-size 300 --out x
expect 2 "vocabulary of 32768 ids.*--tokenizer FILE or --vocab-size N" "$bin/lrt-train" --preset d12 --data corpus.txt --out x --steps 1
expect 2 "--pattern goes with --vocab-size" "$bin/lrt-train" --data corpus.txt --pattern gpt2 --out x
expect 0 "resumed from .* at step 3 .*step 4/4" "$bin/lrt-train" --resume bpe_run --data corpus.txt --out bpe_run --steps 4
echo "PASS"
