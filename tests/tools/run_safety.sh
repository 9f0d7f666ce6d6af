#!/usr/bin/env bash
# tools.run_safety: lrt-train never loses a run.
#   tests/tools/run_safety.sh BIN_DIR WORK_DIR
# 1. --out over another run (an LRT run; the new one a baseline) is refused with exit 2, naming
#    that run and offering --resume and --force, and every file of the other run is byte-identical
#    afterwards; a folder of other files is refused the same way.
# 2. --force replaces the other run, naming what it removes, leaves files that are not lrt-train's,
#    and the new run has no file of the old one (no memory.csv beside a baseline's summary.json).
# 3. SIGINT mid-run: the step finishes, a checkpoint is saved, the program says where and exits
#    130; the printed command resumes it and the run ends byte-identical to an uninterrupted one
#    (model, optimizer state, log.csv but its seconds column). SIGTERM: the same with exit 143.
# 4. Failed runs (an empty corpus, a folder without text, text too short for one row) remove what
#    they created: a new --out folder (and its new parents) is gone, an existing empty one is empty.
# 5. A resume in place removes the temporaries a killed save left (loss.svg.tmp.NNNN).
set -u -o pipefail
bin=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
export LRT_NUM_THREADS=1  # bit for bit needs the same thread count in every run
set -m                     # background jobs get SIGINT (without job control bash starts them ignoring it)
awk 'BEGIN { srand(7); n = split("the cat sat on a mat and dog ran far away from home", w, " ");
             for (i = 0; i < 20000; i++) printf "%s%s", w[int(rand() * n) + 1], (i % 12 == 11) ? ".\n" : " " }' \
  > corpus.txt
train=$bin/lrt-train
small=(--data corpus.txt --sequence-len 32 --batch-rows 4 --eval-tokens 256 --n-layer 2 --n-embd 64)
digest() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

# --- 1. another run is refused, untouched --------------------------------------------------------
"$train" "${small[@]}" --steps 6 --eval-every 2 --out old > old.out 2>&1 || fail "the first run failed: $(tail -3 old.out)"
[ -f old/memory.csv ] || fail "the LRT run wrote no memory.csv"
before=$(digest old)
"$train" --variant baseline "${small[@]}" --steps 4 --out old > r.out 2>&1
rc=$?
[ $rc = 2 ] || fail "--out over another run exited $rc, not 2: $(head -3 r.out)"
grep -q "^lrt-train: --out 'old' holds another run of lrt-train (its checkpoint 'old/checkpoints/step-000006' at step 6" r.out ||
  fail "the refusal does not describe the run: $(head -2 r.out)"
grep -q -- "--resume old --out old" r.out && grep -q -- "--force" r.out || fail "no --resume / --force offered: $(head -2 r.out)"
[ "$(digest old)" = "$before" ] || fail "the refused run changed the other run's files"
mkdir notes && echo "my notes" > notes/a.txt
"$train" "${small[@]}" --steps 4 --out notes > r.out 2>&1
rc=$?
[ $rc = 2 ] && grep -q "^lrt-train: --out 'notes' holds 1 other entry (a.txt)" r.out || fail "a folder of notes: exit $rc, $(head -2 r.out)"
[ "$(cat notes/a.txt)" = "my notes" ] && [ "$(ls notes)" = a.txt ] || fail "the notes folder changed"
pass "--out over another run or other files is refused (exit 2) and nothing there changes"

# --- 2. --force replaces, naming what it removes ------------------------------------------------
echo "keep me" > old/mine.txt
"$train" --variant baseline "${small[@]}" --steps 4 --eval-every 4 --out old --force > f.out 2>&1 || fail "--force failed: $(tail -3 f.out)"
grep -q "^warning: --force: replacing another run in 'old' (its checkpoint 'old/checkpoints/step-000006' at step 6, 3 checkpoints): removing checkpoints/, latest, log.csv, loss.svg, memory.csv, model.safetensors, optim.safetensors, summary.json; leaving mine.txt" f.out ||
  fail "the --force line: $(grep -m1 'force' f.out)"
[ ! -e old/memory.csv ] || fail "the old run's memory.csv is still there beside the baseline's summary.json"
[ "$(cat old/mine.txt)" = "keep me" ] || fail "--force removed a file that is not lrt-train's"
[ "$(ls old/checkpoints)" = step-000004 ] || fail "old checkpoints remain: $(ls old/checkpoints)"
grep -q '"variant":"baseline"' old/summary.json || fail "summary.json is not the new run's"
pass "--force replaces another run, names each file it removes and leaves the others"

# --- 3. SIGINT / SIGTERM: finish the step, save, exit 128 + signal, resume bit for bit ----------
long=("${small[@]}" --steps 400 --eval-every 150)
"$train" "${long[@]}" --out ref > ref.out 2>&1 || fail "the uninterrupted run failed: $(tail -3 ref.out)"
for sig in INT TERM; do
  want=$([ $sig = INT ] && echo 130 || echo 143)
  "$train" "${long[@]}" --out "s$sig" > "s$sig.out" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do grep -q '^step ' "s$sig.out" 2>/dev/null && break; sleep 0.05; done
  sleep 1
  kill -$sig $pid
  wait $pid
  rc=$?
  [ $rc = "$want" ] || fail "SIG$sig: exit $rc, not $want: $(tail -3 "s$sig.out")"
  line=$(grep "^stopped by SIG$sig after step" "s$sig.out") || fail "SIG$sig: no 'stopped by' line: $(tail -3 "s$sig.out")"
  [[ $line =~ after\ step\ ([0-9]+)\ of\ 400:\ saved\ s$sig/checkpoints/step-0*([0-9]+)\  ]] || fail "SIG$sig: '$line'"
  step=${BASH_REMATCH[1]}
  [ "$step" = "${BASH_REMATCH[2]}" ] && [ "$step" -lt 400 ] || fail "SIG$sig: '$line'"
  [ "$(cat "s$sig/latest")" = "checkpoints/step-$(printf %06d "$step")" ] || fail "SIG$sig: latest is $(cat "s$sig/latest")"
  cmd=$(grep -A1 "^stopped by" "s$sig.out" | tail -1)
  [[ $cmd == "  lrt-train --resume s$sig --out s$sig --data corpus.txt --eval-tokens 256 --eval-every 150" ]] ||
    fail "SIG$sig: the printed command is '$cmd'"
  read -ra words <<< "$cmd"
  "$bin/${words[0]}" "${words[@]:1}" > "r$sig.out" 2>&1 || fail "SIG$sig: the printed command failed: $(tail -3 "r$sig.out")"
  grep -q "^resumed from s$sig/checkpoints/step-0*$step at step $step of 400" "r$sig.out" || fail "SIG$sig: $(grep -m1 resumed "r$sig.out")"
  for f in model.safetensors optim.safetensors; do
    cmp -s "ref/$f" "s$sig/$f" || fail "SIG$sig: $f differs from the uninterrupted run's"
  done
  diff <(cut -d, -f1-6 ref/log.csv) <(cut -d, -f1-6 "s$sig/log.csv") > /dev/null || fail "SIG$sig: log.csv differs"
  pass "SIG$sig after step $step: saved, exit $want, and the resumed run ends byte-identical"
done

# --- 4. failed runs remove what they created ----------------------------------------------------
: > empty.txt
mkdir nodocs && echo x > nodocs/picture.png
printf 'ab' > tiny.txt
for data in empty.txt nodocs tiny.txt; do
  "$train" "${small[@]/corpus.txt/$data}" --steps 4 --out "new/deeper/$data" > x.out 2>&1 && fail "--data $data succeeded"
  [ ! -e new ] || fail "--data $data: the run failed but left $(find new | head -3)"
  mkdir -p "kept_$data"
  "$train" "${small[@]/corpus.txt/$data}" --steps 4 --vocab-size 300 --out "kept_$data" > x.out 2>&1 && fail "--data $data succeeded"
  [ -z "$(ls -A "kept_$data")" ] || fail "--data $data: the run failed but left $(ls -A "kept_$data") in an empty folder"
done
pass "failed runs (empty corpus, no text, too short) leave no folder and no file behind"

# --- 5. a killed save's temporaries go at the next resume ---------------------------------------
touch ref/loss.svg.tmp.999999 ref/memory.csv.tmp.999998 ref/latest.tmp.999997
"$train" --resume ref --out ref --data corpus.txt --eval-tokens 256 > t.out 2>&1 || fail "resume in place: $(tail -3 t.out)"
[ -z "$(ls -a ref | grep '\.tmp\.')" ] || fail "temporaries left: $(ls -a ref | grep '\.tmp\.')"
pass "a resume in place removes the temporaries of a killed save"
