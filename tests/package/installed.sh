#!/usr/bin/env bash
# package.installed: the package as a user installs it. A fresh build tree configured as
# scripts/run.sh configures its own (preset release: Release, LRT_NATIVE=ON) builds only part of
# what install lists (lrt-quantize, lrt-embedded-generate, the C API library lrt_c and the runtime
# library lrt_runtime of the one pair baseline; not lrt-train, lrt-eval, lrt-generate or
# lrt-c-generate, to keep the test short); `cmake --install` to a prefix must succeed and install
# what was built. Then, against that prefix only: a CMake project (tests/package/installed) builds
# the host project of examples/ (examples/host_project: the README's C++ quickstart on lrt::lrt,
# examples/runtime_quickstart.cpp on lrt::runtime, the decode-only examples/embedded_decode.cpp on
# lrt::embedded) and a C program on lrt::c; the same C program is built with pkg-config
# (lrt-c.pc), a C++ program with lrt.pc and the runtime quick start with lrt-runtime.pc. All run,
# the decoders print the same greedy text, and the runtime quick start's two builds the same lines.
# The installed C API library must be compiled without -march (its compile command) and hold AVX
# instructions (objdump: ymm/zmm registers) only in the kernels chosen at run time for a CPU that
# has them (backend/cpu/simd_level.hpp: names with avx2 or avx512, and their helpers), so that it
# runs on any x86-64.
#   tests/package/installed.sh SOURCE_DIR WORK_DIR [COMPILER_LAUNCHER]
set -u -o pipefail
src=$1 work=$2 launcher=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
extra=()
[ -n "$launcher" ] && extra=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
cmake -G Ninja -S "$src" -B lrt-build -DCMAKE_BUILD_TYPE=Release -DLRT_NATIVE=ON -DLRT_TOOL_PAIRS="baseline;lrt" \
  -DLRT_BUILD_TESTS=OFF -DLRT_BUILD_BENCH=OFF -DLRT_ENABLE_CUDA=OFF "${extra[@]}" > configure.log 2>&1 ||
  { tail -20 configure.log; fail "configure"; }
cmake --build lrt-build --target lrt-quantize lrt-embedded-generate lrt_c lrt_runtime -j 2 > build.log 2>&1 ||
  { tail -30 build.log; fail "build"; }
# Portable: the C API library's compile command carries no -march, and its code no AVX.
cmd=$(ninja -C lrt-build -t commands lrt_c | grep -E 'lrt_c\.cpp\.o' | tail -1)
[ -n "$cmd" ] || fail "no compile command for lrt_c"
echo "$cmd" | grep -q -- '-march' && fail "lrt_c is compiled with -march: $cmd"
if [ "$(uname -m)" = x86_64 ] && command -v objdump > /dev/null; then
  # The functions (demangled) that hold instructions on ymm/zmm registers, and how many each.
  objdump -d --demangle lrt-build/liblrt_c.a | awk '
    /^[0-9a-f]+ <.*>:$/ { f = $0; sub(/^[0-9a-f]+ </, "", f); sub(/>:$/, "", f); next }
    /%[yz]mm/ { n[f]++ }
    END { for (f in n) print n[f] "\t" f }' > avx_functions.txt
  total=$(awk -F'\t' '{ s += $1 } END { print s + 0 }' avx_functions.txt)
  kernels='(avx2|avx512|Avx2|Avx512|fold8|fold16|in_register|bf16_kernels::)'  # bf16_kernels: AVX512-BF16
  if grep -vE "$kernels" avx_functions.txt > avx_elsewhere.txt; then
    fail "liblrt_c.a holds AVX instructions outside the run-time-chosen kernels: $(head -5 avx_elsewhere.txt)"
  fi
  [ "$total" -gt 0 ] || fail "liblrt_c.a holds no AVX instruction: the kernels chosen at run time are missing"
  echo "liblrt_c.a: compiled without -march; its $total AVX instructions lie in $(wc -l < avx_functions.txt)" \
    "functions of the kernels chosen at run time (baseline x86-64 elsewhere)"
fi
cmake --install lrt-build --prefix "$work/prefix" > install.log 2>&1 || { cat install.log; fail "cmake --install"; }
P=$work/prefix
for f in bin/lrt-quantize bin/lrt-embedded-generate lib/liblrt_c.a include/lrt.h include/lrt/lrt.hpp \
  include/lrt/runtime/c_api.hpp lib/cmake/lrt/lrtConfig.cmake lib/cmake/lrt/lrtTargets.cmake \
  lib/liblrt_runtime.a lib/cmake/lrt/lrtRuntimeTargets.cmake include/lrt/runtime/training.hpp \
  lib/pkgconfig/lrt.pc lib/pkgconfig/lrt-c.pc lib/pkgconfig/lrt-runtime.pc; do
  [ -e "$P/$f" ] || fail "the install tree lacks $f: $(cd "$P" && find . -maxdepth 3 | sort | tr '\n' ' ')"
done
for f in bin/lrt-train bin/lrt-c-generate; do
  [ -e "$P/$f" ] && fail "$f was installed, but this build did not make it"
done
echo "installed: $(cd "$P" && find . -maxdepth 2 -not -path './include/*' | sort | tr '\n' ' ')"

ck=$src/tests/data/pre_roster/baseline_standard.safetensors
# The host project configured as docs/library.md shows (no build type) builds Release.
cmake -S "$src/examples/host_project" -B host-doc -DCMAKE_PREFIX_PATH="$P" \
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "${extra[@]}" > host-doc-configure.log 2>&1 ||
  { tail -20 host-doc-configure.log; fail "configure examples/host_project as docs/library.md does"; }
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' host-doc/CMakeCache.txt ||
  fail "examples/host_project configured without a build type: $(grep '^CMAKE_BUILD_TYPE' host-doc/CMakeCache.txt)"
echo "examples/host_project without a build type: Release"
cmake -G Ninja -S "$src/tests/package/installed" -B consumer -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$P" -DLRT_EXPECTED_PREFIX="$P" -DLRT_EXAMPLES="$src/examples" \
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "${extra[@]}" > consumer-configure.log 2>&1 ||
  { tail -20 consumer-configure.log; fail "configure the consumer"; }
cmake --build consumer -j 2 > consumer-build.log 2>&1 || { tail -30 consumer-build.log; fail "build the consumer"; }
consumer/host_project/quickstart > quickstart.out 2>&1 || fail "quickstart: $(tail -5 quickstart.out)"
grep -Eq 'step 30 loss [0-9.]+' quickstart.out || fail "quickstart printed: $(cat quickstart.out)"
echo "quickstart (lrt::lrt): $(grep -E 'step 30 loss' quickstart.out)"
consumer/host_project/runtime_quickstart rq-cmake > rq-cmake.out 2>&1 ||
  fail "runtime_quickstart (lrt::runtime): $(tail -5 rq-cmake.out)"
grep -Eq '^sequential bits per byte [0-9.]+$' rq-cmake.out || fail "runtime_quickstart printed: $(cat rq-cmake.out)"
echo "runtime_quickstart (lrt::runtime): $(grep -E '^sequential bits per byte' rq-cmake.out)"
consumer/host_project/runtime_quickstart --help | grep -q '^usage: .*runtime_quickstart \[OUT_DIR\]$' ||
  fail "runtime_quickstart --help printed no usage"
consumer/host_project/runtime_quickstart --bogus 2> /dev/null
[ $? -eq 2 ] || fail "runtime_quickstart --bogus did not exit 2"
[ ! -e --bogus ] || fail "runtime_quickstart --bogus made a folder"
consumer/host_project/embedded_decode "$ck" "The q" 40 > embedded.out 2>&1 || fail "embedded_decode: $(cat embedded.out)"
consumer/c_decode "$ck" "The q" 40 > c.out 2>&1 || fail "c_decode: $(cat c.out)"
cmp -s embedded.out c.out || fail "lrt::embedded printed '$(cat embedded.out)', lrt::c '$(cat c.out)'"
[ "$(wc -c < c.out)" -gt 40 ] || fail "c_decode printed too little: $(cat c.out)"
echo "lrt::embedded and lrt::c: the same greedy text ($(wc -c < c.out) bytes after \"The q\")"
# The same C program through pkg-config, against the prefix only.
export PKG_CONFIG_PATH=$P/lib/pkgconfig
flags=$(pkg-config --cflags --libs lrt-c) || fail "pkg-config lrt-c"
cc -std=c11 "$src/tests/package/installed/c_decode.c" $flags -o c_decode_pc > pc-build.log 2>&1 ||
  { cat pc-build.log; fail "cc c_decode.c $flags"; }
./c_decode_pc "$ck" "The q" 40 > pc.out 2>&1 || fail "c_decode (pkg-config): $(cat pc.out)"
cmp -s pc.out c.out || fail "the pkg-config build printed '$(cat pc.out)'"
echo "pkg-config: cc c_decode.c $flags"
cxxflags=$(pkg-config --cflags --libs lrt) || fail "pkg-config lrt"
c++ "$src/tests/package/find_package/main.cpp" $cxxflags -o tensor_pc > pc-cxx-build.log 2>&1 ||
  { cat pc-cxx-build.log; fail "c++ main.cpp $cxxflags"; }
./tensor_pc || fail "the C++ program built with pkg-config's lrt flags"
echo "pkg-config: c++ main.cpp $cxxflags"
rtflags=$(pkg-config --static --cflags --libs lrt-runtime) || fail "pkg-config lrt-runtime"
c++ -O2 "$src/examples/runtime_quickstart.cpp" $rtflags -o rq_pc > pc-rt-build.log 2>&1 ||
  { cat pc-rt-build.log; fail "c++ runtime_quickstart.cpp $rtflags"; }
./rq_pc rq-pc > rq-pc.out 2>&1 || fail "runtime_quickstart (pkg-config): $(tail -5 rq-pc.out)"
diff <(grep -v '^saved ' rq-cmake.out) <(grep -v '^saved ' rq-pc.out) > /dev/null ||
  fail "runtime_quickstart printed other lines built with pkg-config: $(diff rq-cmake.out rq-pc.out | head -6)"
echo "pkg-config: c++ runtime_quickstart.cpp $rtflags (the same lines as the CMake build)"
echo "PASS"
