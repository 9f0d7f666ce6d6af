#!/usr/bin/env bash
# tools.save_full_disk / tools.save_unwritable: a save that cannot be written is one clear error
# line (exit status 1) and leaves the previous checkpoint as it was, still resumable.
#   tests/tools/save_errors.sh full_disk|unwritable BIN_DIR WORK_DIR
# full_disk: a run with a checkpoint at step 3 is resumed in place under `ulimit -f 64` (64 KiB per
#   file: the log fits, a checkpoint does not), with SIGXFSZ ignored by the shell (`trap "" XFSZ`)
#   and, a second time, without that (lrt-train ignores SIGXFSZ itself): write() fails with EFBIG.
#   Then it resumes without the limit and ends bit for bit where an untouched copy of the run ends.
# unwritable: as root, the run directory is another user's: lrt-train through `setpriv` as nobody
#   may neither resume into it nor create an --out inside it. Exit 77 (skipped) without root or
#   setpriv, or when nobody cannot run the build's programs.
set -u -o pipefail
what=$1 bin=$2 work=$3
export LRT_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
awk 'BEGIN { srand(3); n = split("a quick brown fox jumps over the lazy dog near the river bank", w, " ");
             for (i = 0; i < 4000; i++) printf "%s%s", w[int(rand() * n) + 1], (i % 10 == 9) ? ".\n" : " " }' \
  > corpus.txt
args=(--data corpus.txt --sequence-len 32 --batch-rows 4 --eval-every 1 --eval-tokens 128)

# run NAME EXPECTED_RC CMD...: runs CMD with stdout/stderr in NAME.out/NAME.err.
run() {
  local name=$1 want=$2
  shift 2
  "$@" > "$name.out" 2> "$name.err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want; stderr: $(tail -5 "$name.err")"
}
# one_error NAME REGEX: NAME.err ends with its only "error:" line, which matches REGEX (extended);
# the progress lines before it are the steps that ran.
one_error() {
  [ "$(grep -c '^error:' "$1.err")" = 1 ] || fail "$1: expected one error line on stderr, got: $(cat "$1.err")"
  tail -1 "$1.err" | grep -Eq "$2" || fail "$1: stderr ends with '$(tail -1 "$1.err")', which does not match '$2'"
  echo "$1: $(tail -1 "$1.err")"
}
# intact: run/ is byte for byte the copy taken before the failing tries (log.csv and loss.svg aside).
intact() {
  diff -r -x log.csv -x loss.svg run before > /dev/null || fail "$1 changed run/: $(diff -r -q -x log.csv -x loss.svg run before)"
  [ "$(cat run/latest)" = "checkpoints/step-$2" ] || fail "$1: run/latest is now '$(cat run/latest)'"
}

case $what in
full_disk)
  run first 0 "$bin/lrt-train" "${args[@]}" --steps 3 --out run
  cp -a run before && cp -a run copy
  msg="^error: \[save\] 'run': the checkpoint of step 4 was not saved: \[write\] 'run/checkpoints/\.tmp-step-000004\.[0-9]+/optim\.safetensors': cannot write: File too large; 'run/latest' still names checkpoints/step-000003, which is unchanged$"
  run limited 1 bash -c 'trap "" XFSZ; ulimit -f 64; exec "$@"' bash "$bin/lrt-train" "${args[@]}" --steps 6 --resume run --out run
  one_error limited "$msg"
  intact "the limited run" 000003
  run limited_no_trap 1 bash -c 'ulimit -f 64; exec "$@"' bash "$bin/lrt-train" "${args[@]}" --steps 6 --resume run --out run
  one_error limited_no_trap "$msg"
  intact "the limited run without trap" 000003
  run resumed 0 "$bin/lrt-train" "${args[@]}" --steps 6 --resume run --out run
  grep -q '^resumed from run/checkpoints/step-000003 at step 3 of 3$' resumed.out || fail "resumed: $(grep resumed resumed.out)"
  run untouched 0 "$bin/lrt-train" "${args[@]}" --steps 6 --resume copy --out copy
  for f in model.safetensors optim.safetensors; do
    cmp -s run/$f copy/$f || fail "run/$f differs from copy/$f: the failed saves changed how the run continues"
  done
  echo "the run resumed from step 3 after both failed saves and ended bit for bit as an untouched copy"
  ;;
unwritable)
  [ "$(id -u)" = 0 ] || { echo "skipped: needs root (to run lrt-train as another user; root itself ignores permissions)"; exit 77; }
  command -v setpriv > /dev/null || { echo "skipped: no setpriv (util-linux)"; exit 77; }
  as_nobody=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
  chmod 755 . && chmod 644 corpus.txt
  if ! "${as_nobody[@]}" "$bin/lrt-train" --help > /dev/null 2>&1 || ! "${as_nobody[@]}" cat corpus.txt > /dev/null 2>&1; then
    echo "skipped: user nobody cannot run $bin/lrt-train or read $work (a directory on the way is private)"
    exit 77
  fi
  run first 0 "$bin/lrt-train" "${args[@]}" --steps 2 --out run
  cp -a run before
  run nobody_resume 1 "${as_nobody[@]}" "$bin/lrt-train" "${args[@]}" --steps 4 --resume run --out run
  one_error nobody_resume "^error: \[mkdir\] 'run': cannot create files in this directory: Permission denied$"
  intact "lrt-train as nobody" 000002
  run nobody_new 1 "${as_nobody[@]}" "$bin/lrt-train" "${args[@]}" --steps 4 --out run/sub
  one_error nobody_new "^error: \[mkdir\] 'run/sub': cannot create directory: Permission denied$"
  intact "lrt-train as nobody (--out run/sub)" 000002
  run resumed 0 "$bin/lrt-train" "${args[@]}" --steps 4 --resume run --out run
  grep -q '^resumed from run/checkpoints/step-000002 at step 2 of 2$' resumed.out || fail "resumed: $(grep resumed resumed.out)"
  echo "root resumed the run from step 2 afterwards"
  ;;
*) fail "unknown test '$what'" ;;
esac
