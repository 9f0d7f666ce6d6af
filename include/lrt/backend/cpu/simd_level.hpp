// lrt/backend/cpu/simd_level.hpp: which x86-64 vector instruction set the running CPU offers, for
// the kernels that are compiled for several and chosen at run time (backend/cpu/sgemm.hpp,
// backend/cpu/rowwise.hpp). Depends on nothing but core/config.hpp.
#pragma once

#include "../../core/config.hpp"

// Kernels for AVX2 and AVX-512 are compiled into every x86-64 build by GCC or Clang that has SSE2
// (not under nvcc), each with the target attribute of its instruction set.
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__)) && defined(__SSE2__)
#define LRT_X86_KERNELS 1
#define LRT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define LRT_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))
#else
#define LRT_X86_KERNELS 0
#endif

namespace lrt {
inline namespace v0 {
namespace cpu {

/// The x86 vector instruction sets lrt's kernels tell apart, in order of width.
enum class SimdLevel : int { none = 0, sse2 = 1, avx = 2, avx2 = 3, avx512 = 4 };

/// "SSE2", "AVX", "AVX2", "AVX-512" (or "none": not x86-64).
inline const char* simd_name(SimdLevel s) noexcept {
  switch (s) {
    case SimdLevel::sse2:
      return "SSE2";
    case SimdLevel::avx:
      return "AVX";
    case SimdLevel::avx2:
      return "AVX2";
    case SimdLevel::avx512:
      return "AVX-512";
    default:
      return "none";
  }
}

/// The widest instruction set the running CPU and OS offer (cpuid and the OS's saved register
/// state, through the compiler's __builtin_cpu_supports): AVX2 counts with FMA only, AVX-512 with
/// its F, DQ, BW and VL parts. SimdLevel::none off x86-64 (or without GCC or Clang).
inline SimdLevel cpu_simd_level() noexcept {
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
  static const SimdLevel level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
      return SimdLevel::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::avx2;
    if (__builtin_cpu_supports("avx")) return SimdLevel::avx;
    return SimdLevel::sse2;
  }();
  return level;
#else
  return SimdLevel::none;
#endif
}

}  // namespace cpu
}  // namespace v0
}  // namespace lrt
