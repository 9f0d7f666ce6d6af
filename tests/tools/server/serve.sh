# Shell helpers of the lrt-server tests (sourced by tests/tools/server_tests.sh and
# tests/tools/prompt_cache.sh, with $bin and $here set): fail, start a server on a free port,
# run a node script, stop a server and check its exit. Skips the caller (exit 77) where node or
# the openai package is missing.
node_dir="${LRT_NODE_DIR:-${HOME:-/root}/.cache/lrt-node}"
if ! command -v node >/dev/null 2>&1 || [ ! -f "$node_dir/node_modules/openai/package.json" ]; then
  echo "SKIP: needs node and the openai package in $node_dir (scripts/setup.sh --server-tests installs them)"
  exit 77
fi
export NODE_PATH="$node_dir/node_modules"

fail() { echo "FAIL: $*" >&2; exit 1; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# start NAME ARGS...: lrt-server on a free port with ARGS; sets port and pid.
start() {
  local name="$1"
  shift
  : >"$name.log"  # there before the loop below reads it (the server's shell may open it later)
  "$bin/lrt-server" --port 0 "$@" 2>"$name.log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 400); do
    port=$(sed -n 's|^lrt-server: listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$name.log")
    [ -n "$port" ] && return 0
    kill -0 "$pid" 2>/dev/null || fail "$name: lrt-server exited: $(cat "$name.log")"
    sleep 0.05
  done
  fail "$name: lrt-server did not start in 20 s: $(cat "$name.log")"
}
js() { node "$here/$1" "${@:2}" || fail "$1 ${*:2}"; }
# stop_server NAME: SIGTERM to $pid, then the exit status must be 0 within 20 s.
stop_server() {
  kill -TERM "$pid"
  local rc=0
  timeout 20 tail --pid="$pid" -f /dev/null || fail "lrt-server still running 20 s after SIGTERM"
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || fail "lrt-server exited with $rc after SIGTERM: $(tail -5 "$1.log")"
  grep -q "^lrt-server: stopped after" "$1.log" || fail "no 'stopped' line: $(tail -3 "$1.log")"
}
