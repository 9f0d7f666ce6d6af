#!/usr/bin/env bash
# tools.kill_resume: lrt-train killed with SIGKILL at random moments during frequent saves always
# resumes from the last complete checkpoint, and the run that finishes after all the kills ends
# bit for bit where an uninterrupted run ends (model, optimizer state, and log.csv but its
# seconds column).
#   tests/tools/kill_resume.sh BIN_DIR WORK_DIR [KILLS [SEED]]
# One uninterrupted reference run (60 steps, a checkpoint after every step), timed, then up to
# KILLS (default 40) tries that start the run (or resume it in place when a checkpoint exists) and
# SIGKILL it after a delay drawn from bash's $RANDOM seeded with SEED (default 2024): the time
# the reference took to its first checkpoint plus up to three of its steps (each with its save), or
# until the try has saved three steps past where it began, whichever comes first,
# so that a try is killed while it trains and saves: the draws are reproducible, the moments they
# land on are not. At least 5 tries must resume (kills after a checkpoint). A last try runs to the end. Checks: every
# resume prints "resumed from DIR/checkpoints/step-N at step N" with N the step DIR/latest named
# before the try (so N never decreases) and no fallback warning; the final files equal the
# reference's byte for byte. (Only without a DIR/latest, after a kill between the first step
# directory's rename and the first DIR/latest, may a resume fall back, with its warning.) Prints how many kills landed inside a save and where.
set -u -o pipefail
bin=$1 work=$2 max_kills=${3:-40} seed=${4:-2024}
export LRT_NUM_THREADS=1  # bit for bit needs the same thread count in every run
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
awk 'BEGIN { srand(7); n = split("the cat sat on a mat and dog ran far away from home", w, " ");
             for (i = 0; i < 6000; i++) printf "%s%s", w[int(rand() * n) + 1], (i % 12 == 11) ? ".\n" : " " }' \
  > corpus.txt
# One row of 32 tokens per step: a step costs about as much as its save (a 4 MB model and 5 MB of
# optimizer state, fsynced), so that many kills land inside one.
steps=60
args=(--data corpus.txt --sequence-len 32 --batch-rows 1 --steps $steps --eval-every 1 --eval-tokens 64)
start=$SECONDS

# The reference run, timed from outside: when its first checkpoint appears (the process's start,
# MPI_Init, the data and step 0: about 1 s, most of it before train_run's own clock starts) and
# when it ends. The kills below are drawn from that window, so that they land while a try trains
# and saves rather than before its first checkpoint.
now_ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(now_ms) first_ms=""
"$bin/lrt-train" "${args[@]}" --out ref > ref.out 2> ref.err &
ref_pid=$!
while kill -0 "$ref_pid" 2> /dev/null; do
  [ -z "$first_ms" ] && [ -e ref/latest ] && first_ms=$(($(now_ms) - t0))
  sleep 0.01
done
wait "$ref_pid" || fail "the reference run failed: $(tail -3 ref.err)"
total_ms=$(($(now_ms) - t0))
[ -n "$first_ms" ] || first_ms=$((total_ms / 10))
step_ms=$(((total_ms - first_ms) / (steps - 1) + 1))  # a step and its save
span_ms=$((3 * step_ms))  # a kill within the first three steps a try takes
ref_s=$((SECONDS - start))

inode() { stat -c %i "$1" 2>/dev/null; }
# Everything a save changes, to tell a kill inside a save from one before the first save of a try.
state() {
  cat run/latest 2>/dev/null
  ls -a run/checkpoints 2>/dev/null
  ls -a run 2>/dev/null | grep '\.tmp\.'
  inode run/model.safetensors
  inode run/optim.safetensors
}
# Where in a save the run directory is, or nothing when it is between saves.
mid_save() {
  local latest newest
  latest=$(cat run/latest 2>/dev/null)
  newest=$(ls run/checkpoints 2>/dev/null | grep '^step-' | tail -1)
  if ls -a run/checkpoints 2>/dev/null | grep -q '^\.tmp-'; then echo "writing-step-directory"
  elif [ -n "$newest" ] && [ "checkpoints/$newest" != "$latest" ]; then echo "renamed-before-latest"
  elif ls -a run | grep -Eq '^(latest|model\.safetensors|optim\.safetensors)\.tmp\.'; then echo "replacing-latest-or-links"
  elif [ -n "$latest" ] && { [ "$(inode run/model.safetensors)" != "$(inode "run/$latest/model.safetensors")" ] ||
                             [ "$(inode run/optim.safetensors)" != "$(inode "run/$latest/optim.safetensors")" ]; }; then
    echo "latest-before-links"
  elif [ "$(ls run/checkpoints 2>/dev/null | grep -c '^step-')" -gt 3 ]; then echo "pruning"
  fi
}

RANDOM=$seed
kills=0 mid=0 tries=0 last_resume=-1 resumes="" finished=0
declare -A where=()
while [ "$finished" = 0 ]; do
  tries=$((tries + 1))
  mode=() expect=""
  if ls -d run/checkpoints/step-* > /dev/null 2>&1; then
    mode=(--resume run)
    latest=$(cat run/latest 2>/dev/null) || latest=""
    [ -n "$latest" ] && expect=$((10#${latest#checkpoints/step-}))
  elif [ -e run ]; then
    mode=(--force)  # a try killed before its first checkpoint left its log: start again over it
  fi
  before=$(state)
  delay_ms=$((first_ms + RANDOM % span_ms))
  "$bin/lrt-train" "${args[@]}" "${mode[@]}" --out run > "try$tries.out" 2> "try$tries.err" &
  pid=$!
  if [ "$kills" -lt "$max_kills" ]; then
    # Wait delay_ms, but no longer than it takes the try to save three steps past where it began:
    # the reference was timed on a machine that may have been busier than it is now, and a try that
    # ran to the end within its delay would leave too few resumes to check.
    t_try=$(now_ms) stop_at=$((${expect:-0} + 3))
    while kill -0 "$pid" 2> /dev/null && [ $(($(now_ms) - t_try)) -lt "$delay_ms" ]; do
      l=$(cat run/latest 2> /dev/null) || l=""
      [ -n "$l" ] && [ "$((10#${l#checkpoints/step-}))" -ge "$stop_at" ] && break
      sleep 0.01
    done
    kill -KILL "$pid" 2> /dev/null
  fi
  { wait "$pid"; rc=$?; } 2> /dev/null  # (without bash's "Killed" notice)
  if [ ${#mode[@]} -gt 0 ] && grep -q '^resumed from' "try$tries.out"; then
    line=$(grep '^resumed from' "try$tries.out")
    [[ $line =~ ^resumed\ from\ run/checkpoints/step-0*([0-9]+)\ at\ step\ ([0-9]+)\ of\ $steps$ ]] ||
      fail "try $tries: unexpected line '$line'"
    n=${BASH_REMATCH[2]}
    [ "$((10#${BASH_REMATCH[1]}))" = "$n" ] || fail "try $tries: '$line' (directory and step differ)"
    [ -z "$expect" ] || [ "$n" = "$expect" ] ||
      fail "try $tries resumed at step $n, but run/latest named step $expect"
    [ "$n" -ge "$last_resume" ] || fail "try $tries resumed at step $n after an earlier resume at step $last_resume"
    last_resume=$n resumes="$resumes $n"
  fi
  # The one fallback allowed: a kill between the first step directory's rename and the first latest.
  if grep -v '^warning: --force: ' "try$tries.out" | grep -q '^warning:'; then
    [ -z "$expect" ] && grep -q "^warning: no 'run/latest'; using the newest complete checkpoint" "try$tries.out" ||
      fail "try $tries: $(grep '^warning:' "try$tries.out")"
  fi
  case $rc in
    0) finished=1 ;;
    137)
      kills=$((kills + 1))
      w=$(mid_save)
      if [ -n "$w" ] && [ "$(state)" != "$before" ]; then
        mid=$((mid + 1)) where[$w]=$((${where[$w]:-0} + 1))
      fi ;;
    *) fail "try $tries exited with status $rc: $(tail -3 "try$tries.err")" ;;
  esac
  [ "$tries" -le $((max_kills + 1)) ] || fail "no run finished after $tries tries"
done

last=checkpoints/step-$(printf %06d $steps)
for f in model.safetensors optim.safetensors $last/model.safetensors $last/optim.safetensors; do
  cmp -s "ref/$f" "run/$f" || fail "run/$f differs from ref/$f (not bit for bit)"
done
for log in log.csv $last/log.csv; do  # their seconds differ
  diff <(cut -d, -f1-6 "ref/$log") <(cut -d, -f1-6 "run/$log") > /dev/null ||
    fail "run/$log differs from ref/$log (columns step..lr_multiplier)"
done
grep -q "^done: $steps steps" "try$tries.out" || fail "the last try did not print 'done: $steps steps'"
# The kills must have landed during training: a test whose kills all come before the first
# checkpoint checks nothing.
nres=$(wc -w <<< "$resumes")
[ "$nres" -ge 5 ] || fail "only $nres of $tries tries resumed: the kills landed before the first checkpoint"

detail=""
for k in "${!where[@]}"; do detail="$detail $k=${where[$k]}"; done
echo "reference run: ${ref_s}s (first checkpoint at ${first_ms} ms, then ${step_ms} ms a step); $tries tries, $kills SIGKILLs, $mid of them inside a save (${detail# }); resumed at steps:$resumes"
echo "the final model, optimizer state and log equal the uninterrupted run's bit for bit; total $((SECONDS - start))s"
