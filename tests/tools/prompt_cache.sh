#!/usr/bin/env bash
# tools.prompt_cache: lrt-server's prompt cache gives the same bits as no cache
# (tests/tools/server/prompt_cache.cjs), for byte and BPE checkpoints of baseline, lrt and
# lrt-release (tiny, trained here for two steps at sequence_len 64, served with --ctx 2048: past
# the training context). Per checkpoint: a server with the default cache, one with --cache-mb 0,
# and one with a budget of 1 MiB (a few hundred positions) that must evict; then saved sessions
# (/slots: server/slots.cjs) on a server of one row, restored by a fresh one.
# Needs node (scripts/setup.sh --server-tests); skipped (exit 77) without it.
# Usage: prompt_cache.sh SOURCE_DIR BIN_DIR WORK_DIR
set -euo pipefail
src="$1" bin="$2" work="$3"
here="$src/tests/tools/server"
source "$here/serve.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

cat "$src/README.md" "$src"/docs/*.md >corpus.txt
common=(--preset tiny --sequence-len 64 --batch-rows 4 --steps 2 --eval-tokens 256)
"$bin/lrt-tokenizer" train --data corpus.txt --vocab-size 320 --out tok.lrt >tok.log 2>&1 ||
  fail "lrt-tokenizer: $(tail -5 tok.log)"
for tok in byte bpe; do
  for v in baseline lrt lrt-release; do
    name="${tok}_$v"
    extra=()
    [ "$tok" = bpe ] && extra=(--tokenizer tok.lrt)
    "$bin/lrt-train" --variant "$v" --data corpus.txt --out "$name" "${common[@]}" "${extra[@]}" >"$name.train.log" 2>&1 ||
      fail "lrt-train $name: $(tail -5 "$name.train.log")"
    start "${name}_off" --checkpoint "$name" --parallel 3 --ctx 2048 --cache-mb 0
    off_pid=$pid off_port=$port
    grep -q "^lrt-server: prompt cache off" "${name}_off.log" || fail "$name: no 'prompt cache off' line"
    start "${name}_small" --checkpoint "$name" --parallel 3 --ctx 2048 --cache-mb 1
    small_pid=$pid small_port=$port
    start "${name}_cached" --checkpoint "$name" --parallel 3 --ctx 2048
    grep -q "^lrt-server: prompt cache 1024 MiB; a position's state takes" "${name}_cached.log" ||
      fail "$name: no prompt cache line: $(cat "${name}_cached.log")"
    echo "== $name: $(grep '^lrt-server: prompt cache' "${name}_cached.log" | cut -c13-)"
    js prompt_cache.cjs "$port" "$off_port" "$small_port" $((1 << 20))
    stop_server "${name}_cached"
    pid=$small_pid && stop_server "${name}_small"
    # Saved sessions: saved, erased and restored on one server; restored by a fresh one; bad files
    # (and the previous checkpoint's session: another model's) refused.
    mkdir -p "${name}_slots"
    [ -n "${prev_session:-}" ] && cp "$prev_session" "${name}_slots/foreign.bin"
    start "${name}_slot1" --checkpoint "$name" --parallel 1 --ctx 2048 --slot-save-path "${name}_slots"
    js slots.cjs "$port" "$off_port" "${name}_slots" first
    stop_server "${name}_slot1"
    start "${name}_slot2" --checkpoint "$name" --parallel 1 --ctx 2048 --slot-save-path "${name}_slots"
    js slots.cjs "$port" "$off_port" "${name}_slots" again
    stop_server "${name}_slot2"
    [ -e escape.bin ] && fail "a session was written outside --slot-save-path"
    prev_session="$PWD/${name}_slots/s1.bin"
    pid=$off_pid && stop_server "${name}_off"
  done
done
echo "PASS tools.prompt_cache"
