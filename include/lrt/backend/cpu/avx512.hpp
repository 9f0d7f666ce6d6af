// lrt/backend/cpu/avx512.hpp: the AVX-512 intrinsics of lrt's kernels whose GCC 12 definitions
// pass an undefined register (`__m512 __Y = __Y;`), so that every optimised build that inlines
// them warns "'__Y' is used uninitialized" (GCC bug 105593, fixed in GCC 13). Each wrapper is the
// masked form of the same instruction with every lane selected and a defined source: the same
// result, bit for bit, and no warning. Defined in AVX-512 builds and, with the AVX-512 target
// attribute, wherever lrt compiles kernels chosen at run time (simd_level.hpp).
#pragma once

#include "simd_level.hpp"

#if defined(__AVX512F__) || LRT_X86_KERNELS
#include <immintrin.h>

#if LRT_X86_KERNELS
#define LRT_AVX512_WRAPPER LRT_TARGET_AVX512 inline
#else
#define LRT_AVX512_WRAPPER inline
#endif

namespace lrt {
inline namespace v0 {
namespace cpu::avx512 {

/// _mm512_shuffle_f32x4(a, b, Imm): 128-bit quarters of a (lower half) and b (upper half).
template <int Imm>
LRT_AVX512_WRAPPER __m512 shuffle_f32x4(__m512 a, __m512 b) noexcept {
  return _mm512_mask_shuffle_f32x4(a, static_cast<__mmask16>(0xFFFF), a, b, Imm);
}

/// _mm512_permutexvar_ps(idx, a): lane i of the result is lane idx[i] of a.
LRT_AVX512_WRAPPER __m512 permutexvar(__m512i idx, __m512 a) noexcept {
  return _mm512_mask_permutexvar_ps(a, static_cast<__mmask16>(0xFFFF), idx, a);
}

/// Lanes 4 Q to 4 Q + 3 of a (_mm512_extractf32x4_ps(a, Q)).
template <int Q>
LRT_AVX512_WRAPPER __m128 quarter(__m512 a) noexcept {
  return _mm512_mask_extractf32x4_ps(_mm_setzero_ps(), static_cast<__mmask8>(0xF), a, Q);
}

/// Lanes 0-7 (Half = 0) or 8-15 (Half = 1) of a.
template <int Half>
LRT_AVX512_WRAPPER __m256 half(__m512 a) noexcept {
  return _mm256_castpd_ps(
      _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), static_cast<__mmask8>(0xF), _mm512_castps_pd(a), Half));
}

}  // namespace cpu::avx512
}  // namespace v0
}  // namespace lrt

#undef LRT_AVX512_WRAPPER
#endif
