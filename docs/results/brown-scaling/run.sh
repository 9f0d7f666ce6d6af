#!/usr/bin/env bash
# The first study: runs grid.txt with lrt-ablate, two runs at a time (one per vCPU), the runs'
# checkpoints and logs outside the clone, and after every finished run copies the results so far
# (results.csv, results.md, bpb_vs_compute.svg, passes.svg) into this folder and commits them, so
# that an interruption loses nothing: the same command resumes.
#   bash docs/results/brown-scaling/run.sh [BIN_DIR] [OUT_DIR]
#   BIN_DIR  lrt-train, lrt-eval and lrt-ablate built with the pairs baseline, lrt,
#            lrt-src2, kv, residual and lrt:chunked:2 (default: build-release/bin)
#   OUT_DIR  run outputs (default: ~/lrt-runs/brown-scaling)
#   LRT_STUDY_COMMIT=0  copy the results here without committing them
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=${1:-$root/build-release/bin}
out=${2:-${HOME:-/root}/lrt-runs/brown-scaling}
for p in lrt-train lrt-eval lrt-ablate; do
  [ -x "$bin/$p" ] || { echo "error: no $bin/$p (build the tools first, README \"Ablations\")" >&2; exit 2; }
done
after="cp '$out/results.csv' '$out/results.md' '$out/bpb_vs_compute.svg' '$out/passes.svg' '$here/'"
if [ "${LRT_STUDY_COMMIT:-1}" != 0 ]; then
  after="$after && git -C '$root' add '$here' && git -C '$root' commit -q -m 'brown-scaling study: results so far' -- '$here'"
fi
exec "$bin/lrt-ablate" "$here/grid.txt" --out "$out" --jobs 2 --after "$after"
