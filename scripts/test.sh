#!/usr/bin/env bash
# Set up and run every test: packages (scripts/setup.sh), the default preset (unit,
# compile-fail, package, tree (layering, headers on their own, formatting) and -- with nvcc --
# CUDA tests), then the unit tests and the CUDA
# emulator programs again under AddressSanitizer + UBSan (the `asan` preset), then the parsers'
# libFuzzer targets (clang: safetensors/JSON/metadata, tiktoken rank files and lrt's tokenizer
# file, CORE's YAML/CSV, lrt-server's HTTP and request parsing) for a bounded time over corpora kept between runs. With Debian's aarch64 cross compiler and
# qemu-user (installed here) the default preset also cross-builds the decode path for aarch64 and
# runs it under qemu (cross.aarch64).
#
# Environment:
#   LRT_SKIP_ASAN=1   skip the sanitizer build and run
#   LRT_SKIP_FUZZ=1   skip the fuzzing phase
#   LRT_FUZZ_SECONDS  time for the safetensors fuzz target (default 60)
#   LRT_FUZZ_RANK_SECONDS  time for the rank-file fuzz target (default 45)
#   LRT_FUZZ_CORPUS   their working corpora (default $HOME/.cache/lrt-fuzz/<target>, outside the
#                     clone; seeded from tests/fuzz/corpus and tests/fuzz/corpus_rank_file)
#   LRT_JOBS=N        parallel build/test jobs (default 2)
#   CCACHE_DIR        compiler cache (default $HOME/.cache/lrt-ccache, outside the clone)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

jobs="${LRT_JOBS:-2}"
export CCACHE_DIR="${CCACHE_DIR:-${HOME:-/root}/.cache/lrt-ccache}"
mkdir -p "$CCACHE_DIR"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"

t_start=$SECONDS
phase_start=$SECONDS
timings=()
phase() {  # phase NAME -- record the time spent since the previous call
  local now=$SECONDS
  timings+=("$(printf '%-28s %5ds' "$1" $((now - phase_start)))")
  echo "== [$1] done in $((now - phase_start))s"
  phase_start=$now
}
report() {
  local rc=$?
  echo
  echo "== timings"
  local t
  for t in "${timings[@]}"; do echo "   $t"; done
  echo "   $(printf '%-28s %5ds' total $((SECONDS - t_start)))"
  if [ "$rc" -eq 0 ]; then echo "== test.sh: all tests passed"; else echo "== test.sh: FAILED (exit $rc)" >&2; fi
}
trap report EXIT
# A stopped run is not a passed one: without these a SIGTERM could reach report with status 0.
trap 'exit 143' TERM
trap 'exit 130' INT

echo "== setup"
if [ "${LRT_SKIP_FUZZ:-0}" = 1 ]; then bash "$root/scripts/setup.sh" --format --mpi --cross --server-tests </dev/null
else bash "$root/scripts/setup.sh" --fuzz --format --mpi --cross --server-tests </dev/null; fi
phase setup

# nvcc: use PATH, else the usual toolkit location; CMake finds it through CUDACXX.
if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

if command -v ccache >/dev/null 2>&1; then ccache -z >/dev/null 2>&1 || true; fi

echo "== configure (preset default)"
# Two pairs of the user's own (lrt_add_variant), tested with the built-in ones.
cmake --preset default -DLRT_VARIANTS_FILE="$root/tests/tools/variants.cmake" </dev/null
phase configure
# What CMake decided (check_language(CUDA) compiles a probe, so a broken nvcc counts as none).
cuda_compiler="$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' build/CMakeCache.txt 2>/dev/null | head -n1)"
case "$cuda_compiler" in
  ""|*NOTFOUND) echo "CUDA: nvcc not found, skipped" ;;
  *) echo "CUDA: using $cuda_compiler (CUDA tests are built and run)" ;;
esac

echo "== build (preset default, -j$jobs)"
cmake --build --preset default -j "$jobs" </dev/null
phase build

echo "== test (preset default, -j$jobs)"
ctest --preset default -j "$jobs" </dev/null
phase test

if [ "${LRT_SKIP_ASAN:-0}" = 1 ]; then
  echo "== asan: skipped (LRT_SKIP_ASAN=1)"
else
  echo "== configure (preset asan)"
  cmake --preset asan </dev/null
  phase "asan configure"
  echo "== build lrt_tests, lrt_tokenizer_tests and the CUDA emulator programs (preset asan, -j$jobs)"
  cmake --build --preset asan -j "$jobs" </dev/null
  phase "asan build"
  echo "== unit tests and the CUDA emulator programs (tensor layer, model layer: graphs, bf16, GEMM attention) under ASan+UBSan (-j$jobs)"
  ctest --preset asan -j "$jobs" </dev/null
  phase "asan test"
fi

if [ "${LRT_SKIP_FUZZ:-0}" = 1 ]; then
  echo "== fuzz: skipped (LRT_SKIP_FUZZ=1)"
else
  echo "== fuzz: the safetensors / JSON / checkpoint-metadata parsers, the tokenizer's rank-file / tokenizer-file parsers, a CORE bundle's YAML / CSV and lrt-server's requests (tests/fuzz, clang + libFuzzer)"
  cmake -G Ninja -S "$root" -B "$root/build-fuzz" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLRT_BUILD_FUZZERS=ON -DLRT_BUILD_EXAMPLES=OFF -DLRT_BUILD_BENCH=OFF -DLRT_ENABLE_CUDA=OFF >/dev/null </dev/null
  cmake --build "$root/build-fuzz" --target lrt_fuzz_safetensors lrt_fuzz_rank_file lrt_fuzz_core_files lrt_fuzz_server_request -j "$jobs" </dev/null
  # target, its seed folder in tests/fuzz, seconds (LRT_FUZZ_SECONDS is the safetensors target's)
  for spec in "safetensors:corpus:${LRT_FUZZ_SECONDS:-60}" "rank_file:corpus_rank_file:${LRT_FUZZ_RANK_SECONDS:-45}" \
    "core_files:corpus_yaml:${LRT_FUZZ_CORE_SECONDS:-30}" "server_request:corpus_server:${LRT_FUZZ_SERVER_SECONDS:-30}"; do
    IFS=: read -r target seeds secs <<<"$spec"
    corpus="${LRT_FUZZ_CORPUS:-${HOME:-/root}/.cache/lrt-fuzz}/$target"
    mkdir -p "$corpus"
    cp -n "$root"/tests/fuzz/"$seeds"/* "$corpus"/
    echo "-- lrt_fuzz_$target: corpus $corpus: $(ls "$corpus" | wc -l) inputs, $secs s"
    fuzz_rc=0
    "$root/build-fuzz/bin/lrt_fuzz_$target" -max_total_time="$secs" -max_len=4096 \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$root/build-fuzz/" "$corpus" \
      </dev/null >"$root/build-fuzz/fuzz_$target.log" 2>&1 || fuzz_rc=$?
    grep -E "^(#[0-9]+ +(INITED|DONE)|stat::number_of_executed_units|Done )" "$root/build-fuzz/fuzz_$target.log" || true
    # libFuzzer exits non-zero on a crash, a sanitizer report, a leak or a timeout (the input is
    # written to build-fuzz/crash-*, leak-*, timeout-* or oom-*).
    if [ "$fuzz_rc" -ne 0 ]; then
      tail -n 60 "$root/build-fuzz/fuzz_$target.log" >&2
      echo "== fuzz: lrt_fuzz_$target FAILED (exit $fuzz_rc); the input is in $root/build-fuzz" >&2
      exit 1
    fi
  done
  phase fuzz
fi

if command -v ccache >/dev/null 2>&1; then
  echo "== ccache ($CCACHE_DIR)"; ccache -s 2>/dev/null | sed -n '1,12p' || true
fi
