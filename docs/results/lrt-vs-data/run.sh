#!/usr/bin/env bash
# The second study: runs one stage's grid with lrt-ablate, two runs at a time (one per vCPU), the
# runs' checkpoints and logs outside the clone, and after every finished run copies the results
# so far into this folder's stage-<s>/ and commits them, so that an interruption loses nothing:
# the same command resumes.
#   bash docs/results/lrt-vs-data/run.sh STAGE [BIN_DIR] [OUT_DIR]
#   STAGE    a (the learning-rate sweep, stage-a.txt) or b (the ladder, stage-b.txt)
#   BIN_DIR  lrt-train, lrt-eval and lrt-ablate built with the pairs baseline, lrt and lrt-release
#            (default: build-release/bin)
#   OUT_DIR  run outputs (default: ~/lrt-runs/lrt-vs-data-<stage>)
#   LRT_STUDY_COMMIT=0  copy the results here without committing them
# Each finished run's record (result.json, eval*.json, summary.json, train.log; not its checkpoint)
# is kept in stage-<s>/runs/ too, and copied back into OUT before lrt-ablate starts: a later
# sitting on another machine (an empty OUT) redoes only the runs that had not finished.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)

# run.sh save STAGE OUT: lrt-ablate's --after hook (below): the results and the finished runs'
# records into stage-STAGE/, committed.
if [ "${1:-}" = save ]; then
  stage=$2 out=$3 dest=$here/stage-$2
  mkdir -p "$dest"
  for f in results.csv results.md bpb_vs_compute.svg passes.svg pairs.svg; do
    [ ! -f "$out/$f" ] || cp "$out/$f" "$dest/"
  done
  (cd "$out" && find runs -name result.json) | while read -r r; do
    d=$(dirname "$r")
    mkdir -p "$dest/$d"
    for f in result.json eval.json eval-train.json summary.json train.log; do
      [ ! -f "$out/$d/$f" ] || cp "$out/$d/$f" "$dest/$d/"
    done
  done
  if [ "${LRT_STUDY_COMMIT:-1}" != 0 ]; then
    git -C "$root" add "$dest"
    git -C "$root" commit -q -m "lrt-vs-data stage $stage: results so far" -- "$dest"
  fi
  exit 0
fi

stage=${1:-}
case "$stage" in a|b) ;; *) echo "usage: run.sh a|b [BIN_DIR] [OUT_DIR]" >&2; exit 2 ;; esac
bin=${2:-$root/build-release/bin}
out=${3:-${HOME:-/root}/lrt-runs/lrt-vs-data-$stage}
grid=$here/stage-$stage.txt
[ -f "$grid" ] || { echo "error: no $grid (stage b's grid is written from stage a's rates)" >&2; exit 2; }
for p in lrt-train lrt-eval lrt-ablate; do
  [ -x "$bin/$p" ] || { echo "error: no $bin/$p (build the tools first, README \"Ablations\")" >&2; exit 2; }
done
dest=$here/stage-$stage
mkdir -p "$dest" "$out"
# The runs finished in an earlier sitting (perhaps on another machine): back into OUT, where
# lrt-ablate finds their result.json and skips them.
if [ -d "$dest/runs" ]; then
  (cd "$dest" && find runs -type f) | while read -r f; do
    [ -e "$out/$f" ] || { mkdir -p "$out/$(dirname "$f")" && cp "$dest/$f" "$out/$f"; }
  done
fi
exec "$bin/lrt-ablate" "$grid" --out "$out" --jobs 2 --after "bash '$here/run.sh' save $stage '$out'"
