// lrt/backend/cpu/sgemm.hpp: lrt's own single-threaded fp32 GEMM for x86-64, with AVX-512 and
// AVX2 + FMA kernels chosen at run time: every kernel is compiled into every build (a function
// attribute gives it its instruction set), so the portable build, whose own code is SSE2, runs
// the CPU's widest vectors all the same. The caller picks one with cpu_simd_level(): a kernel
// runs only on a CPU that has its instructions (backend/cpu/gemm.hpp decides which GEMM a process
// uses).
//
// The scheme is the usual blocked one: op(B) in panels of kc rows packed into slivers of NR
// columns, op(A) in blocks of mc rows packed into slivers of MR rows, an MR x NR tile of C in
// registers over kc steps. Every element of C is the same sequence of operations wherever it
// lies: per block of kc values of k, a chain of fused multiply-adds over k from zero, then
// C = alpha * sum + beta * C (beta = 1 after the first block; C is not read when beta = 0); a tile
// at an edge of C runs the full tile on a copy. So a result does not depend on M, N, the tile it
// falls in or a split of the rows of C over calls (lrt's pool splits them). Depends on nothing but
// core/config.hpp and backend/cpu/simd_level.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <new>
#include <utility>

#include "simd_level.hpp"
#if LRT_X86_KERNELS
#include <immintrin.h>
#endif

namespace lrt {
inline namespace v0 {
namespace cpu {

/// One operand of sgemm: op(X)[i][k] is p[k * ld + i] when trans, else p[i * ld + k] (row-major).
struct SgemmOperand {
  const float* p;
  index_t ld;
  bool trans;
};

namespace detail::sgemm_kernels {

/// Blocking: kc values of k per packed panel (a kc x NR sliver of B stays in L1), mc rows of op(A)
/// per packed block (in L2), nc columns of op(B) per packed panel.
inline constexpr index_t kc_max = 256, mc_max = 128, nc_max = 2048;

/// The two packing buffers of the calling thread, 64-byte aligned, grown on demand and kept.
struct Buffers {
  float* a = nullptr;
  float* b = nullptr;
  std::size_t na = 0, nb = 0;
  static float* grow(float*& p, std::size_t& have, std::size_t want) {
    if (want <= have) return p;
    ::operator delete[](p, std::align_val_t(64));
    p = static_cast<float*>(::operator new[](want * sizeof(float), std::align_val_t(64)));
    have = want;
    return p;
  }
  ~Buffers() {
    ::operator delete[](a, std::align_val_t(64));
    ::operator delete[](b, std::align_val_t(64));
  }
};
inline Buffers& buffers() {
  thread_local Buffers b;
  return b;
}

/// Rows [i0, i0 + mc) and columns [k0, k0 + kc) of op(A), in slivers of MR rows: the sliver s holds
/// at [s * kc * MR + k * MR + r] the value op(A)[i0 + s * MR + r][k0 + k], zero past row mc.
template <int MR>
inline void pack_a(const SgemmOperand& a, index_t i0, index_t mc, index_t k0, index_t kc, float* dst) {
  for (index_t s = 0; s * MR < mc; ++s, dst += kc * MR) {
    const index_t rows = std::min<index_t>(MR, mc - s * MR), i = i0 + s * MR;
    if (a.trans) {
      for (index_t k = 0; k < kc; ++k) {
        const float* src = a.p + (k0 + k) * a.ld + i;
        float* d = dst + k * MR;
        for (index_t r = 0; r < rows; ++r) d[r] = src[r];
        for (index_t r = rows; r < MR; ++r) d[r] = 0.0f;
      }
    } else {
      for (index_t r = 0; r < rows; ++r) {
        const float* src = a.p + (i + r) * a.ld + k0;
        for (index_t k = 0; k < kc; ++k) dst[k * MR + r] = src[k];
      }
      for (index_t r = rows; r < MR; ++r)
        for (index_t k = 0; k < kc; ++k) dst[k * MR + r] = 0.0f;
    }
  }
}

/// Rows [k0, k0 + kc) and columns [j0, j0 + nc) of op(B), in slivers of NR columns: the sliver s
/// holds at [s * kc * NR + k * NR + c] the value op(B)[k0 + k][j0 + s * NR + c], zero past column nc.
template <int NR>
inline void pack_b(const SgemmOperand& b, index_t k0, index_t kc, index_t j0, index_t nc, float* dst) {
  for (index_t s = 0; s * NR < nc; ++s, dst += kc * NR) {
    const index_t cols = std::min<index_t>(NR, nc - s * NR), j = j0 + s * NR;
    if (b.trans) {
      for (index_t c = 0; c < cols; ++c) {
        const float* src = b.p + (j + c) * b.ld + k0;
        for (index_t k = 0; k < kc; ++k) dst[k * NR + c] = src[k];
      }
      for (index_t c = cols; c < NR; ++c)
        for (index_t k = 0; k < kc; ++k) dst[k * NR + c] = 0.0f;
    } else {
      for (index_t k = 0; k < kc; ++k) {
        const float* src = b.p + (k0 + k) * b.ld + j;
        float* d = dst + k * NR;
        for (index_t c = 0; c < cols; ++c) d[c] = src[c];
        for (index_t c = cols; c < NR; ++c) d[c] = 0.0f;
      }
    }
  }
}

/// Runs f(begin, end) over [0, n) on the calling thread: sgemm's default for its `par` argument.
struct SerialFor {
  template <class F>
  void operator()(index_t n, F&& f) const {
    if (n > 0) f(index_t{0}, n);
  }
};

/// The blocked product on one micro-kernel: Kernel(kc, a sliver, b sliver, C tile, ldc, alpha,
/// beta) computes a full MR x NR tile. par(n, f) runs f over disjoint ranges covering [0, n),
/// perhaps in parallel: it packs each panel of op(B) (by slivers) and then runs the blocks of
/// rows of C against it. Each thread packs op(A) into its own buffer; the panel of op(B) is the
/// calling thread's.
template <int MR, int NR, class Kernel, class Par>
void run(index_t M, index_t N, index_t K, float alpha, const SgemmOperand& a, const SgemmOperand& b, float beta,
         float* C, index_t ldc, Kernel kernel, Par&& par) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // C = beta C (0 for beta = 0, whatever C held)
    for (index_t i = 0; i < M; ++i)
      for (index_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  constexpr index_t mc_block = (mc_max / MR) * MR;
  Buffers& own = buffers();
  const index_t kc_top = std::min(K, kc_max), nc_top = std::min(N, nc_max);
  float* bp = Buffers::grow(own.b, own.nb, std::size_t(kc_top) * std::size_t((nc_top + NR - 1) / NR * NR));
  const index_t blocks = (M + mc_block - 1) / mc_block;
  for (index_t j0 = 0; j0 < N; j0 += nc_max) {
    const index_t nc = std::min(nc_max, N - j0), slivers = (nc + NR - 1) / NR;
    for (index_t k0 = 0; k0 < K; k0 += kc_max) {
      const index_t kc = std::min(kc_max, K - k0);
      const float beta_k = k0 == 0 ? beta : 1.0f;
      par(slivers, [&](index_t s0, index_t s1) {
        pack_b<NR>(b, k0, kc, j0 + s0 * NR, std::min(nc, s1 * NR) - s0 * NR, bp + s0 * kc * NR);
      });
      par(blocks, [&](index_t blk0, index_t blk1) {
        Buffers& mine = buffers();
        float* ap = Buffers::grow(mine.a, mine.na, std::size_t(kc_top) * std::size_t(mc_block));
        alignas(64) float edge[MR * NR];
        for (index_t blk = blk0; blk < blk1; ++blk) {
          const index_t i0 = blk * mc_block, mc = std::min(mc_block, M - i0);
          pack_a<MR>(a, i0, mc, k0, kc, ap);
          for (index_t jr = 0; jr < nc; jr += NR) {
            const index_t cols = std::min<index_t>(NR, nc - jr);
            const float* bs = bp + (jr / NR) * kc * NR;
            for (index_t ir = 0; ir < mc; ir += MR) {
              const index_t rows = std::min<index_t>(MR, mc - ir);
              const float* as = ap + (ir / MR) * kc * MR;
              float* c = C + (i0 + ir) * ldc + j0 + jr;
              if (rows == MR && cols == NR) {
                kernel(kc, as, bs, c, ldc, alpha, beta_k);
                continue;
              }
              // An edge tile: the full tile on a copy (the same operations for every element).
              for (index_t r = 0; r < MR; ++r)
                for (index_t q = 0; q < NR; ++q)
                  edge[r * NR + q] = (r < rows && q < cols && beta_k != 0.0f) ? c[r * ldc + q] : 0.0f;
              kernel(kc, as, bs, edge, NR, alpha, beta_k);
              for (index_t r = 0; r < rows; ++r)
                for (index_t q = 0; q < cols; ++q) c[r * ldc + q] = edge[r * NR + q];
            }
          }
        }
      });
    }
  }
}

#if LRT_X86_KERNELS
// A tile's registers are named by packs of constant indices (R...: its rows), expanded by fold
// expressions, so that the accumulators live in registers whatever the compiler's unrolling.

/// One row of an AVX-512 tile out: C = alpha acc (+ beta C).
LRT_TARGET_AVX512 LRT_ALWAYS_INLINE void store_row_avx512(float* c, __m512 s0, __m512 s1, __m512 va, __m512 vb,
                                                          float beta) noexcept {
  __m512 v0 = _mm512_mul_ps(va, s0), v1 = _mm512_mul_ps(va, s1);
  if (beta != 0.0f) {
    v0 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c), v0);
    v1 = _mm512_fmadd_ps(vb, _mm512_loadu_ps(c + 16), v1);
  }
  _mm512_storeu_ps(c, v0);
  _mm512_storeu_ps(c + 16, v1);
}

/// AVX-512: a tile of sizeof...(R) rows x 32 columns, op(A) broadcast from memory.
template <std::size_t... R>
LRT_TARGET_AVX512 inline void tile_avx512(index_t kc, const float* __restrict a, const float* __restrict b, float* c,
                                          index_t ldc, float alpha, float beta, std::index_sequence<R...>) noexcept {
  constexpr index_t MR = sizeof...(R);
  __m512 acc0[MR], acc1[MR];
  ((acc0[R] = _mm512_setzero_ps(), acc1[R] = _mm512_setzero_ps()), ...);
  for (index_t k = 0; k < kc; ++k, a += MR, b += 32) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
    ((acc0[R] = _mm512_fmadd_ps(_mm512_set1_ps(a[R]), b0, acc0[R]),
      acc1[R] = _mm512_fmadd_ps(_mm512_set1_ps(a[R]), b1, acc1[R])),
     ...);
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  (store_row_avx512(c + index_t(R) * ldc, acc0[R], acc1[R], va, vb, beta), ...);
}

/// One row of an AVX2 tile out: C = alpha acc (+ beta C).
LRT_TARGET_AVX2 LRT_ALWAYS_INLINE void store_row_avx2(float* c, __m256 s0, __m256 s1, __m256 va, __m256 vb,
                                                      float beta) noexcept {
  __m256 v0 = _mm256_mul_ps(va, s0), v1 = _mm256_mul_ps(va, s1);
  if (beta != 0.0f) {
    v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c), v0);
    v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c + 8), v1);
  }
  _mm256_storeu_ps(c, v0);
  _mm256_storeu_ps(c + 8, v1);
}

/// AVX2 + FMA: a tile of sizeof...(R) rows x 16 columns.
template <std::size_t... R>
LRT_TARGET_AVX2 inline void tile_avx2(index_t kc, const float* __restrict a, const float* __restrict b, float* c,
                                      index_t ldc, float alpha, float beta, std::index_sequence<R...>) noexcept {
  constexpr index_t MR = sizeof...(R);
  __m256 acc0[MR], acc1[MR];
  ((acc0[R] = _mm256_setzero_ps(), acc1[R] = _mm256_setzero_ps()), ...);
  for (index_t k = 0; k < kc; ++k, a += MR, b += 16) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
    ((acc0[R] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + R), b0, acc0[R]),
      acc1[R] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + R), b1, acc1[R])),
     ...);
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  (store_row_avx2(c + index_t(R) * ldc, acc0[R], acc1[R], va, vb, beta), ...);
}

/// AVX-512: tiles of 8 rows x 32 columns (16 accumulators).
inline constexpr int avx512_mr = 8, avx512_nr = 32;
inline void kernel_avx512(index_t kc, const float* a, const float* b, float* c, index_t ldc, float alpha,
                          float beta) noexcept {
  tile_avx512(kc, a, b, c, ldc, alpha, beta, std::make_index_sequence<avx512_mr>{});
}

/// AVX2 + FMA: tiles of 6 rows x 16 columns (12 of the 16 registers accumulate).
inline constexpr int avx2_mr = 6, avx2_nr = 16;
inline void kernel_avx2(index_t kc, const float* a, const float* b, float* c, index_t ldc, float alpha,
                        float beta) noexcept {
  tile_avx2(kc, a, b, c, ldc, alpha, beta, std::make_index_sequence<avx2_mr>{});
}
#endif

}  // namespace detail::sgemm_kernels

/// Whether lrt's own GEMM has a kernel for `level` in this build (AVX-512 and AVX2 on x86-64 with
/// GCC or Clang).
inline constexpr bool sgemm_has_kernel(SimdLevel level) noexcept {
  return LRT_X86_KERNELS && (level == SimdLevel::avx512 || level == SimdLevel::avx2);
}

/// C (M, N) = alpha op(A) op(B) + beta C, row-major with row stride ldc, single-threaded, on lrt's
/// kernel for `level` (sgemm_has_kernel(level), and the CPU must have it: cpu_simd_level() >= level;
/// the caller checks). C is not read when beta = 0. par(n, f) may run f(begin, end) over parts of
/// [0, n) on other threads (lrt's pool: backend/cpu/gemm.hpp); the result is the same bits however
/// it splits them.
template <class Par = detail::sgemm_kernels::SerialFor>
void sgemm(SimdLevel level, index_t M, index_t N, index_t K, float alpha, const SgemmOperand& a, const SgemmOperand& b,
           float beta, float* C, index_t ldc, Par&& par = {}) {
  namespace s = detail::sgemm_kernels;
#if LRT_X86_KERNELS
  if (level == SimdLevel::avx512) {
    s::run<s::avx512_mr, s::avx512_nr>(M, N, K, alpha, a, b, beta, C, ldc, s::kernel_avx512, par);
    return;
  }
  if (level == SimdLevel::avx2) {
    s::run<s::avx2_mr, s::avx2_nr>(M, N, K, alpha, a, b, beta, C, ldc, s::kernel_avx2, par);
    return;
  }
#endif
  (void)level, (void)par, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)b, (void)beta, (void)C, (void)ldc;
}

}  // namespace cpu
}  // namespace v0
}  // namespace lrt
