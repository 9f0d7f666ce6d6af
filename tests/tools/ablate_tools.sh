#!/usr/bin/env bash
# tools.ablate: lrt-ablate end to end on a generated text with a very small model.
#   tests/tools/ablate_tools.sh SOURCE_DIR BIN_DIR WORK_DIR
# 1. A three-line grid (variants, budgets, seeds; plus the small model's train and eval flags)
#    runs: exit 0, results.csv has arms x budgets x seeds rows whose numbers are the runs'
#    eval.json numbers, results.md has its tables, both SVGs look like SVG.
# 2. A rerun starts nothing and changes no file of any run directory (checksums).
# 3. SIGTERM to lrt-ablate after a run's first checkpoint stops it and its lrt-train; the rerun
#    resumes that run ("resumed from" in its train.log) and finishes it.
# 4. Grid errors (unknown key, bad budget) exit 2 naming FILE:LINE; a variant this build lacks is
#    an error listing what it has.
# 5. With stand-in lrt-train/lrt-eval scripts (--bin; instant, with known numbers): the arm
#    expansion (schedules, option sets, skipped pairs), the lr-sweep's choice and the statistics
#    in results.md, a failing run (reported with its log; the others finish; exit 1), --after,
#    and a pair line (the base arm at half of each budget; gap, g and delta in results.md).
# 6. A real lr-sweep when lrt-train has --lr-scale (skipped otherwise).
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
start=$SECONDS
ablate=$bin/lrt-ablate
[ -x "$ablate" ] || fail "no $ablate"
cat "$src/README.md" "$src"/docs/*.md > corpus.txt  # ~150 KB of English
export LRT_NUM_THREADS=1
small="--preset tiny --sequence-len 32 --batch-rows 4 --eval-every 5 --eval-tokens 1024"

# The value of "key" in a one-line JSON object (numbers, booleans; arrays as written).
json_get() { sed -n "s/.*\"$2\":\(\[[^]]*\]\|[^,}]*\).*/\1/p" "$1" | head -1; }
# Column named $2 of results.csv ($1) for the row whose run_dir is $3.
csv_get() {
  awk -F, -v col="$2" -v dir="$3" 'NR == 1 { for (i = 1; i <= NF; i++) idx[$i] = i; next }
                                   $idx["run_dir"] == dir { print $idx[col] }' "$1"
}
tree_sums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

# --- 1. the three-line grid, end to end ---------------------------------------------------------
cat > three.txt << EOF
variants baseline lrt
budgets 1e3 2e3
seeds 0 1
train $small
eval --eval-tokens 1024
EOF
"$ablate" three.txt --data corpus.txt --out three --jobs 2 > three.out 2>&1 || {
  tail -n 30 three.out
  fail "the three-line grid exited with $?"
}
grep -q '^lrt-ablate: 8 runs (2 arms x 2 budgets x 2 seeds): 0 done, 0 to resume, 8 to start' three.out ||
  fail "no counts line: $(head -1 three.out)"
[ "$(grep -c '^\[[0-9]/8\] start ' three.out)" = 8 ] || fail "not 8 start lines"
[ "$(grep -c '^\[[0-9]/8\] done ' three.out)" = 8 ] || fail "not 8 done lines"
grep -Eq '^\[[0-9]/8\] done lrt f2e3 s1: val_bpb [0-9.]+ \(seq\), [0-9.]+ \(par\), [0-9]+s$' three.out ||
  fail "no done line for lrt f2e3 s1 in the form '[k/n] done ... val_bpb X (seq), Y (par), Ts'"
csv=three/results.csv
[ "$(($(wc -l < "$csv") - 1))" = 8 ] || fail "results.csv has $(($(wc -l < "$csv") - 1)) rows, not 8"
for arm in baseline lrt; do
  for f in 1e3 2e3; do
    for s in 0 1; do
      d=runs/$arm/f$f/s$s
      [ -f "three/$d/result.json" ] || fail "no three/$d/result.json"
      for k in val_bpb val_bpb_parallel val_bpb_sequential; do
        want=$(json_get "three/$d/eval.json" $k) got=$(csv_get "$csv" $k "$d")
        [ "$want" = "$got" ] || fail "$d: $k is '$got' in results.csv, '$want' in eval.json"
      done
      [ -n "$(csv_get "$csv" val_bpb "$d")" ] || fail "$d: no val_bpb"
      passes=$(json_get "three/$d/eval.json" val_bpb_passes | tr -d '[]' | tr , ';')
      [ "$passes" = "$(csv_get "$csv" val_bpb_passes "$d")" ] || fail "$d: val_bpb_passes differ"
      steps=$(csv_get "$csv" steps "$d")
      [ "$steps" -gt 0 ] 2> /dev/null || fail "$d: steps '$steps'"
      if [ -f "three/$d/summary.json" ]; then
        [ "$(json_get "three/$d/summary.json" tokens)" = "$(csv_get "$csv" tokens "$d")" ] ||
          fail "$d: tokens differ between summary.json and results.csv"
      fi
    done
  done
done
[ "$(csv_get "$csv" recurrent runs/lrt/f1e3/s0)" = true ] || fail "lrt is not marked recurrent"
[ "$(csv_get "$csv" recurrent runs/baseline/f1e3/s0)" = false ] || fail "baseline is marked recurrent"
md=three/results.md
for h in '## val_bpb' '## Difference to the baseline arm, `baseline`' '## Parallel-mode val_bpb (LRT arms)' \
  '## Tokens per parameter of the baseline arm'; do
  grep -qF "$h" "$md" || fail "results.md has no '$h'"
done
grep -q '^| arm | f1e3 | f2e3 |$' "$md" || fail "results.md: no header row with the budgets"
grep -Eq '^\| lrt \| [-+]?[0-9.]+ ± [0-9.]+ \(2\) \| [-+]?[0-9.]+ ± [0-9.]+ \(2\) \|$' "$md" || fail "results.md: no lrt row"
grep -Eq '^\| lrt \| [-+][0-9.]+ ± [0-9.]+ \(2\) \| [-+][0-9.]+ ± [0-9.]+ \(2\) \|$' "$md" ||
  fail "results.md: no signed difference row for lrt"
for svg in bpb_vs_compute passes; do
  f=three/$svg.svg
  [ -s "$f" ] || fail "no $f"
  head -c 5 "$f" | grep -q '^<svg ' || fail "$f does not start with <svg"
  [ "$(tail -n 1 "$f")" = "</svg>" ] || fail "$f does not end with </svg>"
  [ "$(grep -c '<svg ' "$f")" = 1 ] || fail "$f: more than one <svg"
  grep -q '<polyline ' "$f" || fail "$f: no polyline"
  grep -q '>lrt' "$f" || fail "$f: no legend entry for lrt"
done
grep -q '>baseline<' three/bpb_vs_compute.svg || fail "bpb_vs_compute.svg: no legend entry for baseline"
if command -v python3 > /dev/null; then
  python3 -c 'import sys, xml.dom.minidom as m; [m.parse(f) for f in sys.argv[1:]]' three/*.svg ||
    fail "an SVG is not well-formed XML"
fi
pass "the three-line grid ran: 8 runs, results.csv equals the runs' eval.json, results.md and SVGs written ($((SECONDS - start))s)"

# --- 2. a rerun starts nothing -------------------------------------------------------------------
tree_sums three/runs > before.sum
"$ablate" three.txt --data corpus.txt --out three > rerun.out 2>&1 || fail "the rerun exited with $?"
grep -q '8 done, 0 to resume, 0 to start' rerun.out || fail "the rerun's counts: $(head -1 rerun.out)"
grep -q '^lrt-ablate: all 8 runs are done; nothing to run' rerun.out || fail "the rerun does not say all runs are done"
! grep -q '\] start ' rerun.out || fail "the rerun started a run"
tree_sums three/runs > after.sum
diff before.sum after.sum > /dev/null || fail "the rerun changed files in the run directories: $(diff before.sum after.sum | head -3)"
pass "a rerun starts nothing and changes no run file"

# --- 3. SIGTERM mid-run, then resume ---------------------------------------------------------------
cat > kill.txt << EOF
variants lrt
budgets 1e4
train $small
eval --eval-tokens 1024
EOF
d=kill/runs/lrt/f1e4/s0  # 39 steps, a checkpoint every 5
"$ablate" kill.txt --data corpus.txt --out kill --jobs 1 > kill1.out 2>&1 &
pid=$!
for _ in $(seq 600); do [ -e "$d/latest" ] && break; sleep 0.05; done
[ -e "$d/latest" ] || { kill -TERM $pid; fail "no $d/latest after 30 s"; }
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 143 ] || fail "lrt-ablate exited with $rc after SIGTERM, not 143: $(cat kill1.out)"
grep -q 'SIGTERM: stopping the 1 running run' kill1.out || fail "no stopping line: $(cat kill1.out)"
[ ! -e "$d/result.json" ] || fail "the stopped run has a result.json (it finished before the kill?)"
if command -v pgrep > /dev/null && pgrep -f -- "--out $d" > /dev/null; then fail "lrt-train of $d still runs"; fi
"$ablate" kill.txt --data corpus.txt --out kill --jobs 1 > kill2.out 2>&1 || fail "the resuming rerun exited with $?"
grep -q '0 done, 1 to resume, 0 to start' kill2.out || fail "the rerun does not resume: $(head -1 kill2.out)"
grep -q '^\[1/1\] start lrt f1e4 s0 (resume)$' kill2.out || fail "no '(resume)' start line"
grep -q '^resumed from .*/checkpoints/step-[0-9]* at step [1-9][0-9]* of 39$' "$d/train.log" ||
  fail "train.log shows no 'resumed from ... at step N of 39': $(grep resumed "$d/train.log")"
grep -q -- '--resume kill/runs/lrt/f1e4/s0 --eval-every 5 --eval-tokens 1024 --out' "$d/train.log" ||
  fail "the resume does not pass the evaluation flags again: $(grep -- '--resume' "$d/train.log")"
[ -f "$d/result.json" ] || fail "no result.json after the resume"
[ "$(json_get "$d/result.json" steps)" = 39 ] || fail "the resumed run did not end at step 39"
pass "SIGTERM stops lrt-ablate and its run (exit 143); the rerun resumes it from its checkpoint"

# --- 4. grid errors ------------------------------------------------------------------------------
expect_error() {  # NAME RC REGEX GRID-TEXT
  printf '%s\n' "$4" > "$1.txt"
  local rc=0
  "$ablate" "$1.txt" --data corpus.txt --out "err-$1" --dry-run > "$1.out" 2>&1 || rc=$?
  [ $rc = "$2" ] || fail "$1: exit $rc, not $2: $(cat "$1.out")"
  grep -Eq "$3" "$1.out" || fail "$1: no '$3' in: $(cat "$1.out")"
}
expect_error unknown_key 2 "^error: unknown_key.txt:2: unknown key 'budget'" $'variants baseline\nbudget 1e3'
expect_error bad_budget 2 "^error: bad_budget.txt:3: budgets are token-forwards and must be at least 1, got '-5'" \
  $'# a comment\nvariants baseline\nbudgets 1e3 -5'
expect_error word_budget 2 "^error: word_budget.txt:2: budgets expects numbers, got 'lots'" $'variants lrt\nbudgets lots'
expect_error bad_seed 2 "^error: bad_seed.txt:3: seeds must be non-negative integers, got '1.5'" \
  $'variants lrt\nbudgets 1e3\nseeds 0 1.5'
expect_error no_values 2 "^error: no_values.txt:1: 'variants' needs at least one value" $'variants\nbudgets 1e3'
expect_error no_budgets 2 "no budgets" $'variants lrt'
expect_error twice 2 "^error: twice.txt:3: arm 'lrt' is named twice" $'variants lrt\nbudgets 1e3\narm lrt --variant lrt'
expect_error lacking 2 "^error: lacking.txt:1: this build of lrt-train has no variant 'nosuch'; it has: .*--variant baseline --schedule standard" \
  $'variants baseline nosuch\nbudgets 1e3'
expect_error reserved 2 "^error: reserved.txt:3: the train line may not set --out" $'variants lrt\nbudgets 1e3\ntrain --out x'
rc=0
"$ablate" three.txt --data /nonexistent/corpus --dry-run > nodata.out 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "data '/nonexistent/corpus' (--data) does not exist" nodata.out || fail "missing data: $(cat nodata.out)"
pass "grid errors exit 2 naming FILE:LINE; a variant this build lacks lists the build's pairs"

# --- 5. stand-in programs: expansion, lr-sweep statistics, a failing run, --after ------------------
mkdir -p fakebin
cat > fakebin/lrt-train << 'EOF'
#!/usr/bin/env bash
# Stands in for lrt-train: --list-variants, or writes a "checkpoint" and lrt-train's report lines.
if [ "${1:-}" = --list-variants ]; then
  printf '%s\n' "--variant baseline --schedule standard" "--variant lrt --schedule interleaved:2" \
    "--variant lrt --schedule chunked:2" "--device cuda --variant kv --schedule interleaved:2"
  exit 0
fi
out="" seed=0 lr=1 budget=1 variant=lrt
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift ;; --seed) seed=$2; shift ;; --lr-scale) lr=$2; shift ;;
    --budget-forwards) budget=$2; shift ;; --variant) variant=$2; shift ;;
    --fail) echo "error: this arm was told to fail" >&2; exit 3 ;;
  esac
  shift
done
mkdir -p "$out" && echo "$variant $seed $lr $budget" > "$out/fake.txt" && echo checkpoints/step-000010 > "$out/latest"
echo "model: $variant with x: L=1 d=8 H=1 T=8 params 1000 (matmul 800), 1 FLOP/token-forward; 100 tokens/step (1 x 1 rows), 100 token-forwards/step"
echo "done: 10 steps, 1000 tokens, 1000 token-forwards, 500 tokens/s (1 GFLOP/s model), wall 1s"
EOF
# val_bpb = base + seed x slope + (lr - best)^2 - [budget 1e4]: baseline 2, 0.1, best lr 2; lrt 1.5, 0.2, best lr 1.
cat > fakebin/lrt-eval << 'EOF'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do [ "$1" = --checkpoint ] && dir=$2; shift; done
read -r variant seed lr budget < "$dir/fake.txt"
awk -v v="$variant" -v s="$seed" -v lr="$lr" -v b="$budget" 'BEGIN {
  base = v == "baseline" ? 2 : 1.5; slope = v == "baseline" ? 0.1 : 0.2; best = v == "baseline" ? 2 : 1
  x = base + s * slope + (lr - best) ^ 2 - (b + 0 >= 1e4 ? 1 : 0)
  if (v == "baseline")
    printf "{\"variant\":\"%s\",\"schedule\":\"standard\",\"targets\":10,\"bytes\":10,\"val_bpb\":%.10g}\n", v, x
  else
    printf "{\"variant\":\"%s\",\"schedule\":\"interleaved:2\",\"targets\":10,\"bytes\":10,\"val_bpb_parallel\":%.10g,\"val_bpb_passes\":[%.10g,%.10g,%.10g],\"val_bpb_sequential\":%.10g,\"val_bpb\":%.10g}\n", v, x + 0.05, x + 0.3, x + 0.1, x + 0.05, x, x
}'
EOF
chmod +x fakebin/lrt-train fakebin/lrt-eval
cat > expand.txt << 'EOF'
variants baseline lrt
schedules interleaved:2 chunked:2 multirefine:2
options "" "--mem-offset 2"
arm my-arm --variant lrt --n-layer 2   # an explicit arm
budgets 1e3
EOF
"$ablate" expand.txt --bin fakebin --data corpus.txt --out expand --dry-run > expand.out 2>&1 || fail "expand: exit $?: $(cat expand.out)"
for want in '^note: lrt@multirefine:2 is not in this build: skipped$' '^note: baseline has none of the schedules: runs with its default$' \
  '^lrt-ablate: 7 runs \(7 arms x 1 budgets x 1 seeds\): 0 done, 0 to resume, 7 to start' \
  '^arm baseline: lrt-train --variant baseline$' '^arm baseline\+mem-offset=2: lrt-train --variant baseline --mem-offset 2$' \
  '^arm lrt@chunked:2\+mem-offset=2: lrt-train --variant lrt --schedule chunked:2 --mem-offset 2$' \
  '^arm my-arm: lrt-train --variant lrt --n-layer 2$' 'budget-forwards 1000 --seed 0 --data corpus.txt --out expand/runs/lrt@interleaved:2/f1e3/s0 --force$'; do
  grep -Eq -- "$want" expand.out || fail "expand: no '$want' in: $(cat expand.out)"
done
[ ! -e expand ] || fail "--dry-run created $work/expand"

cat > sweep.txt << 'EOF'
variants baseline lrt
budgets 1e4 1e3
seeds 0 1
lr-sweep 0.5 1 2
EOF
rm -f after.txt
"$ablate" sweep.txt --bin fakebin --data corpus.txt --out sweep --jobs 3 --after 'echo finished >> after.txt' > sweep.out 2>&1 ||
  fail "sweep: exit $?: $(tail sweep.out)"
[ "$(wc -l < after.txt)" = 24 ] || fail "--after ran $(wc -l < after.txt) times, not 24"
[ "$(($(wc -l < sweep/results.csv) - 1))" = 24 ] || fail "sweep: results.csv has not 24 rows"
[ -d sweep/runs/lrt/f1e3/s1/lr0.5 ] || fail "no sweep/runs/lrt/f1e3/s1/lr0.5"
smd=sweep/results.md
for want in '| baseline | 2.0500 ± 0.0707 (2) @2 | 1.0500 ± 0.0707 (2) @2 |' \
  '| lrt | 1.6000 ± 0.1414 (2) @1 | 0.6000 ± 0.1414 (2) @1 |' \
  '| lrt | -0.4500 ± 0.0707 (2) | -0.4500 ± 0.0707 (2) |' \
  '| lrt | 1.6500 ± 0.1414 (2) | 0.6500 ± 0.1414 (2) |' \
  '| tokens/param | 1.25 | 1.25 |' \
  '| lrt | 0.5 | 1.8500 ± 0.1414 (2) | 0.8500 ± 0.1414 (2) |' '| baseline | 2 | 2.0500 ± 0.0707 (2) * | 1.0500 ± 0.0707 (2) * |'; do
  grep -qF -- "$want" "$smd" || fail "sweep: results.md has no row '$want':
$(cat "$smd")"
done
grep -q '^| arm | f1e3 | f1e4 |$' "$smd" || fail "sweep: budgets are not in ascending order in results.md"
[ "$(csv_get sweep/results.csv train_seconds runs/lrt/f1e3/s0/lr1)" = 2 ] || fail "train_seconds from the log is not 2"

cat > broken.txt << 'EOF'
variants baseline
arm broken --variant lrt --fail
budgets 1e3
EOF
rc=0
"$ablate" broken.txt --bin fakebin --data corpus.txt --out broken --after 'exit 4' > broken.out 2>&1 || rc=$?
[ $rc = 1 ] || fail "a failing run: exit $rc, not 1"
grep -q '^\[2/2\] FAILED broken f1e3 s0: lrt-train exited with status 3; log broken/runs/broken/f1e3/s0/train.log:$' broken.out ||
  fail "no FAILED line: $(cat broken.out)"
grep -q '^    | error: this arm was told to fail$' broken.out || fail "the failure does not show its log's last lines"
grep -q "^warning: --after 'exit 4' exited with status 4$" broken.out || fail "a failing --after gives no warning"
[ -f broken/runs/baseline/f1e3/s0/result.json ] || fail "the other run did not finish"
grep -q '1 of 2 runs done (1 now), 1 FAILED' broken.out || fail "no summary with the failure"
pass "stand-ins: arm expansion, lr-sweep choice and statistics, a failing run, --after"

# Matched-token pairs: baseline also runs at half of each budget, and results.md splits the gap.
# Stand-in eval: val_bpb = base + slope x seed - 0.1 log2(budget / 1000), baseline 2 and 0.1, lrt
# 1.9 and 0.2: gap = -0.1 + 0.1 s, g = -0.2 + 0.1 s, delta = +0.1 at every budget (seeds 0 1:
# -0.05 ± 0.0707, -0.15 ± 0.0707, +0.1 ± 0).
mkdir -p fakepair && cp fakebin/lrt-train fakepair/
cat > fakepair/lrt-eval << 'EOF2'
#!/usr/bin/env bash
while [ $# -gt 0 ]; do [ "$1" = --checkpoint ] && dir=$2; shift; done
read -r variant seed lr budget < "$dir/fake.txt"
awk -v v="$variant" -v s="$seed" -v b="$budget" 'BEGIN {
  base = v == "baseline" ? 2 : 1.9; slope = v == "baseline" ? 0.1 : 0.2
  x = base + s * slope - 0.1 * log(b / 1000) / log(2)
  printf "{\"variant\":\"%s\",\"schedule\":\"x\",\"targets\":10,\"bytes\":10,\"val_bpb\":%.10g}\n", v, x
}'
EOF2
chmod +x fakepair/lrt-eval
cat > pair.txt << 'EOF2'
variants baseline lrt
budgets 2e3 4e3
seeds 0 1
pair lrt baseline
EOF2
"$ablate" pair.txt --bin fakepair --data corpus.txt --out pair > pair.out 2>&1 || fail "pair: exit $?: $(tail pair.out)"
grep -q '^lrt-ablate: 10 runs (2 arms x 2 budgets x 2 seeds, + 2 for the pairs): 0 done' pair.out ||
  fail "pair: counts line: $(head -1 pair.out)"
[ -f pair/runs/baseline/f1e3/s1/result.json ] || fail "pair: no baseline run at half of 2e3"
[ ! -e pair/runs/lrt/f1e3 ] || fail "pair: lrt ran at half the budget too"
pmd=pair/results.md
for want in '## Matched tokens: `lrt` against `baseline` at 0.5 x the budget' '|  | f2e3 | f4e3 |' \
  '| gap | -0.0500 ± 0.0707 (2) | -0.0500 ± 0.0707 (2) |' '| g | -0.1500 ± 0.0707 (2) | -0.1500 ± 0.0707 (2) |' \
  '| δ | +0.1000 ± 0.0000 (2) | +0.1000 ± 0.0000 (2) |' '| baseline tokens/param | 1.25 | 1.25 |'; do
  grep -qF -- "$want" "$pmd" || fail "pair: results.md has no line '$want':
$(cat "$pmd")"
done
grep -q '<svg' pair/pairs.svg && grep -q 'gap' pair/pairs.svg || fail "pair: pairs.svg"
"$ablate" pair.txt --bin fakepair --data corpus.txt --out pair --dry-run > pair2.out 2>&1
grep -q ': 10 done, 0 to resume, 0 to start' pair2.out || fail "pair: rerun: $(head -1 pair2.out)"
printf 'variants baseline lrt\nbudgets 1e3\npair lrt nosuch\n' > badpair.txt
"$ablate" badpair.txt --bin fakepair --data corpus.txt --out badpair > badpair.out 2>&1
[ $? = 2 ] && grep -q "badpair.txt:3: pair: 'nosuch' is not one of the arms (baseline, lrt)" badpair.out ||
  fail "a pair with an unknown arm: $(cat badpair.out)"
pass "stand-ins: matched-token pairs (the base arm at half of each budget; gap, g and delta)"

# train-gap: a second lrt-eval per run on the training split's first N bytes, with the eval line's
# other flags; result.json's train_bpb and results.md's val - train table. The stand-in scores the
# training split 0.25 lower for the baseline and 0.5 lower for lrt, and records its arguments.
mkdir -p fakegap && cp fakepair/lrt-train fakegap/
cat > fakegap/lrt-eval << 'EOF2'
#!/usr/bin/env bash
args="$*" split=val
while [ $# -gt 0 ]; do
  case $1 in --checkpoint) dir=$2; shift ;; --split) split=$2; shift ;; esac
  shift
done
echo "$args" >> "$dir/eval-args.txt"
read -r variant seed lr budget < "$dir/fake.txt"
awk -v v="$variant" -v s="$seed" -v sp="$split" 'BEGIN {
  x = 2 + 0.1 * s - (sp == "train" ? (v == "baseline" ? 0.25 : 0.5) : 0)
  printf "{\"variant\":\"%s\",\"schedule\":\"x\",\"split\":\"%s\",\"targets\":10,\"bytes\":10,\"val_bpb\":%.10g}\n", v, sp, x
}'
EOF2
chmod +x fakegap/lrt-eval
cat > gap.txt << 'EOF2'
variants baseline lrt
budgets 2e3
seeds 0 1
eval --split val --eval-bytes 99 --batch-rows 4
train-gap 500
EOF2
"$ablate" gap.txt --bin fakegap --data corpus.txt --out gap > gap.out 2>&1 || fail "train-gap: exit $?: $(tail gap.out)"
a=gap/runs/lrt/f2e3/s1/eval-args.txt
[ "$(wc -l < "$a")" = 2 ] || fail "train-gap: not two lrt-eval runs: $(cat "$a")"
case "$(sed -n 2p "$a")" in
  *"--batch-rows 4 --split train --eval-bytes 500") ;;
  *) fail "train-gap: the training-split eval's arguments: $(sed -n 2p "$a")" ;;
esac
grep -q -- '--eval-bytes 99' <(sed -n 2p "$a") && fail "train-gap: the eval line's --eval-bytes reached the train eval"
grep -q '"train_bpb":1.6' gap/runs/lrt/f2e3/s1/result.json || fail "train-gap: result.json: $(cat gap/runs/lrt/f2e3/s1/result.json)"
head -1 gap/results.csv | grep -q ',train_bpb,' || fail "train-gap: results.csv has no train_bpb column"
for want in '## Validation − training split' '| baseline | +0.2500 ± 0.0000 (2) |' '| lrt | +0.5000 ± 0.0000 (2) |'; do
  grep -qF -- "$want" gap/results.md || fail "train-gap: results.md has no line '$want':
$(cat gap/results.md)"
done
grep -q 'train_bpb 1.6000' gap.out || fail "train-gap: the done line has no train_bpb: $(grep done gap.out)"
grep -qF 'Validation − training' pair/results.md && fail "results.md has a val - train table without a train-gap line"
printf 'variants baseline\nbudgets 1e3\ntrain-gap 1.5\n' > badgap.txt
"$ablate" badgap.txt --bin fakegap --data corpus.txt --out badgap > badgap.out 2>&1
[ $? = 2 ] && grep -q "badgap.txt:3: 'train-gap' takes one value" badgap.out || fail "a bad train-gap: $(cat badgap.out)"
pass "stand-ins: train-gap (the training split scored with the eval line's other flags; val - train)"

# core: a third lrt-eval per run on a CORE bundle (lrt-eval --core, with the core line's flags and
# only the eval line's --device/--threads); result.json's core and core_mode, results.csv's columns,
# results.md's CORE table and core_vs_compute.svg. The stand-in scores CORE 0.1 + 0.05 x seed for the
# baseline and 0.2 + 0.05 x seed for lrt, and records its arguments.
mkdir -p fakecore && cp fakepair/lrt-train fakecore/
cat > fakecore/lrt-eval << 'EOF2'
#!/usr/bin/env bash
args="$*" core="" mode=parallel
while [ $# -gt 0 ]; do
  case $1 in --checkpoint) dir=$2; shift ;; --core) core=$2; shift ;; --mode) mode=$2; shift ;; esac
  shift
done
echo "$args" >> "$dir/eval-args.txt"
read -r variant seed lr budget < "$dir/fake.txt"
if [ -n "$core" ]; then
  [ -f "$core/core.yaml" ] || { echo "error: no bundle at $core" >&2; exit 1; }
  awk -v v="$variant" -v s="$seed" -v m="$mode" 'BEGIN {
    printf "{\"variant\":\"%s\",\"mode\":\"%s\",\"core_metric\":%.10g}\n", v, m, (v == "baseline" ? 0.1 : 0.2) + 0.05 * s }'
else
  printf '{"variant":"%s","schedule":"x","targets":10,"bytes":10,"val_bpb":2}\n' "$variant"
fi
EOF2
chmod +x fakecore/lrt-eval
mkdir -p grids/bundle && : > grids/bundle/core.yaml
cat > grids/core.txt << 'EOF2'
variants baseline lrt
budgets 2e3
seeds 0 1
eval --eval-bytes 99 --threads 1
core bundle --mode sequential --max-per-task 5
EOF2
"$ablate" grids/core.txt --bin fakecore --data corpus.txt --out core > core.out 2>&1 || fail "core: exit $?: $(tail core.out)"
a=core/runs/lrt/f2e3/s1/eval-args.txt
[ "$(wc -l < "$a")" = 2 ] || fail "core: not two lrt-eval runs: $(cat "$a")"
case "$(sed -n 2p "$a")" in
  *"--core grids/bundle --json --mode sequential --max-per-task 5 --threads 1") ;;
  *) fail "core: the CORE eval's arguments: $(sed -n 2p "$a")" ;;
esac
grep -q '"core":0.25,"core_mode":"sequential"' core/runs/lrt/f2e3/s1/result.json ||
  fail "core: result.json: $(cat core/runs/lrt/f2e3/s1/result.json)"
head -1 core/results.csv | grep -q ',core,core_mode,' || fail "core: results.csv has no core columns: $(head -1 core/results.csv)"
grep -q ',0.25,sequential,' core/results.csv || fail "core: results.csv rows: $(cat core/results.csv)"
for want in '## CORE (sequential mode)' '| baseline | 0.1250 ± 0.0354 (2) |' '| lrt | 0.2250 ± 0.0354 (2) |'; do
  grep -qF -- "$want" core/results.md || fail "core: results.md has no line '$want':
$(cat core/results.md)"
done
grep -q 'CORE (sequential mode) vs compute' core/core_vs_compute.svg || fail "core: core_vs_compute.svg"
grep -q 'CORE 0.2500 (sequential)' core.out || fail "core: the done line has no CORE: $(grep done core.out)"
grep -qF '## CORE' gap/results.md && fail "results.md has a CORE table without a core line"
[ -e gap/core_vs_compute.svg ] && fail "core_vs_compute.svg without a core line"
printf 'variants baseline\nbudgets 1e3\ncore bundle --mode both\n' > grids/badcore.txt
"$ablate" grids/badcore.txt --bin fakecore --data corpus.txt --out badcore > badcore.out 2>&1
[ $? = 2 ] && grep -q "badcore.txt:3: the core line's --mode must be parallel or sequential, got 'both'" badcore.out ||
  fail "a core line with --mode both: $(cat badcore.out)"
printf 'variants baseline\nbudgets 1e3\ncore bundle --eval-bytes 5\n' > grids/badcore2.txt
"$ablate" grids/badcore2.txt --bin fakecore --data corpus.txt --out badcore > badcore.out 2>&1
[ $? = 2 ] && grep -q "badcore2.txt:3: 'core' takes a CORE bundle's folder" badcore.out ||
  fail "a core line with a bits-per-byte flag: $(cat badcore.out)"
printf 'variants baseline\nbudgets 1e3\ncore nowhere\n' > grids/badcore3.txt
"$ablate" grids/badcore3.txt --bin fakecore --data corpus.txt --out badcore > badcore.out 2>&1
[ $? = 2 ] && grep -q "badcore3.txt:3: core: '.*grids/nowhere' is not a CORE bundle (no core.yaml in it)" badcore.out ||
  fail "a core line without a bundle: $(cat badcore.out)"
pass "stand-ins: core (each run scored on CORE in the line's mode; results.csv, results.md, core_vs_compute.svg)"

# An arm's own --lr-scale (a rate an earlier sweep chose), refused beside an lr-sweep line.
printf 'arm base2 --variant baseline --lr-scale 2\narm lrt --variant lrt\nbudgets 1e3\neval --split tune\n' > armlr.txt
"$ablate" armlr.txt --bin fakegap --data corpus.txt --out armlr > armlr.out 2>&1 || fail "arm --lr-scale: $(tail armlr.out)"
read -r _ _ lr _ < armlr/runs/base2/f1e3/s0/fake.txt
[ "$lr" = 2 ] || fail "arm --lr-scale: lrt-train got --lr-scale '$lr'"
grep -q '"lr_scale":2,' armlr/runs/base2/f1e3/s0/result.json && grep -q '"lr_scale":1,' armlr/runs/lrt/f1e3/s0/result.json ||
  fail "arm --lr-scale: result.json's lr_scale"
grep -qF 'bits per byte on the tuning slice** (`--split tune`' armlr/results.md ||
  fail "results.md does not say the numbers are on the tuning slice: $(grep -m1 'bits per byte' armlr/results.md)"
grep -qF -- '- Budgets (columns, `f<budget>`) are the training compute' armlr/results.md ||
  fail "results.md lost its line on budgets: $(head -8 armlr/results.md)"
grep -qF 'bits per byte on the validation split**' gap/results.md ||
  fail "results.md does not say the numbers are on the validation split: $(grep -m1 'bits per byte' gap/results.md)"
printf 'arm a --variant baseline --lr-scale 2\nbudgets 1e3\nlr-sweep 1 2\n' > armlr2.txt
"$ablate" armlr2.txt --bin fakegap --data corpus.txt --out armlr2 > armlr2.out 2>&1
[ $? = 2 ] && grep -q "armlr2.txt:1: arm 'a' sets --lr-scale and the grid has an lr-sweep" armlr2.out ||
  fail "arm --lr-scale beside lr-sweep: $(cat armlr2.out)"
pass "stand-ins: an arm's own --lr-scale (refused beside an lr-sweep)"

# --- 6. a real lr-sweep (once lrt-train has --lr-scale) ----------------------------------------------
if "$bin/lrt-train" --help | grep -q -- '--lr-scale'; then
  cat > lr.txt << EOF
variants baseline
budgets 5e2
lr-sweep 0.5 2
train $small
eval --eval-tokens 1024
EOF
  "$ablate" lr.txt --data corpus.txt --out lr > lr.out 2>&1 || fail "the lr sweep exited with $?: $(tail lr.out)"
  grep -Eq '^\| baseline \| [0-9.]+ ± – \(1\) @(0.5|2) \|$' lr/results.md || fail "lr sweep: no row with the chosen scale"
  pass "a real lr-sweep runs and reports its chosen scale"
else
  echo "SKIP: a real lr-sweep (this lrt-train has no --lr-scale yet)"
fi
echo "PASS: tools.ablate in $((SECONDS - start))s"
