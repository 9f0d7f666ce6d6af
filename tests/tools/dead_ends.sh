#!/usr/bin/env bash
# tools.dead_ends: no command lrt-train suggests fails, and a run folder always continues.
#   tests/tools/dead_ends.sh BIN_DIR WORK_DIR
# 1. A run killed before its first complete checkpoint (LRT_TRAIN_FAULT=first-save: SIGKILL where a
#    second stop signal or a kill during the save would end it; plus the temporary step folder such
#    a kill leaves) holds a log.csv and no checkpoint.
#    - `--resume` on it exits 2, says there is nothing to resume and what to run instead;
#    - that command (the same one without --resume) starts afresh there, saying so, and the run's
#      log.csv holds each step once.
# 2. The same with the original command (no --resume): a fresh start, not a refusal.
# 3. A folder with such a run and a file of the user's: refused (exit 2) without suggesting
#    --resume, the user's file untouched.
# 4. A derived default never fails a valid command: --preset medium --batch-rows 4 (the preset's
#    micro-batch of 8 rows) trains with micro-batches that divide the batch.
# 5. A resume with more steps says how the horizon and the learning rate change; log.csv's steps,
#    tokens and seconds, and summary.json's tokens and run_seconds, go on over it.
# 6. A resume on other text is refused, naming both fingerprints.
# 7. A second run on an --out another is writing to is refused at once (the folder's lock); the
#    first run's files stay, and once it ends the folder is free.
set -u -o pipefail
bin=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
export LRT_NUM_THREADS=1
awk 'BEGIN { srand(3); n = split("a run that can always continue or start again from where it is", w, " ");
             for (i = 0; i < 20000; i++) printf "%s%s", w[int(rand() * n) + 1], (i % 10 == 9) ? ".\n" : " " }' \
  > corpus.txt
train=$bin/lrt-train
cmd=("$train" --data corpus.txt --sequence-len 32 --batch-rows 4 --eval-tokens 256 --n-layer 2 --n-embd 64
     --steps 6 --eval-every 2)

# A run killed at its first save: the dead end of issue 62.
killed_run() {  # killed_run DIR
  LRT_TRAIN_FAULT=first-save "${cmd[@]}" --out "$1" > "$1.kill.out" 2>&1
  local rc=$?
  [ $rc = 137 ] || fail "LRT_TRAIN_FAULT=first-save exited $rc, not 137 (SIGKILL): $(tail -3 "$1.kill.out")"
  [ -f "$1/log.csv" ] || fail "the killed run left no log.csv in $1: $(ls -A "$1")"
  [ ! -e "$1/latest" ] || fail "the killed run has a checkpoint in $1"
  mkdir -p "$1/checkpoints/.tmp-step-000002.99999" && head -c 100 /dev/urandom > "$1/checkpoints/.tmp-step-000002.99999/model.safetensors"
}

# --- 1. --resume on it: nothing to resume, and the suggestion works --------------------------------
killed_run dbl
"${cmd[@]}" --resume dbl --out dbl > r.out 2>&1
rc=$?
[ $rc = 2 ] || fail "--resume of a run with no checkpoint exited $rc, not 2: $(tail -3 r.out)"
grep -q "^lrt-train: --resume 'dbl': nothing to resume: that run stopped before its first complete checkpoint" r.out ||
  fail "--resume of a run with no checkpoint: $(head -3 r.out)"
grep -q "Start it again: the same command without --resume dbl" r.out || fail "no command suggested: $(head -3 r.out)"
"${cmd[@]}" --out dbl > s.out 2>&1 || fail "the suggested command failed: $(tail -3 s.out)"
grep -q "^note: 'dbl' holds a run that stopped before its first complete checkpoint: starting afresh" s.out ||
  fail "the fresh start does not say so: $(head -5 s.out)"
[ -f dbl/latest ] && [ -f dbl/model.safetensors ] || fail "the fresh start saved no checkpoint: $(ls -A dbl)"
[ ! -e dbl/checkpoints/.tmp-step-000002.99999 ] || fail "the killed save's temporary folder is still there"
n=$(grep -c '^0,' dbl/log.csv)
[ "$n" = 1 ] || fail "log.csv holds step 0 $n times after the fresh start: $(head -4 dbl/log.csv)"
pass "--resume of a killed run says what to run instead (exit 2), and that starts afresh"

# --- 2. the original command again: a fresh start ------------------------------------------------
killed_run again
"${cmd[@]}" --out again > a.out 2>&1 || fail "the same command after a kill failed: $(tail -3 a.out)"
grep -q "starting afresh" a.out || fail "no word of the fresh start: $(head -3 a.out)"
[ -f again/latest ] || fail "no checkpoint after the fresh start"
pass "the same command after a kill at the first save starts afresh"

# --- 3. with a file of the user's beside it: refused, no --resume offered --------------------------
killed_run mixed
echo "mine" > mixed/notes.txt
"${cmd[@]}" --out mixed > m.out 2>&1
rc=$?
[ $rc = 2 ] || fail "a folder with a user's file exited $rc, not 2: $(tail -3 m.out)"
grep -q "the files of a run of lrt-train that saved no complete checkpoint, and 1 other entry (notes.txt)" m.out ||
  fail "the refusal does not say what is there: $(head -3 m.out)"
! head -1 m.out | grep -q -- "--resume" || fail "the refusal suggests --resume of a run with no checkpoint: $(head -3 m.out)"
[ "$(cat mixed/notes.txt)" = mine ] && [ -f mixed/log.csv ] || fail "the refusal changed the folder"
"${cmd[@]}" --out mixed --force > f.out 2>&1 || fail "--force failed: $(tail -3 f.out)"
[ "$(cat mixed/notes.txt)" = mine ] || fail "--force removed the user's file"
pass "a killed run beside a user's file is refused without --resume; --force starts afresh, the file stays"

# --- 4. a preset's derived micro-batch with --batch-rows --------------------------------------------
"$train" --preset medium --batch-rows 4 --sequence-len 32 --n-layer 1 --n-embd 64 --data corpus.txt --steps 1 \
  --eval-tokens 256 --out medium > p.out 2>&1 || fail "--preset medium --batch-rows 4 failed: $(tail -3 p.out)"
pass "--preset medium --batch-rows 4 trains (the preset's micro-batch follows the batch)"

# --- 5. a resume that adds steps says so, and the run's counters go on over it ---------------------
"${cmd[@]}" --out grow > g1.out 2>&1 || fail "the run to grow failed: $(tail -3 g1.out)"
"$train" --data corpus.txt --eval-tokens 256 --eval-every 2 --resume grow --out grow --steps 8 > g2.out 2>&1 ||
  fail "--resume --steps 8 failed: $(tail -3 g2.out)"
grep -q "^resume: the horizon changes from 6 to 8 steps (--steps); the learning-rate schedule is now that of a run of 8 steps: at step 6 its multiplier goes from 0 to 0.5$" g2.out ||
  fail "the change of horizon is not said: $(grep -m2 -i 'horizon\|resume' g2.out)"
awk -F, 'NR > 1 { if ($7 + 0 < prev) { print "seconds fall from " prev " to " $7 " at step " $1; bad = 1 } prev = $7 + 0 }
         END { exit bad }' grow/log.csv || fail "log.csv's seconds restart on the resume: $(cut -d, -f1,7 grow/log.csv | tr '\n' ' ')"
[ "$(cut -d, -f1 grow/log.csv | tail -n +2 | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 " ] ||
  fail "log.csv's steps over the resume: $(cut -d, -f1 grow/log.csv | tr '\n' ' ')"
tok=$(tail -1 grow/log.csv | cut -d, -f2)
[ "$tok" = 1024 ] || fail "log.csv's tokens after 8 steps of 4 rows x 32: $tok, not 1024"
grep -q '"tokens":1024' grow/summary.json || fail "summary.json's tokens: $(grep -o '"tokens":[0-9]*' grow/summary.json)"
grep -q '"run_seconds":' grow/summary.json || fail "summary.json has no run_seconds"
pass "a resume with more steps says how the horizon and the rate change; steps, tokens and seconds go on"

# --- 6. --resume on other text: refused ------------------------------------------------------------
head -c 300000 corpus.txt | tr 'a-m' 'n-z' > other.txt
"$train" --data other.txt --eval-tokens 256 --resume grow --out grow --steps 10 > o.out 2>&1
rc=$?
[ $rc = 2 ] || fail "--resume with other --data exited $rc, not 2: $(tail -3 o.out)"
grep -q "^lrt-train: on --resume the run is the checkpoint's: --data 'other.txt' is not the text it was trained on (its training rows: [0-9]* rows of 33 tokens, FNV-1a 0x[0-9a-f]*; the checkpoint's: [0-9]* rows of 33 tokens, FNV-1a 0x[0-9a-f]*)" o.out ||
  fail "--resume with other --data: $(head -2 o.out)"
pass "--resume with other --data is refused, naming both"

# --- 7. Two runs on one --out: the second is refused at once, the first's files untouched -----------
# The first is slowed (LRT_TRAIN_SLOW) and has no checkpoint yet: without the folder's lock the
# second would take its files for a stopped run's and remove them. Once the first is killed, the
# lock is gone with it and the same command starts afresh.
LRT_TRAIN_SLOW=1:0.5 "${cmd[@]}" --eval-every 100 --out busy > busy1.out 2>&1 &
first=$!
for _ in $(seq 1 300); do grep -q '^step ' busy1.out 2>/dev/null && break; sleep 0.1; done
grep -q '^step ' busy1.out || { kill -9 $first; fail "the first run did not start: $(tail -3 busy1.out)"; }
"${cmd[@]}" --out busy > busy2.out 2>&1
rc=$?
[ $rc = 2 ] || { kill -9 $first; fail "a second run on a busy --out exited $rc, not 2: $(tail -3 busy2.out)"; }
grep -q "^lrt-train: --out 'busy' is in use: another lrt-train is writing to it" busy2.out ||
  { kill -9 $first; fail "the second run: $(head -2 busy2.out)"; }
[ -f busy/log.csv ] || { kill -9 $first; fail "the first run's log.csv is gone"; }
kill -9 $first; wait $first 2>/dev/null
"${cmd[@]}" --out busy > busy3.out 2>&1 || fail "after the first run ended: exit $?: $(tail -3 busy3.out)"
grep -q "starting afresh" busy3.out || fail "the third run did not start afresh: $(head -3 busy3.out)"
pass "a second lrt-train on a busy --out is refused at once; the folder is free when the first ends"
