// lrt/backend/cpu/gemm.hpp: CPU GEMM through Eigen, or through OpenBLAS's cblas when lrt is
// built with LRT_USE_OPENBLAS, whichever is faster for the instruction set the code is compiled
// for: OpenBLAS for SSE/AVX2 builds, Eigen when Eigen itself vectorises with AVX-512 (a
// -march=native build on an AVX-512 machine: Eigen 124 vs OpenBLAS 93 GFLOP/s on 1024^3 on the
// reference machine, whose OpenBLAS runs its Haswell kernels). Define LRT_PREFER_OPENBLAS to keep
// OpenBLAS anyway. A single row (M = 1, decoding one token) bypasses both: gemv_row streams the
// weights once. Either library runs single-threaded: lrt's own pool splits the work (over
// batches, else over rows of C, in fixed blocks so that results do not depend on the thread
// count), so no BLAS or OpenMP pool ever runs beside it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <mutex>
#include <type_traits>

#include <Eigen/Core>

#include "../../tensor/linalg.hpp"
#include "device.hpp"
#include "rowwise.hpp"

#if defined(LRT_USE_OPENBLAS) && LRT_USE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#define LRT_HAS_OPENBLAS 1
#else
#define LRT_HAS_OPENBLAS 0
#endif

#if LRT_HAS_OPENBLAS && (!defined(EIGEN_VECTORIZE_AVX512) || defined(LRT_PREFER_OPENBLAS))
#define LRT_GEMM_OPENBLAS 1  // lrt's GEMMs run on OpenBLAS
#else
#define LRT_GEMM_OPENBLAS 0  // lrt's GEMMs run on Eigen
#endif

namespace lrt {
inline namespace v0 {
namespace cpu {

/// The library behind lrt's CPU GEMMs in this build ("OpenBLAS" or "Eigen").
inline constexpr const char* gemm_library() noexcept { return LRT_GEMM_OPENBLAS ? "OpenBLAS" : "Eigen"; }

/// Counters for profiling: while installed with set_gemm_profile, every single-threaded GEMM
/// call (each row block of a split GEMM, each gemv) adds its time and flops. For benchmarks;
/// costs two clock reads per call when installed, one atomic load when not.
struct GemmProfile {
  std::atomic<std::int64_t> ns{0}, flops{0}, calls{0};
};

namespace detail {
inline std::atomic<GemmProfile*>& gemm_profile_slot() noexcept {
  static std::atomic<GemmProfile*> slot{nullptr};
  return slot;
}
}  // namespace detail

/// Installs (or, with nullptr, removes) the GEMM profile counters; returns the previous ones.
inline GemmProfile* set_gemm_profile(GemmProfile* p) noexcept { return detail::gemm_profile_slot().exchange(p); }

}  // namespace cpu

namespace cpu::detail {

/// Once per process: make Eigen (if built with OpenMP) and OpenBLAS single-threaded.
inline void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    Eigen::setNbThreads(1);
#if LRT_HAS_OPENBLAS
    openblas_set_num_threads(1);
#endif
  });
}

/// One single-threaded GEMM through Eigen: C (M, N) = alpha * op(A) op(B) + beta * C.
template <class T>
void eigen_gemm(index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a, const MatRef<T>& b, T beta, T* C,
                index_t ldc) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using MMap = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  MMap c(C, M, N, Eigen::OuterStride<>(ldc));
  if (K == 0) {
    if (beta == T(0))
      c.setZero();
    else
      c *= beta;
    return;
  }
  auto with_a = [&](auto&& f) {
    if (a.trans)
      f(CMap(a.p, K, M, Eigen::OuterStride<>(a.ld)).transpose());
    else
      f(CMap(a.p, M, K, Eigen::OuterStride<>(a.ld)));
  };
  auto with_b = [&](const auto& am, auto&& f) {
    if (b.trans)
      f(am, CMap(b.p, N, K, Eigen::OuterStride<>(b.ld)).transpose());
    else
      f(am, CMap(b.p, K, N, Eigen::OuterStride<>(b.ld)));
  };
  with_a([&](const auto& am) {
    with_b(am, [&](const auto& x, const auto& y) {
      if (beta == T(0)) {
        c.noalias() = alpha * x * y;
      } else {
        if (beta != T(1)) c *= beta;
        c.noalias() += alpha * x * y;
      }
    });
  });
}

/// C (1, N) = alpha x (1, K) op(B) + beta C for a contiguous row x: a single row streams the
/// weights once, which is bandwidth-bound; BLAS GEMMs pack B first and reach a third of the
/// bandwidth at M = 1 (OpenBLAS 0.3.21, lrt-bench's decode rows), sgemv about two thirds.
/// op(B) = B^T (B stored (N, K), the layout of every Linear weight): one dot product per row;
/// op(B) = B (stored (K, N)): rows of B accumulated into C in order of k.
template <class T>
void gemv_row(index_t N, index_t K, T alpha, const T* x, const MatRef<T>& b, T beta, T* C) {
  if (b.trans) {
    gemv_rows(1, 0, N, K, alpha, x, K, b.p, b.ld, beta, C, N);
    return;
  }
  // C[n] = beta C[n] (0 for beta = 0), then += (alpha x[k]) B[k, n] in order of k; in chunks of
  // 64 columns held in registers across k (a full chunk's loops have constant bounds).
  constexpr index_t NC = 64;
  const auto chunk = [&](index_t n0, auto nc) {
    T acc[NC];
    for (index_t i = 0; i < nc; ++i) acc[i] = beta == T(0) ? T(0) : beta == T(1) ? C[n0 + i] : C[n0 + i] * beta;
    for (index_t k = 0; k < K; ++k) {
      const T xk = alpha * x[k];
      const T* __restrict row = b.p + k * b.ld + n0;
      for (index_t i = 0; i < nc; ++i) acc[i] += xk * row[i];
    }
    for (index_t i = 0; i < nc; ++i) C[n0 + i] = acc[i];
  };
  index_t n0 = 0;
  for (; n0 + NC <= N; n0 += NC) chunk(n0, std::integral_constant<index_t, NC>{});
  if (n0 < N) chunk(n0, N - n0);
}

/// One single-threaded GEMM on the fastest available library.
template <class T>
void gemm1_run(index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a, const MatRef<T>& b, T beta, T* C,
               index_t ldc) {
  if (M == 1 && K > 0 && !a.trans) {
    gemv_row(N, K, alpha, a.p, b, beta, C);
    return;
  }
#if LRT_GEMM_OPENBLAS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (K > 0) {
      const auto ta = a.trans ? CblasTrans : CblasNoTrans, tb = b.trans ? CblasTrans : CblasNoTrans;
      const auto m = static_cast<blasint>(M), n = static_cast<blasint>(N), k = static_cast<blasint>(K);
      if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.p, static_cast<blasint>(a.ld), b.p,
                    static_cast<blasint>(b.ld), beta, C, static_cast<blasint>(ldc));
      } else {
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.p, static_cast<blasint>(a.ld), b.p,
                    static_cast<blasint>(b.ld), beta, C, static_cast<blasint>(ldc));
      }
      return;
    }
  }
#endif
  eigen_gemm(M, N, K, alpha, a, b, beta, C, ldc);
}

/// gemm1_run, counted in the GemmProfile when one is installed.
template <class T>
void gemm1(index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a, const MatRef<T>& b, T beta, T* C,
           index_t ldc) {
  GemmProfile* prof = gemm_profile_slot().load(std::memory_order_relaxed);
  if (!prof) return gemm1_run(M, N, K, alpha, a, b, beta, C, ldc);
  const auto t0 = std::chrono::steady_clock::now();
  gemm1_run(M, N, K, alpha, a, b, beta, C, ldc);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  prof->ns.fetch_add(static_cast<std::int64_t>(ns), std::memory_order_relaxed);
  prof->flops.fetch_add(2 * std::int64_t(M) * std::int64_t(N) * std::int64_t(K), std::memory_order_relaxed);
  prof->calls.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace cpu::detail

template <>
struct GemmBackend<cpu::Device> {
  /// Below this many flops per GEMM the work stays on the calling thread.
  static constexpr double parallel_flops = 4.0e6;
  /// A GEMM with at least 2 * block_rows rows of C runs as blocks of block_rows rows, in parallel.
  /// (A single-row product, M = 1, always runs on the calling thread: splitting its columns over
  /// the pool was measured slower, 0.6 -> 1.0 ms per small-preset token: waking the second
  /// thread costs more than the ~40 us of a layer's weights.)
  static constexpr index_t block_rows = 128;

  template <class T>
  static void run(index_t batch, index_t M, index_t N, index_t K, T alpha, MatRef<T> a, index_t sa, MatRef<T> b,
                  index_t sb, T beta, T* C, index_t ldc, index_t sc) {
    cpu::detail::single_threaded_blas();
    const double flops = 2.0 * double(M) * double(N) * double(K);
    const int threads = num_threads();
    auto one = [&](index_t i) {
      const MatRef<T> ai{a.p + i * sa, a.ld, a.trans}, bi{b.p + i * sb, b.ld, b.trans};
      T* ci = C + i * sc;
      if (M < 2 * block_rows) {
        cpu::detail::gemm1(M, N, K, alpha, ai, bi, beta, ci, ldc);
        return;
      }
      // Fixed blocks of rows of C (and of op(A)), whatever the thread count: the calls, and so
      // the rounding, are the same with 1 thread or many (BLAS libraries pick kernels by size).
      const index_t blocks = (M + block_rows - 1) / block_rows;
      parallel_for(blocks, 1, [&](index_t b0, index_t b1) {
        for (index_t blk = b0; blk < b1; ++blk) {
          const index_t r0 = blk * block_rows, r1 = std::min(M, r0 + block_rows);
          const MatRef<T> ar{ai.trans ? ai.p + r0 : ai.p + r0 * ai.ld, ai.ld, ai.trans};
          cpu::detail::gemm1(r1 - r0, N, K, alpha, ar, bi, beta, ci + r0 * ldc, ldc);
        }
      });
    };
    if (batch > 1 && threads > 1 && flops * double(batch) >= parallel_flops) {
      parallel_for(batch, 1, [&](index_t b0, index_t b1) {
        for (index_t i = b0; i < b1; ++i) one(i);
      });
    } else {
      for (index_t i = 0; i < batch; ++i) one(i);
    }
  }
};

namespace cpu {

/// y (R, N) = x (R, K) w^T for a weight matrix w (N, K), row-major with row strides ldx, ldw, ldy:
/// the rows of a decode step. Every y[r, n] is the single-row product's (dot_lanes, the arithmetic
/// of lrt::gemm at M = 1), so a row's results do not depend on the other rows, on R or on the
/// thread count: decoding a row in a batch gives its bits alone (N = 1: the sum in order of k,
/// as lrt::gemm computes a one-column product). The weights are read once for all
/// R rows (blocks of gemv_rows_block rows at a time, kept in cache against every row of x); from
/// 2 rows and parallel_flops flops on, the blocks are spread over lrt's pool. Counted in the
/// GemmProfile when one is installed.
template <class T>
void rowwise_product(index_t R, index_t N, index_t K, const T* x, index_t ldx, const T* w, index_t ldw, T* y,
                     index_t ldy) {
  if (R <= 0 || N <= 0) return;
  if (N == 1) {  // lrt::gemm reads a one-column w^T as a plain column: gemv_row's sum in order of k
    for (index_t r = 0; r < R; ++r) {
      T s = T(0);
      for (index_t k = 0; k < K; ++k) s += x[r * ldx + k] * w[k];
      y[r * ldy] = s;
    }
    return;
  }
  GemmProfile* prof = detail::gemm_profile_slot().load(std::memory_order_relaxed);
  const auto t0 = prof ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const double flops = 2.0 * double(R) * double(N) * double(K);
  const index_t nb = detail::gemv_rows_block<T>(K), blocks = (N + nb - 1) / nb;
  if (R >= 2 && blocks >= 2 && num_threads() > 1 && flops >= GemmBackend<Device>::parallel_flops) {
    parallel_for(blocks, 1, [&](index_t b0, index_t b1) {
      detail::gemv_rows(R, b0 * nb, std::min(N, b1 * nb), K, T(1), x, ldx, w, ldw, T(0), y, ldy);
    });
  } else {
    detail::gemv_rows(R, 0, N, K, T(1), x, ldx, w, ldw, T(0), y, ldy);
  }
  if (prof) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    prof->ns.fetch_add(static_cast<std::int64_t>(ns), std::memory_order_relaxed);
    prof->flops.fetch_add(static_cast<std::int64_t>(flops), std::memory_order_relaxed);
    prof->calls.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace cpu

}  // namespace v0
}  // namespace lrt
