// lrt/backend/cpu/rowwise.hpp: the single-row product of decoding, for one row or many. Every
// output is a dot product summed in one fixed order (dot_lanes: 16 interleaved partial sums,
// folded pairwise, then the tail), whatever the rows beside it: a row decoded in a batch gets the
// bits it gets alone, and one read of the weights serves every row of a decode step. Blocks of
// rows of x and of the weights (dot_block) keep several independent sums in the vector registers
// (AVX-512 or AVX2 with FMA by intrinsics; other builds by a plain loop the compiler vectorises),
// all in the same per-lane order. Depends on nothing but core/config.hpp, so that the embedded
// build and the per-instruction-set checks (tests/cross/packed_check.cpp) take it alone.
// Threads and profiling: cpu::rowwise_product (backend/cpu/gemm.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "../../core/config.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu::detail {

/// Lanes of the matrix-vector kernels: independent partial sums kept in vector registers whatever
/// the instruction set (16 measured best with SSE2, AVX2 and AVX-512 builds).
inline constexpr int gemv_lanes = 16;

/// Whether a lane's multiply-add rounds once (fused) in this build: where the instruction set has
/// FMA (x86-64 with -mfma or a -march that has it, AArch64). The same in every kernel below, so
/// that each gives every output the arithmetic of dot_lanes.
inline constexpr bool gemv_fused =
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    true;
#else
    false;
#endif

/// acc + x w, fused where gemv_fused.
template <class T>
inline T lane_madd(T acc, T x, T w) noexcept {
  if constexpr (gemv_fused)
    return std::fma(x, w, acc);
  else
    return acc + x * w;
}

#if (defined(__AVX512F__) || defined(__AVX2__)) && defined(__FMA__)
/// Lanes 0-7 of v folded pairwise: lane l += lane l + h for h = 4, 2, 1 (dot_lanes' fold after h = 8).
inline float fold8(__m256 v) noexcept {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  a = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
  return _mm_cvtss_f32(a);
}
#endif

/// out[r * ldo + j] = the dot product of x[r] (K values) with row j of w (stride ldw), for NR rows
/// of x and NW rows of w, each in dot_lanes' order: gemv_lanes partial sums over k in steps of
/// gemv_lanes (lane l takes k = l, l + 16, ...), folded pairwise (lane l += lane l + h for h = 8, 4,
/// 2, 1), then the last K % gemv_lanes products in order of k. The NR x NW sums are independent
/// chains, so a block keeps the FMA units busy where one dot product waits on its own latency; no
/// output depends on the others, on NR or on NW.
template <int NR, int NW, class T>
inline void dot_block(index_t K, const T* const* x, const T* __restrict w, index_t ldw, T* out, index_t ldo) noexcept {
  constexpr int L = gemv_lanes;
  index_t k = 0;
  T s[NR][NW];
#if defined(__AVX512F__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {  // the 16 lanes in one register
    __m512 acc[NR][NW];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_setzero_ps();
    for (; k + L <= K; k += L) {
      __m512 wv[NW];
      for (int j = 0; j < NW; ++j) wv[j] = _mm512_loadu_ps(w + j * ldw + k);
      for (int r = 0; r < NR; ++r) {
        const __m512 xv = _mm512_loadu_ps(x[r] + k);
        for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) {
        const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(acc[r][j]),
                                        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][j]), 1)));
        s[r][j] = fold8(h8);
      }
  } else
#elif defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {  // lanes 0-7 and 8-15 in two registers
    __m256 lo[NR][NW], hi[NR][NW];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) lo[r][j] = _mm256_setzero_ps(), hi[r][j] = _mm256_setzero_ps();
    for (; k + L <= K; k += L) {
      __m256 wl[NW], wh[NW];
      for (int j = 0; j < NW; ++j) wl[j] = _mm256_loadu_ps(w + j * ldw + k), wh[j] = _mm256_loadu_ps(w + j * ldw + k + 8);
      for (int r = 0; r < NR; ++r) {
        const __m256 xl = _mm256_loadu_ps(x[r] + k), xh = _mm256_loadu_ps(x[r] + k + 8);
        for (int j = 0; j < NW; ++j)
          lo[r][j] = _mm256_fmadd_ps(xl, wl[j], lo[r][j]), hi[r][j] = _mm256_fmadd_ps(xh, wh[j], hi[r][j]);
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) s[r][j] = fold8(_mm256_add_ps(lo[r][j], hi[r][j]));
  } else
#endif
  {
    T acc[NR][NW][L] = {};
    for (; k + L <= K; k += L)
      for (int r = 0; r < NR; ++r)
        for (int j = 0; j < NW; ++j)
          for (int l = 0; l < L; ++l) acc[r][j][l] = lane_madd(acc[r][j][l], x[r][k + l], w[j * ldw + k + l]);
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) {
        T* a = acc[r][j];
        for (int h = L / 2; h > 0; h /= 2)
          for (int l = 0; l < h; ++l) a[l] += a[l + h];
        s[r][j] = a[0];
      }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NW; ++j) {
      T v = s[r][j];
      for (index_t kk = k; kk < K; ++kk) v = lane_madd(v, x[r][kk], w[j * ldw + kk]);
      out[r * ldo + j] = v;
    }
}

/// Rows of x and of w per dot_block in gemv_rows (accumulators that fit the vector registers).
#if defined(__AVX512F__) && defined(__FMA__)
inline constexpr int gemv_block_x = 4, gemv_block_w = 4;
#else
inline constexpr int gemv_block_x = 2, gemv_block_w = 2;
#endif

/// dot_block for nr <= NR rows of x and nw <= NW rows of w.
template <int NR, int NW, class T>
inline void dot_block_upto(int nr, int nw, index_t K, const T* const* x, const T* w, index_t ldw, T* out,
                           index_t ldo) noexcept {
  if constexpr (NR > 1)
    if (nr < NR) return dot_block_upto<NR - 1, NW>(nr, nw, K, x, w, ldw, out, ldo);
  if constexpr (NW > 1)
    if (nw < NW) return dot_block_upto<NR, NW - 1>(nr, nw, K, x, w, ldw, out, ldo);
  dot_block<NR, NW>(K, x, w, ldw, out, ldo);
}

/// sum_k x[k] w[k] in gemv_lanes interleaved partial sums, folded pairwise (a fixed order; see dot_block).
template <class T>
inline T dot_lanes(index_t K, const T* x, const T* w) noexcept {
  T s;
  dot_block<1, 1>(K, &x, w, 0, &s, 1);
  return s;
}

/// Weight rows per cache block of gemv_rows: about 32 KiB of them, a multiple of gemv_block_w.
template <class T>
inline index_t gemv_rows_block(index_t K) noexcept {
  const index_t n = index_t{32768} / static_cast<index_t>(sizeof(T)) / std::max<index_t>(K, 1);
  return std::max<index_t>(gemv_block_w, n / gemv_block_w * gemv_block_w);
}

/// C (R, N) = alpha x (R, K) w^T + beta C for w (N, K) (row stride ldw), weight rows n0..n1 only:
/// every C[r, n] is alpha * dot_lanes(x[r], w[n]) (+ beta C[r, n]), so a row's results are those of
/// that row alone, whatever R. The weights are read once for all rows: a cache block of
/// gemv_rows_block rows of w at a time, against every row of x.
template <class T>
void gemv_rows(index_t R, index_t n0, index_t n1, index_t K, T alpha, const T* x, index_t ldx, const T* w,
               index_t ldw, T beta, T* C, index_t ldc) noexcept {
  constexpr int NR = gemv_block_x, NW = gemv_block_w;
  const index_t nb = gemv_rows_block<T>(K);
  T out[NR * NW];
  for (index_t b0 = n0; b0 < n1; b0 += nb) {
    const index_t b1 = std::min(n1, b0 + nb);
    for (index_t r0 = 0; r0 < R; r0 += NR) {
      const int nr = static_cast<int>(std::min<index_t>(NR, R - r0));
      const T* xs[NR] = {};
      for (int i = 0; i < nr; ++i) xs[i] = x + (r0 + i) * ldx;
      for (index_t n = b0; n < b1; n += NW) {
        const int nw = static_cast<int>(std::min<index_t>(NW, b1 - n));
        dot_block_upto<NR, NW>(nr, nw, K, xs, w + n * ldw, ldw, out, NW);
        for (int i = 0; i < nr; ++i)
          for (int j = 0; j < nw; ++j) {
            T& c = C[(r0 + i) * ldc + n + j];
            const T s = alpha * out[i * NW + j];
            c = beta == T(0) ? s : s + beta * c;
          }
      }
    }
  }
}

}  // namespace cpu::detail
}  // namespace v0
}  // namespace lrt
