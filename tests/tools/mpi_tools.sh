#!/usr/bin/env bash
# tests/tools/mpi_tools.sh BIN_DIR: data-parallel lrt-train (and lrt-eval --core's examples over
# ranks) under `mpirun -np 2` on loopback.
#   - equality: 2 ranks give the same model.safetensors and optim.safetensors, byte for byte, as
#     one process that accumulates the same rows in two micro-batches (--micro-rows = half the
#     batch), for 20 steps of tiny baseline and tiny lrt (interleaved:2);
#   - determinism: a second 2-rank run gives the same bytes again;
#   - resume at another N: a 2-rank checkpoint of step 10 resumed by one process, and a
#     one-process checkpoint resumed by 2 ranks, both end on the uninterrupted run's bytes;
#   - refusals: --batch-rows that does not divide by the ranks, ranks that run different options;
#   - failures: a rank killed with SIGKILL, and a rank stopped (hung) with SIGSTOP, end the job
#     within a bounded time with a message, and the run's last checkpoint stays complete;
#   - --time's deadline: a slowdown shortens the plan on every rank alike.
# As root (OpenMPI's two variables), oversubscribed, with mpi_yield_when_idle so that waiting
# ranks give the 2 vCPUs away; LRT_NUM_THREADS=1 everywhere (the bytes depend on the thread count).
set -euo pipefail
bin=$(cd "$1" && pwd)
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/lrt-mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
export LRT_NUM_THREADS=1 OMPI_MCA_mpi_yield_when_idle=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
mpi=(mpirun -np 2 --oversubscribe --bind-to none)
data="$src/tests/data/tokenizer/lrt_train.txt"
small=(--preset tiny --sequence-len 16 --batch-rows 4 --eval-tokens 48 --data "$data" --steps 20 --eval-every 10)
t0=$SECONDS
stage() { echo "== [$((SECONDS - t0)) s] $*"; }
# expect RC REGEX CMD...: runs CMD, checks its exit status and that its output matches REGEX.
expect() {
  local rc=$1 re=$2 out got=0
  shift 2
  out=$(timeout 300 "$@" 2>&1) || got=$?
  [ "$got" -eq "$rc" ] || { printf '%s\n' "$out" | tail -n 20; fail "exit $got, not $rc: $*"; }
  printf '%s\n' "$out" | grep -Ezq -- "$re" || { printf '%s\n' "$out" | tail -n 20; fail "output does not match /$re/: $*"; }
  printf '%s\n' "$out" | grep -E -m1 '^error|val_bpb:' | sed 's/^/  | /' || true
}
same() {  # same DIR_A DIR_B: the two checkpoints' files are identical
  for f in model.safetensors optim.safetensors; do
    cmp -s "$1/$f" "$2/$f" || fail "$1/$f and $2/$f differ"
  done
  echo "  | $1 = $2 (model and optimizer state, byte for byte)"
}

for variant in baseline lrt; do
  stage "$variant: 1 process x 2 micro-batches against 2 ranks x 1"
  expect 0 "val_bpb" "$bin/lrt-train" --variant $variant "${small[@]}" --micro-rows 2 --out one_$variant
  expect 0 "data-parallel: 2 ranks \(mpi\), 2 rows each.*val_bpb" "${mpi[@]}" "$bin/lrt-train" --variant $variant \
    "${small[@]}" --out two_$variant
  same one_$variant two_$variant
  cmp -s <(cut -d, -f1-4 one_$variant/log.csv) <(cut -d, -f1-4 two_$variant/log.csv) || fail "the logs' losses differ"
  stage "$variant: determinism (2 ranks again)"
  expect 0 "val_bpb" "${mpi[@]}" "$bin/lrt-train" --variant $variant "${small[@]}" --out again_$variant
  same two_$variant again_$variant
  stage "$variant: resume at another N"
  expect 0 "resumed from .*step 10 of 20" "$bin/lrt-train" --resume two_$variant/checkpoints/step-000010 \
    --data "$data" --micro-rows 2 --out from2_$variant
  same two_$variant from2_$variant
  expect 0 "resumed from .*step 10 of 20" "${mpi[@]}" "$bin/lrt-train" --resume one_$variant/checkpoints/step-000010 \
    --data "$data" --out from1_$variant
  same one_$variant from1_$variant
done

stage "lrt-eval --core over 2 ranks: each rank scores every other example; the same outcomes as one process"
core=(--checkpoint one_lrt --core "$src/tests/data/core/bundle" --max-per-task 6 --mode both)
timeout 300 "$bin/lrt-eval" "${core[@]}" --examples core1.tsv > core1.out 2>&1 || fail "lrt-eval --core: $(tail -3 core1.out)"
timeout 300 "${mpi[@]}" "$bin/lrt-eval" "${core[@]}" --examples core2.tsv > core2.out 2>&1 ||
  fail "lrt-eval --core over 2 ranks: $(tail -5 core2.out)"
grep -q "x 2 ranks (mpi), the examples spread over them" core2.out || fail "lrt-eval --core over 2 ranks: $(head -6 core2.out)"
cmp -s core1.tsv core2.tsv || fail "lrt-eval --core: the examples of 2 ranks differ from one process's: $(diff core1.tsv core2.tsv | head)"
[ "$(grep -c . core1.tsv)" -gt 40 ] || fail "lrt-eval --core: too few examples: $(wc -l < core1.tsv)"
diff <(grep '^core_metric' core1.out) <(grep '^core_metric' core2.out) || fail "lrt-eval --core: CORE differs over 2 ranks"
sed 's/^/  | /' < <(grep '^core_metric' core2.out)
expect 2 "bits per byte \(--data\) run in one process" "${mpi[@]}" "$bin/lrt-eval" --checkpoint one_lrt --data "$data"

stage "refusals"
expect 1 "batch_rows \(3\) does not divide by the 2 ranks" "${mpi[@]}" "$bin/lrt-train" --variant baseline \
  "${small[@]}" --batch-rows 3 --out bad1
expect 1 "rank 1 of 2 does not run what rank 0 runs \(train options: rank 0 has .*\"seed\":0.*rank 1 has .*\"seed\":1" \
  mpirun -np 1 "$bin/lrt-train" --variant baseline "${small[@]}" --seed 0 --out bad2 : \
  -np 1 "$bin/lrt-train" --variant baseline "${small[@]}" --seed 1 --out bad2

# fail_rank SIGNAL REGEX: a long 2-rank run; once it has saved step 10, rank 1 gets SIGNAL; the
# job must end within 90 s, non-zero, with output matching REGEX, and `latest` must still name a
# complete checkpoint (one process resumes from it).
fail_rank() {
  local sig=$1 re=$2 dir=dead_$1
  LRT_DIST_TIMEOUT=10 "${mpi[@]}" "$bin/lrt-train" --variant baseline --preset tiny --sequence-len 16 --batch-rows 4 \
    --eval-tokens 48 --data "$data" --steps 100000 --eval-every 10 --out $dir >$dir.log 2>&1 &
  local job=$! waited=0
  while [ ! -e $dir/latest ]; do
    sleep 0.5; waited=$((waited + 1))
    [ $waited -lt 240 ] || { kill -9 $job; tail $dir.log; fail "no checkpoint after 120 s"; }
  done
  local ranks victim
  ranks=$(pgrep -P $job -f lrt-train | sort -n)
  [ "$(printf '%s\n' "$ranks" | wc -l)" -eq 2 ] || { kill -9 $job; fail "did not find 2 ranks under mpirun ($ranks)"; }
  victim=$(printf '%s\n' "$ranks" | tail -n 1)
  local t_kill=$SECONDS rc=0
  kill -"$sig" "$victim"
  local left=90
  while kill -0 $job 2>/dev/null && [ $left -gt 0 ]; do sleep 1; left=$((left - 1)); done
  if kill -0 $job 2>/dev/null; then
    pkill -9 -P $job || true; kill -9 $job || true
    fail "SIG$sig on a rank: the job still runs after 90 s"
  fi
  wait $job || rc=$?
  [ $rc -ne 0 ] || fail "SIG$sig on a rank: mpirun exited 0"
  grep -Eq -- "$re" $dir.log || { tail -n 20 $dir.log; fail "SIG$sig on a rank: no message matching /$re/"; }
  echo "  | SIG$sig: the job ended in $((SECONDS - t_kill)) s, exit $rc: $(grep -E -m1 -- "$re" $dir.log | cut -c1-150)"
  # Two steps past the checkpoint `latest` names (the run may have saved step 20 or later before the signal).
  local at
  at=$(sed -n 's|^checkpoints/step-0*\([0-9][0-9]*\)$|\1|p' $dir/latest)
  [ -n "$at" ] || fail "SIG$sig on a rank: $dir/latest names no step: $(cat $dir/latest)"
  expect 0 "resumed from [^ ]* at step $at of" timeout 60 "$bin/lrt-train" --resume $dir --data "$data" \
    --steps $((at + 2)) --out ${dir}_resumed
}
stage "a rank killed"
fail_rank KILL "signal 9|Killed|ending the job"
stage "a rank hung (SIGSTOP): the other gives up after LRT_DIST_TIMEOUT=10 s"
fail_rank STOP "has waited 10 s for the other ranks"

# SIGINT to rank 1 alone: the ranks agree in the step's exchange, every one stops after the same
# step, rank 0 saves and says where, the job exits 130; resumed under mpirun, the run ends on the
# uninterrupted 2-rank run's bytes.
stage "SIGINT on one rank: every rank stops after the same step, saved; the resume ends byte-identical"
long=(--variant lrt --preset tiny --sequence-len 16 --batch-rows 4 --eval-tokens 48 --data "$data" --steps 300 --eval-every 100)
expect 0 "val_bpb" "${mpi[@]}" "$bin/lrt-train" "${long[@]}" --out int_ref
set -m  # the ranks must not start with SIGINT ignored (bash does that to background jobs otherwise)
"${mpi[@]}" "$bin/lrt-train" "${long[@]}" --out int_run > int_run.log 2>&1 &
job=$!
set +m
for _ in $(seq 1 600); do grep -q '^step ' int_run.log 2>/dev/null && break; sleep 0.1; done
sleep 1
victim=$(pgrep -P $job -f lrt-train | sort -n | tail -n 1)
[ -n "$victim" ] || fail "no rank under mpirun"
kill -INT "$victim"
rc=0
wait $job || rc=$?
[ $rc = 130 ] || { tail -n 20 int_run.log; fail "SIGINT on rank 1: mpirun exited $rc, not 130"; }
line=$(grep '^stopped by SIGINT after step' int_run.log) || { tail -n 20 int_run.log; fail "no 'stopped by' line"; }
echo "  | $line"
[[ $line =~ after\ step\ ([0-9]+)\ of\ 300 ]] || fail "'$line'"
at=${BASH_REMATCH[1]}
[ "$(cat int_run/latest)" = "checkpoints/step-$(printf %06d "$at")" ] || fail "int_run/latest: $(cat int_run/latest)"
expect 0 "resumed from int_run/checkpoints/step-0*$at at step $at of 300" "${mpi[@]}" "$bin/lrt-train" \
  --resume int_run --out int_run --data "$data" --eval-tokens 48 --eval-every 100
same int_ref int_run

# --time's deadline under a slowdown (LRT_TRAIN_SLOW on every rank): rank 0's shortened horizon is
# every rank's (ranks that disagreed would wait on each other until LRT_DIST_TIMEOUT), and the run
# ends at it.
stage "--time under a slowdown: every rank takes rank 0's shortened horizon"
expect 0 "the deadline: after step [0-9]+ .*the run ends at step [0-9]+.*shortened for the deadline.*val_bpb" \
  env LRT_TRAIN_SLOW=50%:0.3 LRT_DIST_TIMEOUT=60 "${mpi[@]}" "$bin/lrt-train" --variant lrt --preset tiny \
  --sequence-len 16 --batch-rows 4 --eval-tokens 48 --data "$data" --time 12 --out deadline
n=$(grep -o '"steps":[0-9]*' deadline/summary.json | tail -n 1 | cut -d: -f2)
[ "$(cat deadline/latest)" = "checkpoints/step-$(printf %06d "$n")" ] || fail "deadline/latest: $(cat deadline/latest), not step $n"

stage "all passed"
