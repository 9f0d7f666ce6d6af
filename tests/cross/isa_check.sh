#!/usr/bin/env bash
# kernel.bf16_gemm_isa: in a portable build, AVX-512 instructions (zmm registers, vdpbf16ps) appear
# only in the kernels that are chosen at run time after the CPU was asked (the functions of
# lrt::cpu::detail::bf16_kernels and sgemm_kernels, compiled with a target attribute), so a CPU
# without them never meets one.
#   tests/cross/isa_check.sh OBJDUMP PROGRAM
set -u -o pipefail
objdump=$1 prog=$2
fns=$("$objdump" -d -C --no-show-raw-insn "$prog" |
  awk '/^[0-9a-f]+ <.*>:$/ { fn = $0; next } /zmm|vdpbf16ps/ { print fn }' | sort -u) || exit 1
[ -n "$fns" ] || { echo "FAIL: no AVX-512 code at all in $prog (the kernels are missing)"; exit 1; }
bad=$(grep -v -E 'detail::(bf16_kernels|sgemm_kernels)::' <<<"$fns")
if [ -n "$bad" ]; then
  echo "FAIL: AVX-512 instructions outside the run-time-chosen kernels:"
  echo "$bad"
  exit 1
fi
echo "ok: AVX-512 code only in $(wc -l <<<"$fns") kernel functions of $prog"
grep -c vdpbf16ps < <("$objdump" -d --no-show-raw-insn "$prog") | sed 's/^/vdpbf16ps instructions: /'
