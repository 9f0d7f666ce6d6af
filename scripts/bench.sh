#!/usr/bin/env bash
# The CPU performance table (docs/performance.md; FLOPs as docs/model.md §10): set up, build lrt-bench with the `release`
# preset (-march=native: Eigen's AVX-512 GEMM where the CPU has it, the fastest GEMM on the
# reference machine) and run it. Arguments go to lrt-bench (e.g. --quick, --json,
# --presets small, --threads 1). About 8 minutes on the 2-vCPU reference machine.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# shellcheck source=build_env.sh
source "$root/scripts/build_env.sh"

bash "$root/scripts/setup.sh" </dev/null
cmake --preset release </dev/null >/dev/null
cmake --build build-release --target lrt-bench -j "${LRT_JOBS:-2}" </dev/null
exec build-release/bin/lrt-bench "$@" </dev/null
