#!/usr/bin/env bash
# cross.aarch64: the decode path cross-built for aarch64 and run under qemu-user.
#   tests/cross/cross_check.sh SOURCE_DIR HOST_BIN_DIR WORK_DIR [COMPILER_LAUNCHER]
# 1. tests/cross configures with cmake/toolchains/aarch64-linux-gnu.cmake and builds: the C API
#    (examples/tools/capi/lrt_c.cpp over the lean decoder) with lrt-c-generate, the embedded build's
#    lrt-embedded-generate (no exceptions, RTTI, fmt or threads; static), and packed_check.
# 2. packed_check runs under qemu (ctest, through CMAKE_CROSSCOMPILING_EMULATOR): the NEON int8
#    and bf16 products against double products.
# 3. For fp32 checkpoints the aarch64 lrt-c-generate prints the host build's greedy text byte for
#    byte (bytes are the tokens here): the same tokens on both architectures; so does the aarch64
#    lrt-embedded-generate.
# 4. An int8 file (host lrt-quantize) decodes on aarch64 too. Its greedy text is not compared: the
#    NEON products sum in another order than the host's (fused multiply-adds), so a near-tie may
#    go the other way.
# qemu checks correctness only: its timings say nothing about an Arm core's speed.
set -u -o pipefail
src=$1 bin=$2 work=$3 launcher=${4:-}
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
extra=()
[ -n "$launcher" ] && extra=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
cmake -G Ninja -S "$src/tests/cross" -B build --toolchain "$src/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release "${extra[@]}" > configure.log 2>&1 || { tail -20 configure.log; fail "configure"; }
cmake --build build -j 2 > build.log 2>&1 || { tail -30 build.log; fail "build"; }
head -c 20 build/lrt-c-generate | od -An -tx1 | tr -d ' \n' | grep -q '^7f454c46020101' || fail "not an ELF64 file"
# e_machine (bytes 18-19) = 0xb7: AArch64
[ "$(od -An -tx1 -j18 -N2 build/lrt-c-generate | tr -d ' \n')" = "b700" ] || fail "lrt-c-generate is not an aarch64 program"
pass "cross-built for aarch64 ($(grep -m1 -o 'The CXX compiler identification is .*' configure.log))"
ctest --test-dir build --output-on-failure > ctest.log 2>&1 || { cat ctest.log; fail "packed_check under qemu"; }
grep -E '^(ok|FAIL)' build/Testing/Temporary/LastTest.log | sed 's/^/  | /'
pass "packed products under qemu"

emu=$(sed -n 's/^LRT_QEMU_AARCH64:FILEPATH=//p' build/CMakeCache.txt)
[ -x "$emu" ] || fail "no qemu-aarch64 found by the toolchain file"
for ck in baseline_standard lrt_multirefine2; do
  f="$src/tests/data/pre_roster/$ck.safetensors"
  "$emu" build/lrt-c-generate "$f" "The q" 60 > arm.$ck.txt 2> arm.$ck.err || fail "aarch64 $ck: $(cat arm.$ck.err)"
  "$bin/lrt-c-generate" "$f" "The q" 60 > host.$ck.txt 2>&1 || fail "host $ck: $(cat host.$ck.txt)"
  cmp -s arm.$ck.txt host.$ck.txt || fail "$ck: the aarch64 greedy text differs from the host's"
  pass "$ck: the same $(wc -c < arm.$ck.txt) bytes of greedy text on aarch64 and the host"
  "$emu" build/lrt-embedded-generate "$f" "The q" 60 > emb.$ck.txt 2> emb.$ck.err || fail "aarch64 embedded $ck: $(cat emb.$ck.err)"
  cmp -s emb.$ck.txt host.$ck.txt || fail "$ck: the aarch64 embedded build's greedy text differs from the host's"
  pass "$ck: the aarch64 embedded build (static, $(stat -c %s build/lrt-embedded-generate) bytes) prints the same text"
done
"$bin/lrt-quantize" -m "$src/tests/data/pre_roster/baseline_standard.safetensors" -o q8.safetensors > q8.out 2>&1 ||
  fail "lrt-quantize: $(cat q8.out)"
"$emu" build/lrt-c-generate q8.safetensors "The q" 20 > arm.q8.txt 2>&1 || fail "aarch64 int8: $(cat arm.q8.txt)"
head -c 5 arm.q8.txt | grep -q "^The q" || fail "aarch64 int8: $(cat arm.q8.txt)"
pass "an int8 file decodes on aarch64"
