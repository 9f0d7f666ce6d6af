// lrt/backend/cpu/gemm.hpp: CPU GEMM through Eigen, or through OpenBLAS's cblas when lrt is
// built with LRT_USE_OPENBLAS (measured faster on the reference machine; see README). Either
// library runs single-threaded: lrt's own pool splits the work (over batches, else over rows
// of C, in fixed blocks so that results do not depend on the thread count), so no BLAS or
// OpenMP pool ever runs beside it.
#pragma once

#include <mutex>

#include <Eigen/Core>

#include "../../tensor/linalg.hpp"
#include "device.hpp"

#if defined(LRT_USE_OPENBLAS) && LRT_USE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#define LRT_HAS_OPENBLAS 1
#else
#define LRT_HAS_OPENBLAS 0
#endif

namespace lrt {
inline namespace v0 {
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
void eigen_gemm(index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a, const MatRef<T>& b,
                T beta, T* C, index_t ldc) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using MMap = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  MMap c(C, M, N, Eigen::OuterStride<>(ldc));
  if (K == 0) {
    if (beta == T(0)) c.setZero(); else c *= beta;
    return;
  }
  auto with_a = [&](auto&& f) {
    if (a.trans) f(CMap(a.p, K, M, Eigen::OuterStride<>(a.ld)).transpose());
    else f(CMap(a.p, M, K, Eigen::OuterStride<>(a.ld)));
  };
  auto with_b = [&](const auto& am, auto&& f) {
    if (b.trans) f(am, CMap(b.p, N, K, Eigen::OuterStride<>(b.ld)).transpose());
    else f(am, CMap(b.p, K, N, Eigen::OuterStride<>(b.ld)));
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

/// One single-threaded GEMM on the fastest available library.
template <class T>
void gemm1(index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a, const MatRef<T>& b,
           T beta, T* C, index_t ldc) {
#if LRT_HAS_OPENBLAS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (K > 0) {
      const auto ta = a.trans ? CblasTrans : CblasNoTrans, tb = b.trans ? CblasTrans : CblasNoTrans;
      const auto m = static_cast<blasint>(M), n = static_cast<blasint>(N),
                 k = static_cast<blasint>(K);
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

}  // namespace cpu::detail

template <>
struct GemmBackend<cpu::Device> {
  /// Below this many flops per GEMM the work stays on the calling thread.
  static constexpr double parallel_flops = 4.0e6;
  /// A GEMM with at least 2 * block_rows rows of C runs as blocks of block_rows rows, in parallel.
  static constexpr index_t block_rows = 128;

  template <class T>
  static void run(index_t batch, index_t M, index_t N, index_t K, T alpha, MatRef<T> a,
                  index_t sa, MatRef<T> b, index_t sb, T beta, T* C, index_t ldc, index_t sc) {
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

}  // namespace v0
}  // namespace lrt
