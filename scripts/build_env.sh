# Sourced by scripts/run.sh and scripts/bench.sh: the compiler cache outside the clone, and nvcc
# from the usual toolkit location when it is not on PATH (CMake finds it through CUDACXX).
export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/lrt-ccache}"
mkdir -p "$CCACHE_DIR"
if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
