#!/usr/bin/env bash
# Set up and run the main job: packages (scripts/setup.sh), build the tour example with the
# default preset, run build/bin/lrt-tour. Extra arguments are passed to lrt-tour.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/lrt-ccache}"
mkdir -p "$CCACHE_DIR"
if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

bash "$root/scripts/setup.sh" </dev/null
cmake --preset default </dev/null
cmake --build build --target lrt-tour -j "${LRT_JOBS:-2}" </dev/null
exec "$root/build/bin/lrt-tour" "$@" </dev/null
