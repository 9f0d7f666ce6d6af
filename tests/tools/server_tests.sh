#!/usr/bin/env bash
# tools.server: lrt-server as its users meet it, on 127.0.0.1, each part bounded in time, with
# tiny checkpoints trained here for two steps (bytes: lrt; BPE: baseline):
#   1. the official openai client (npm openai@4): completions, streaming, stop strings, seeds,
#      usage, error objects, /v1/models, a load on kept-alive connections (server/openai_client.cjs);
#      chat with --chat-template plain; GET /metrics read by a Prometheus parser (server/metrics.cjs);
#   2. batch invariance: 16 concurrent clients, then staggered, each text byte-identical to
#      lrt-generate --stop-at-bos with the same arguments, on the byte and the BPE checkpoint;
#   3. load: 200 requests from 32 clients; cancelled streams free their rows; a full queue: 503;
#   4. bad input (malformed JSON, wrong types, huge values, a long prompt, invalid UTF-8, a 10 MB
#      body, a byte a second, broken HTTP, a wrong API key), the server serving throughout;
#      connections kept alive, pipelined requests answered in order, Connection: close honoured
#      (server/keepalive.cjs);
#   5. the page at / in headless Chromium (skipped, saying so, where no chromium is installed);
#   6. SIGTERM: a stream in flight finishes (or is cancelled after --shutdown-grace) with [DONE],
#      the server exits 0; command-line and checkpoint errors; kv, residual and lrt-src2
#      checkpoints served with lrt-generate's texts (the runtime's table of the build's variants);
#   7. README.md's server, curl and openai-client examples, as written (but the port and the
#      checkpoint), and docs/serving.md's copy of the first two.
# Needs node and the openai package in $LRT_NODE_DIR (default ~/.cache/lrt-node), which
# scripts/setup.sh --server-tests installs; without them the test is skipped (exit 77).
# Usage: server_tests.sh SOURCE_DIR BIN_DIR WORK_DIR
set -euo pipefail
src="$1" bin="$2" work="$3"
here="$src/tests/tools/server"
source "$here/serve.sh"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

echo "== checkpoints (tiny, two steps: random-like weights)"
cat "$src/README.md" "$src"/docs/*.md >corpus.txt
common=(--preset tiny --sequence-len 64 --batch-rows 4 --steps 2 --eval-tokens 256)
"$bin/lrt-train" --data corpus.txt --out byte_lrt "${common[@]}" >train_byte.log 2>&1 || fail "lrt-train: $(tail -5 train_byte.log)"
"$bin/lrt-tokenizer" train --data corpus.txt --vocab-size 320 --out tok.lrt >tok.log 2>&1 || fail "lrt-tokenizer: $(tail -5 tok.log)"
"$bin/lrt-train" --variant baseline --data corpus.txt --tokenizer tok.lrt --out bpe_base "${common[@]}" >train_bpe.log 2>&1 ||
  fail "lrt-train (BPE): $(tail -5 train_bpe.log)"

# cases CHECKPOINT DIR [N]: 16 requests (prompts, lengths, greedy / top-k / top-p, seeds), or the
# first N, and lrt-generate --stop-at-bos's output for each, in DIR/cases.tsv and DIR/NAME.
cases() {
  mkdir -p "$2"
  : >"$2/cases.tsv"
  local i=0 p temp k tp
  for p in "The jury said" "Once upon a time" "In 1961" "Fulton County" "é à ü — ok" "A" "Hello, world" \
    "The quick brown fox" "1 2 3 4" "Zebra" "über" "What is" "It was" "She" "The city" "x y z"; do
    [ "$i" -ge "${3:-16}" ] && break
    i=$((i + 1))
    temp=0.9 k=0 tp=1
    [ $((i % 3)) = 0 ] && temp=0
    [ $((i % 4)) = 1 ] && k=20
    [ $((i % 5)) = 2 ] && tp=0.8
    printf 'c%02d\t%s\t%d\t%s\t%d\t%s\t%d\n' "$i" "$p" $((8 + i)) "$temp" "$k" "$tp" $((i * 11)) >>"$2/cases.tsv"
    "$bin/lrt-generate" -m "$1" -p "$p" -n $((8 + i)) --temperature "$temp" --top-k "$k" --top-p "$tp" \
      --seed $((i * 11)) --stop-at-bos >"$2/$(printf c%02d $i)" 2>>"$2/generate.log" || fail "lrt-generate: $(tail -3 "$2/generate.log")"
  done
}

echo "== 1-3, 5, 6: the byte LRT, 8 rows"
start byte --checkpoint byte_lrt --parallel 8 --ctx 100000 --stream-keep-alive 0.05
js openai_client.cjs "$port"
js metrics.cjs "$port"
cases byte_lrt byte_cases
js invariance.cjs "$port" byte_cases/cases.tsv byte_cases
js load.cjs "$port"
chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$chromium_bin" ]; then
  js page.cjs "$port" "$chromium_bin"
else
  echo "skip - the page in headless Chromium: no chromium installed (scripts/setup.sh --server-tests installs it)"
fi
# SIGTERM while a stream of 2000 tokens is in flight: it finishes (length), then the server exits 0.
node "$here/sigterm.cjs" "$port" 2000 length >sigterm1.out 2>&1 &
client=$!
for _ in $(seq 1 200); do grep -q streaming sigterm1.out && break; sleep 0.05; done
grep -q streaming sigterm1.out || fail "no stream started: $(cat sigterm1.out)"
stop_server byte
wait "$client" || fail "sigterm.cjs: $(cat sigterm1.out)"
cat sigterm1.out | grep -v '^streaming'
node -e 'fetch(process.argv[1]).then(() => process.exit(1), () => process.exit(0))' "http://127.0.0.1:$port/health" ||
  fail "the server still accepts connections after SIGTERM"
echo "ok - after SIGTERM: exit status 0, no connections taken"

echo "== 2: the BPE baseline, 4 rows; chat with --chat-template plain"
start bpe --checkpoint bpe_base/model.safetensors --parallel 4 --chat-template plain
cases bpe_base bpe_cases
js invariance.cjs "$port" bpe_cases/cases.tsv bpe_cases
js chat.cjs "$port"
stop_server bpe

echo "== 4: bad input (--read-timeout 3, an API key)"
start bad --checkpoint byte_lrt --parallel 2 --read-timeout 3 --api-key sekrit --ctx 48
js bad_input.cjs "$port" sekrit
stop_server bad

echo "== 4: connections kept alive, pipelined, closed (--keep-alive-timeout 1)"
start keep --checkpoint byte_lrt --parallel 2 --keep-alive-timeout 1
js keepalive.cjs "$port" 1
stop_server keep

echo "== 4: a flood of idle and slow connections (--read-timeout 60)"
# 5,000 idle and 500 slow connections need about 5,600 descriptors in the server and as many in
# the client (each raises its soft limit to the hard one); fewer where the hard limit is lower.
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
if [ "$hard" -ge 12000 ]; then n_idle=5000 n_slow=500; else n_idle=$(((hard - 600) * 10 / 11)) n_slow=$(((hard - 600) / 11)); fi
if [ "$n_idle" -lt 500 ]; then
  echo "skip - the flood: the descriptor limit ($hard) is below what it needs (1,200)"
else
  [ "$n_idle" = 5000 ] || echo "note - the flood scaled to the descriptor limit ($hard): $n_idle idle, $n_slow slow"
  start flood --checkpoint byte_lrt --parallel 8 --read-timeout 60
  (ulimit -n "$hard" && js flood.cjs "$port" "$pid" "$n_idle" "$n_slow")
  stop_server flood
fi

echo "== 3, 6: a full queue (--parallel 1 --queue 1); SIGTERM past --shutdown-grace cancels"
start queue --checkpoint byte_lrt --parallel 1 --queue 1 --ctx 1000000 --shutdown-grace 0.5
js queue.cjs "$port"
node "$here/sigterm.cjs" "$port" 1000000 cancelled >sigterm2.out 2>&1 &
client=$!
for _ in $(seq 1 200); do grep -q streaming sigterm2.out && break; sleep 0.05; done
stop_server queue
wait "$client" || fail "sigterm.cjs: $(cat sigterm2.out)"
grep -v '^streaming' sigterm2.out

echo "== 6: command-line and checkpoint errors"
expect() {  # expect STATUS PATTERN CMD...
  local want="$1" pat="$2" rc=0
  shift 2
  timeout 30 "$@" >out.txt 2>err.txt || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, expected $want: $(cat err.txt)"
  grep -qE -- "$pat" err.txt || fail "$*: no '$pat' in: $(cat err.txt)"
  echo "ok - exit $rc: $(head -c 150 err.txt | head -1)"
}
expect 2 "checkpoint" "$bin/lrt-server"
expect 2 "no such file" "$bin/lrt-server" -m missing.safetensors
expect 2 "--chat-template expects none or plain" "$bin/lrt-server" -m byte_lrt --chat-template chatml
expect 2 "--parallel must be in" "$bin/lrt-server" -m byte_lrt --parallel 0
expect 2 "--port must be in" "$bin/lrt-server" -m byte_lrt --port 70000
# --api-key guards /detokenize too, and its help says so.
"$bin/lrt-server" --help | tr -s ' \n' ' ' | grep -q -- "--api-key KEY require Authorization: Bearer KEY on /v1/\*, /tokenize, /detokenize" ||
  fail "lrt-server --help: --api-key does not name /detokenize"
echo "ok - --api-key's help names /detokenize"
# An IPv6 host is printed in brackets in the start line's URL (where the machine has ::1).
if grep -q "^0\{31\}1 " /proc/net/if_inet6 2>/dev/null; then
  "$bin/lrt-server" -m byte_lrt --host ::1 --port 0 2>v6.log &
  v6=$!
  for _ in $(seq 1 400); do
    grep -q "listening on" v6.log && break
    sleep 0.05
  done
  kill -TERM "$v6" && wait "$v6" || true
  grep -qE "^lrt-server: listening on http://\[::1\]:[0-9]+ " v6.log || fail "--host ::1: $(head -1 v6.log)"
  echo "ok - --host ::1: $(grep -o 'http://[^ ]*' v6.log | head -1)"
else
  echo "skip - --host ::1: this machine has no IPv6 loopback"
fi
head -c 300 byte_lrt/model.safetensors >damaged.safetensors
expect 1 "damaged.safetensors" "$bin/lrt-server" -m damaged.safetensors --port 0
# Every variant of the build's pairs is served (the runtime's table), with lrt-generate's texts.
for v in kv residual lrt-src2; do
  if ! "$bin/lrt-train" --list-variants | grep -q -- "--variant $v "; then
    echo "skip - a $v checkpoint: this build's lrt-train has no $v pair"
    continue
  fi
  "$bin/lrt-train" --variant "$v" --data corpus.txt --out "run_$v" "${common[@]}" >"train_$v.log" 2>&1 ||
    fail "lrt-train $v: $(tail -3 "train_$v.log")"
  start "$v" --checkpoint "run_$v" --parallel 3
  grep -q "(model run_$v: $v, f32 weights" "$v.log" || fail "$v: the server does not name the variant: $(head -1 "$v.log")"
  cases "run_$v" "${v}_cases" 6
  js invariance.cjs "$port" "${v}_cases/cases.tsv" "${v}_cases"
  stop_server "$v"
  echo "ok - $v: served with lrt-generate's texts"
done
start hold --checkpoint byte_lrt
expect 1 "cannot listen on 127.0.0.1:$port" "$bin/lrt-server" -m byte_lrt --port "$port"
stop_server hold

echo "== 7: README.md's examples, and docs/serving.md's copy of them"
# The blocks after the lines '<!-- server example: NAME -->' (server, curl, openai) of a page.
block() { awk -v m="<!-- server example: $1 -->" '$0 == m {on = 1; next} on && /^```/ {if (in_) exit; in_ = 1; next} on && in_' "$src/${2:-README.md}"; }
block server >server_example.sh
block curl >curl_example.sh
block openai >openai_example.mjs
[ -s server_example.sh ] && [ -s curl_example.sh ] && [ -s openai_example.mjs ] || fail "README.md has no server examples"
# docs/serving.md opens with the build command, then README's server and curl lines, unchanged.
block first docs/serving.md >serving_first.sh
cat server_example.sh curl_example.sh | cmp -s - <(tail -n +2 serving_first.sh) ||
  fail "docs/serving.md's first block is not its build line + README.md's server and curl examples: $(cat serving_first.sh)"
cmd=$(cat server_example.sh)
lead="build-release/bin/lrt-server -m runs/tiny --port 8080"
[ "${cmd#"$lead"}" != "$cmd" ] || fail "README.md's server example does not start with '$lead': $cmd"
read -r -a rest <<< "${cmd#"$lead"}"
start readme -m byte_lrt "${rest[@]}"  # the README's line, with this test's checkpoint and port
echo "ok - README's server example started (checkpoint byte_lrt, port $port): $cmd"
echo "ok - docs/serving.md's first block is its build line and these two examples"
sed -i "s|127.0.0.1:8080|127.0.0.1:$port|g; s|localhost:8080|127.0.0.1:$port|g" curl_example.sh openai_example.mjs
command -v curl >/dev/null || fail "curl is not installed (scripts/setup.sh --server-tests installs it)"
bash curl_example.sh >curl.out 2>&1 || fail "the curl example: $(cat curl.out)"
grep -q '"text_completion"' curl.out || fail "the curl example printed: $(head -c 500 curl.out)"
echo "ok - README's curl example: $(head -c 120 curl.out)"
mkdir -p js && cp openai_example.mjs js/ && ln -sfn "$node_dir/node_modules" js/node_modules
(cd js && timeout 30 node openai_example.mjs >../openai.out 2>&1) || fail "the openai example: $(cat openai.out)"
[ -s openai.out ] || fail "the openai example printed nothing"
echo "ok - README's openai example printed: $(head -c 120 openai.out | tr '\n' ' ')"
stop_server readme
echo "PASS tools.server"
