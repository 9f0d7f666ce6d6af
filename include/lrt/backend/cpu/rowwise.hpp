// lrt/backend/cpu/rowwise.hpp: the single-row product of decoding, for one row or many. Every
// output is a dot product summed in one fixed order (dot_lanes: 16 interleaved partial sums,
// folded pairwise, then the tail), whatever the rows beside it: a row decoded in a batch gets the
// bits it gets alone, and one read of the weights serves every row of a decode step. Blocks of
// rows of x and of the weights (dot_block) keep several independent sums in the vector registers:
// AVX-512 or AVX2 with FMA by intrinsics, compiled into every x86-64 build with the target
// attribute of each and chosen at run time for the CPU (rowwise_level()), so the portable build
// runs them too; otherwise a plain loop the compiler vectorises for the build's instruction set,
// all in the same per-lane order. A process takes one path for every product, so the bits do not
// depend on the call. Depends on nothing but core/config.hpp, simd_level.hpp and avx512.hpp, so
// that the embedded build and the per-instruction-set checks (tests/cross/packed_check.cpp) take
// it alone. Threads and profiling: cpu::rowwise_product (backend/cpu/gemm.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "../../core/config.hpp"
#include "avx512.hpp"
#include "simd_level.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu::detail {

/// Lanes of the matrix-vector kernels: independent partial sums kept in vector registers whatever
/// the instruction set (16 measured best with SSE2, AVX2 and AVX-512 builds).
inline constexpr int gemv_lanes = 16;

/// Whether a lane's multiply-add rounds once (fused) in the plain loop of this build: where the
/// instruction set has FMA (x86-64 with -mfma or a -march that has it, AArch64). The AVX2 and
/// AVX-512 kernels always fuse (rowwise_fused() says which holds in this process).
inline constexpr bool gemv_fused =
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    true;
#else
    false;
#endif

/// acc + x w, fused where Fused.
template <bool Fused = gemv_fused, class T>
inline T lane_madd(T acc, T x, T w) noexcept {
  if constexpr (Fused)
    return std::fma(x, w, acc);
  else
    return acc + x * w;
}

/// The plain kernel: out[r * ldo + j] = the dot product of x[r] (K values) with row j of w (stride
/// ldw), for NR rows of x and NW rows of w, each in dot_lanes' order: gemv_lanes partial sums over
/// k in steps of gemv_lanes (lane l takes k = l, l + 16, ...), folded pairwise (lane l += lane l + h
/// for h = 8, 4, 2, 1), then the last K % gemv_lanes products in order of k. The NR x NW sums are
/// independent chains; no output depends on the others, on NR or on NW.
template <int NR, int NW, class T>
inline void dot_block_plain(index_t K, const T* const* x, const T* __restrict w, index_t ldw, T* out,
                            index_t ldo) noexcept {
  constexpr int L = gemv_lanes;
  index_t k = 0;
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
      T v = a[0];
      for (index_t kk = k; kk < K; ++kk) v = lane_madd(v, x[r][kk], w[j * ldw + kk]);
      out[r * ldo + j] = v;
    }
}

#if LRT_X86_KERNELS
/// Lanes 0-7 of v folded pairwise: lane l += lane l + h for h = 4, 2, 1 (dot_lanes' fold after h = 8).
LRT_TARGET_AVX2 inline float fold8(__m256 v) noexcept {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  a = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
  return _mm_cvtss_f32(a);
}

/// Keeps v in a register: each weight vector is loaded once and used by every row of x (left to
/// itself, the compiler loads it again as a memory operand of each multiply-add, which makes the
/// block bound by loads).
LRT_TARGET_AVX2 inline void in_register(__m256& v) noexcept { __asm__("" : "+v"(v)); }
LRT_TARGET_AVX512 inline void in_register(__m512& v) noexcept { __asm__("" : "+v"(v)); }

/// The folds of 16 registers of 16 lanes at once, each in dot_lanes' order (lane l += lane l + h
/// for h = 8, 4, 2, 1), as a tree of shuffles and adds that packs two folds into one register at
/// each level. Returns the 16 folds: lane 4t + u holds the fold of v[t + 4u].
LRT_TARGET_AVX512 inline __m512 fold16(const __m512* v) noexcept {
  __m512 c[8], e[4], g[2];
  for (int m = 0; m < 8; ++m) {  // h = 8: c[m] = (v[2m] lanes 0-7 | v[2m+1] lanes 0-7)
    const __m512 a = v[2 * m], b = v[2 * m + 1];
    c[m] = _mm512_add_ps(avx512::shuffle_f32x4<_MM_SHUFFLE(1, 0, 1, 0)>(a, b),
                         avx512::shuffle_f32x4<_MM_SHUFFLE(3, 2, 3, 2)>(a, b));
  }
  for (int m = 0; m < 4; ++m) {  // h = 4: e[m] quarter t = v[4m + t] lanes 0-3
    const __m512 a = c[2 * m], b = c[2 * m + 1];
    e[m] = _mm512_add_ps(avx512::shuffle_f32x4<_MM_SHUFFLE(2, 0, 2, 0)>(a, b),
                         avx512::shuffle_f32x4<_MM_SHUFFLE(3, 1, 3, 1)>(a, b));
  }
  for (int m = 0; m < 2; ++m) {  // h = 2: g[m] quarter t = (v[8m + t] lanes 0-1, v[8m + 4 + t] lanes 0-1)
    const __m512 a = e[2 * m], b = e[2 * m + 1];
    g[m] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // h = 1: lane 4t + u holds the fold of v[t + 4u].
  return _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/// dot_block_plain's sums (fused) with the 16 lanes in one AVX-512 register. `ahead`: the weight
/// rows of the next block, asked for meanwhile (or null).
template <int NR, int NW>
LRT_TARGET_AVX512 inline void dot_block_avx512(index_t K, const float* const* x, const float* __restrict w, index_t ldw,
                                               float* out, index_t ldo, const float* ahead) noexcept {
  constexpr int L = gemv_lanes;
  index_t k = 0;
  float s[NR][NW];
  __m512 acc[NR][NW];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_setzero_ps();
  for (; k + L <= K; k += L) {
    __m512 wv[NW];
    if (ahead)
      for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(ahead + j * ldw + k), _MM_HINT_T0);
    for (int j = 0; j < NW; ++j) {
      wv[j] = _mm512_loadu_ps(w + j * ldw + k);
      if constexpr (NR > 1) in_register(wv[j]);
    }
    for (int r = 0; r < NR; ++r) {
      const __m512 xv = _mm512_loadu_ps(x[r] + k);
      for (int j = 0; j < NW; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
    }
  }
  if constexpr (NR == 4 && NW == 4) {
    __m512 v[16];  // j-major, so that the folds come out row by row: lane 4r + j
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) v[j * 4 + r] = acc[r][j];
    const __m512 f = fold16(v);
    if (k == K) {  // no tail: each row's four outputs straight out
      _mm_storeu_ps(out, avx512::quarter<0>(f)), _mm_storeu_ps(out + ldo, avx512::quarter<1>(f));
      _mm_storeu_ps(out + 2 * ldo, avx512::quarter<2>(f));
      _mm_storeu_ps(out + 3 * ldo, avx512::quarter<3>(f));
      return;
    }
    float lanes[16];
    _mm512_storeu_ps(lanes, f);
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) s[r][j] = lanes[4 * r + j];
  } else if constexpr (NR == 1 && NW == 16) {
    // Output i's fold is in lane 4 (i % 4) + i / 4: put the lanes in order of i.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512 f = avx512::permutexvar(order, fold16(acc[0]));
    if (k == K) {
      _mm512_storeu_ps(out, f);
      return;
    }
    _mm512_storeu_ps(s[0], f);
  } else {
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < NW; ++j) {
        const __m256 h8 = _mm256_add_ps(avx512::half<0>(acc[r][j]), avx512::half<1>(acc[r][j]));
        s[r][j] = fold8(h8);
      }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NW; ++j) {
      float v = s[r][j];
      for (index_t kk = k; kk < K; ++kk) v = std::fma(x[r][kk], w[j * ldw + kk], v);
      out[r * ldo + j] = v;
    }
}

/// dot_block_plain's sums (fused) with lanes 0-7 and 8-15 in two AVX2 registers.
template <int NR, int NW>
LRT_TARGET_AVX2 inline void dot_block_avx2(index_t K, const float* const* x, const float* __restrict w, index_t ldw,
                                           float* out, index_t ldo, const float* ahead) noexcept {
  constexpr int L = gemv_lanes;
  index_t k = 0;
  __m256 lo[NR][NW], hi[NR][NW];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NW; ++j) lo[r][j] = _mm256_setzero_ps(), hi[r][j] = _mm256_setzero_ps();
  for (; k + L <= K; k += L) {
    __m256 wl[NW], wh[NW];
    if (ahead)
      for (int j = 0; j < NW; ++j) _mm_prefetch(reinterpret_cast<const char*>(ahead + j * ldw + k), _MM_HINT_T0);
    for (int j = 0; j < NW; ++j) {
      wl[j] = _mm256_loadu_ps(w + j * ldw + k), wh[j] = _mm256_loadu_ps(w + j * ldw + k + 8);
      in_register(wl[j]), in_register(wh[j]);
    }
    for (int r = 0; r < NR; ++r) {
      const __m256 xl = _mm256_loadu_ps(x[r] + k), xh = _mm256_loadu_ps(x[r] + k + 8);
      for (int j = 0; j < NW; ++j)
        lo[r][j] = _mm256_fmadd_ps(xl, wl[j], lo[r][j]), hi[r][j] = _mm256_fmadd_ps(xh, wh[j], hi[r][j]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NW; ++j) {
      float v = fold8(_mm256_add_ps(lo[r][j], hi[r][j]));
      for (index_t kk = k; kk < K; ++kk) v = std::fma(x[r][kk], w[j * ldw + kk], v);
      out[r * ldo + j] = v;
    }
}
#endif  // LRT_X86_KERNELS

/// The paths of the row-wise products: each one's block sizes (rows of x and of w per block;
/// rows of w per block for the rows of x left over, one at a time) and its dot_block. Measured
/// best on the reference machine (GFLOP/s of 256 x 256, hot): AVX-512 4 x 4 and 1 x 16 (110 at 16
/// rows, 45 at one); AVX2 2 x 2 and 1 x 1 (54, 36; 1 x 4 gave 29); the plain loop 1 x 1 (23, 23:
/// its blocks spill the 16 SSE registers, 2 x 2 gave 13). Other element types than float take
/// the plain loop on every path.
struct RowwisePlain {
  static constexpr int block_x = 1, block_w = 1, block_w1 = 1;
  template <int NR, int NW, class T>
  static void dot(index_t K, const T* const* x, const T* w, index_t ldw, T* out, index_t ldo, const T*) noexcept {
    dot_block_plain<NR, NW>(K, x, w, ldw, out, ldo);
  }
};
#if LRT_X86_KERNELS
struct RowwiseAvx2 {
  static constexpr int block_x = 2, block_w = 2, block_w1 = 1;
  template <int NR, int NW, class T>
  static void dot(index_t K, const T* const* x, const T* w, index_t ldw, T* out, index_t ldo, const T* ahead) noexcept {
    if constexpr (std::is_same_v<T, float>)
      dot_block_avx2<NR, NW>(K, x, w, ldw, out, ldo, ahead);
    else
      dot_block_plain<NR, NW>(K, x, w, ldw, out, ldo);
  }
};
struct RowwiseAvx512 {
  static constexpr int block_x = 4, block_w = 4, block_w1 = 16;
  template <int NR, int NW, class T>
  static void dot(index_t K, const T* const* x, const T* w, index_t ldw, T* out, index_t ldo, const T* ahead) noexcept {
    if constexpr (std::is_same_v<T, float>)
      dot_block_avx512<NR, NW>(K, x, w, ldw, out, ldo, ahead);
    else
      dot_block_plain<NR, NW>(K, x, w, ldw, out, ldo);
  }
};
#endif

/// The process's path, SimdLevel as an int (-1: not chosen yet).
LRT_API inline std::atomic<int>& rowwise_level_slot() noexcept {
  static std::atomic<int> slot{-1};
  return slot;
}

/// The path of this process's row-wise products: SimdLevel::avx512 or avx2 (lrt's intrinsics, where
/// the CPU has them), else SimdLevel::none (the plain loop, vectorised for the build's instruction
/// set). Chosen at the first call from the CPU (cpuid).
inline SimdLevel rowwise_level() noexcept {
  int v = rowwise_level_slot().load(std::memory_order_relaxed);
  if (v < 0) {
#if LRT_X86_KERNELS
    const SimdLevel cpu = cpu_simd_level();
    v = int(cpu >= SimdLevel::avx512 ? SimdLevel::avx512 : cpu >= SimdLevel::avx2 ? SimdLevel::avx2 : SimdLevel::none);
#else
    v = int(SimdLevel::none);
#endif
    rowwise_level_slot().store(v, std::memory_order_relaxed);
  }
  return SimdLevel(v);
}

/// For tests and benchmarks: the row-wise products take `level`'s path from now on (a path the
/// CPU lacks, or that is not compiled in, gives the plain loop). Returns the path taken. Not while
/// products run on other threads.
inline SimdLevel set_rowwise_level(SimdLevel level) noexcept {
  SimdLevel v = SimdLevel::none;
#if LRT_X86_KERNELS
  if ((level == SimdLevel::avx512 || level == SimdLevel::avx2) && cpu_simd_level() >= level) v = level;
#endif
  (void)level;
  rowwise_level_slot().store(int(v), std::memory_order_relaxed);
  return v;
}

/// Whether the float products of this process fuse each lane's multiply-add (the intrinsics paths
/// do; the plain loop where gemv_fused).
inline bool rowwise_fused() noexcept { return rowwise_level() != SimdLevel::none || gemv_fused; }

/// Calls f(Path{}) with the path of this process (RowwisePlain, RowwiseAvx2, RowwiseAvx512).
template <class F>
inline decltype(auto) with_rowwise_path(F&& f) {
#if LRT_X86_KERNELS
  switch (rowwise_level()) {
    case SimdLevel::avx512:
      return f(RowwiseAvx512{});
    case SimdLevel::avx2:
      return f(RowwiseAvx2{});
    default:
      break;
  }
#endif
  return f(RowwisePlain{});
}

/// Path::dot for nr <= NR rows of x and nw <= NW rows of w.
template <class Path, int NR, int NW, class T>
inline void dot_block_upto(int nr, int nw, index_t K, const T* const* x, const T* w, index_t ldw, T* out, index_t ldo,
                           const T* ahead) noexcept {
  if constexpr (NR > 1)
    if (nr < NR) return dot_block_upto<Path, NR - 1, NW>(nr, nw, K, x, w, ldw, out, ldo, ahead);
  if constexpr (NW > 1)
    if (nw < NW) return dot_block_upto<Path, NR, NW - 1>(nr, nw, K, x, w, ldw, out, ldo, ahead);
  Path::template dot<NR, NW, T>(K, x, w, ldw, out, ldo, ahead);
}

/// sum_k x[k] w[k] in gemv_lanes interleaved partial sums, folded pairwise (a fixed order; see
/// dot_block_plain), on this process's path.
template <class T>
inline T dot_lanes(index_t K, const T* x, const T* w) noexcept {
  T s;
  with_rowwise_path([&](auto path) { decltype(path)::template dot<1, 1, T>(K, &x, w, 0, &s, 1, nullptr); });
  return s;
}

/// Weight rows per cache block of gemv_rows on Path: about 32 KiB of them, a multiple of its block.
template <class Path, class T>
inline index_t gemv_rows_block_on(index_t K) noexcept {
  const index_t n = index_t{32768} / static_cast<index_t>(sizeof(T)) / std::max<index_t>(K, 1);
  return std::max<index_t>(Path::block_w, n / Path::block_w * Path::block_w);
}

/// gemv_rows_block_on on this process's path.
template <class T>
inline index_t gemv_rows_block(index_t K) noexcept {
  return with_rowwise_path([&](auto path) { return gemv_rows_block_on<decltype(path), T>(K); });
}

/// One pass of gemv_rows: NRb rows of x (xs, rows r0.. of C) against weight rows b0..b1, NWb at a
/// time; `first`: these weights come from memory (ask for the next rows ahead).
template <class Path, int NRb, int NWb, class T>
inline void gemv_pass(const T* const* xs, index_t r0, index_t b0, index_t b1, index_t n1, index_t K, T alpha,
                      const T* w, index_t ldw, T beta, T* C, index_t ldc, bool first) noexcept {
  T tmp[NRb * NWb];
  const bool direct = alpha == T(1) && beta == T(0);  // C = the dots: written by the block itself
  for (index_t n = b0; n < b1; n += NWb) {
    const int nw = static_cast<int>(std::min<index_t>(NWb, b1 - n));
    const T* ahead = first && n + 2 * NWb <= n1 ? w + (n + NWb) * ldw : nullptr;
    if (direct) {
      dot_block_upto<Path, NRb, NWb>(NRb, nw, K, xs, w + n * ldw, ldw, C + r0 * ldc + n, ldc, ahead);
      continue;
    }
    dot_block_upto<Path, NRb, NWb>(NRb, nw, K, xs, w + n * ldw, ldw, tmp, NWb, ahead);
    for (int i = 0; i < NRb; ++i)
      for (int j = 0; j < nw; ++j) {
        T& c = C[(r0 + i) * ldc + n + j];
        const T s = alpha * tmp[i * NWb + j];
        c = beta == T(0) ? s : s + beta * c;
      }
  }
}

/// gemv_rows on Path.
template <class Path, class T>
void gemv_rows_on(index_t R, index_t n0, index_t n1, index_t K, T alpha, const T* x, index_t ldx, const T* w,
                  index_t ldw, T beta, T* C, index_t ldc) noexcept {
  constexpr int NR = Path::block_x, NW = Path::block_w, NW1 = Path::block_w1;
  const index_t nb = gemv_rows_block_on<Path, T>(K);
  for (index_t b0 = n0; b0 < n1; b0 += nb) {
    const index_t b1 = std::min(n1, b0 + nb);
    index_t r0 = 0;
    for (; r0 + NR <= R; r0 += NR) {
      const T* xs[NR];
      for (int i = 0; i < NR; ++i) xs[i] = x + (r0 + i) * ldx;
      gemv_pass<Path, NR, NW>(xs, r0, b0, b1, n1, K, alpha, w, ldw, beta, C, ldc, r0 == 0);
    }
    for (; r0 < R; ++r0) {
      const T* xr = x + r0 * ldx;
      gemv_pass<Path, 1, NW1>(&xr, r0, b0, b1, n1, K, alpha, w, ldw, beta, C, ldc, r0 == 0);
    }
  }
}

/// C (R, N) = alpha x (R, K) w^T + beta C for w (N, K) (row stride ldw), weight rows n0..n1 only:
/// every C[r, n] is alpha * dot_lanes(x[r], w[n]) (+ beta C[r, n]), so a row's results are those of
/// that row alone, whatever R. The weights are read once for all rows: a cache block of
/// gemv_rows_block rows of w at a time, against the path's block of rows of x at a time, then
/// against each row left over.
template <class T>
void gemv_rows(index_t R, index_t n0, index_t n1, index_t K, T alpha, const T* x, index_t ldx, const T* w, index_t ldw,
               T beta, T* C, index_t ldc) noexcept {
  with_rowwise_path(
      [&](auto path) { gemv_rows_on<decltype(path)>(R, n0, n1, K, alpha, x, ldx, w, ldw, beta, C, ldc); });
}

}  // namespace cpu::detail
}  // namespace v0
}  // namespace lrt
