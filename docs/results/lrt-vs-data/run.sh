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
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
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
mkdir -p "$dest"
files="'$out/results.csv' '$out/results.md' '$out/bpb_vs_compute.svg' '$out/passes.svg'"
[ "$stage" = b ] && files="$files '$out/pairs.svg'"
after="cp $files '$dest/'"
if [ "${LRT_STUDY_COMMIT:-1}" != 0 ]; then
  after="$after && git -C '$root' add '$dest' && git -C '$root' commit -q -m 'lrt-vs-data stage $stage: results so far' -- '$dest'"
fi
exec "$bin/lrt-ablate" "$grid" --out "$out" --jobs 2 --after "$after"
