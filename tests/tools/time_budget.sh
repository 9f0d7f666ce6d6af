#!/usr/bin/env bash
# tools.time_budget: `lrt-train --preset tiny --time 30` spends its budget on training: the plan
# line says how the time is split, summary.json's train_seconds is at least 20 s of the 30, and
# the whole run ends within a few seconds of the budget. Run alone (RUN_SERIAL): it measures time.
#   tests/tools/time_budget.sh BIN_DIR WORK_DIR
set -u -o pipefail
bin=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
awk 'BEGIN { srand(3); n = split("the cat sat on a mat and dog ran far away from home", w, " ");
             for (i = 0; i < 80000; i++) printf "%s%s", w[int(rand() * n) + 1], (i % 12 == 11) ? ".\n" : " " }' \
  > corpus.txt
start=$SECONDS
"$bin/lrt-train" --preset tiny --data corpus.txt --time 30 --out run > run.out 2>&1 || fail "exit $?: $(tail -3 run.out)"
wall=$((SECONDS - start))
grep '^time budget 30s: ' run.out || fail "no plan line: $(head -8 run.out)"
grep -q '^time budget 30s: .* s training, [0-9]* steps; .* s evaluating, [0-9]* x [0-9]* tokens' run.out ||
  fail "the plan line does not split the time"
train_s=$(grep -o '"train_seconds":[0-9.e+-]*' run/summary.json | cut -d: -f2)
[ -n "$train_s" ] || fail "no train_seconds in summary.json"
awk -v t="$train_s" 'BEGIN { exit !(t >= 20) }' || fail "train_seconds $train_s < 20 of a 30 s budget"
[ "$wall" -le 40 ] || fail "the 30 s run took ${wall} s"
grep '^time: training' run.out
echo "PASS: --time 30 trained ${train_s} s; the run took ${wall} s in all"
