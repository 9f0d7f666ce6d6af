// lrt/backend/cuda/gemm.cuh: GemmBackend<cuda::Device> through cuBLAS (float and double).
// cuBLAS is column-major: a row-major C (M, N) is a column-major C^T (N, M), and
// C^T = op(B)^T op(A)^T, so every call passes (N, M, K) and B before A; a MatRef that is
// read transposed maps to CUBLAS_OP_T. One handle per process, bound to lrt's stream, in
// cuBLAS's default math mode (full FP32: no TF32 unless the user opts in through cuBLAS).
// K == 0 is handled here (C = beta * C, or 0 when beta == 0) without calling cuBLAS.
#pragma once

#include <climits>
#include <type_traits>

#include "../../tensor/linalg.hpp"
#include "device.cuh"
#include "executor.cuh"
#include "launch.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda {

/// The cuBLAS handle lrt uses (created at first call on lrt's stream, never destroyed).
inline cublasHandle_t cublas_handle() {
  static const cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    LRT_CUBLAS_CHECK(cublasCreate(&x));
    LRT_CUBLAS_CHECK(cublasSetStream(x, stream()));
    LRT_CUBLAS_CHECK(cublasSetPointerMode(x, CUBLAS_POINTER_MODE_HOST));
    return x;
  }();
  return h;
}

namespace detail {

/// C[b] = beta * C[b] (0 when beta == 0, whatever C held) for b < batch: GEMM with K == 0.
template <class T>
__global__ void __launch_bounds__(assign_threads)
    scale_matrices_kernel(index_t batch, index_t M, index_t N, T beta, T* C, index_t ldc,
                          index_t sc) {
  const index_t n = batch * M * N, step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    const index_t b = i / (M * N), r = (i / N) % M, c = i % N;
    T& x = C[b * sc + r * ldc + c];
    x = beta == T(0) ? T(0) : beta * x;
  }
}

inline int blas_int(index_t v, const char* what) {
  check(v >= 0 && v <= INT_MAX, "gemm", what, " = ", v, " does not fit cuBLAS's int arguments");
  return static_cast<int>(v);
}

}  // namespace detail
}  // namespace cuda

template <>
struct GemmBackend<cuda::Device> {
  /// C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i < batch (see linalg.hpp).
  template <class T>
  static void run(index_t batch, index_t M, index_t N, index_t K, T alpha, MatRef<T> a,
                  index_t sa, MatRef<T> b, index_t sb, T beta, T* C, index_t ldc, index_t sc) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "GEMM on lrt::cuda::Device supports float and double (cuBLAS S/D gemm)");
    if (batch <= 0 || M <= 0 || N <= 0) return;
    if (K == 0) {
      const index_t n = batch * M * N;
      constexpr int threads = cuda::detail::assign_threads;
      cuda::detail::launch(cuda::detail::scale_matrices_kernel<T>,
                           cuda::detail::grid_for(n, threads), threads, 0,
                           "gemm (K = 0) kernel launch", batch, M, N, beta, C, ldc, sc);
      return;
    }
    using cuda::detail::blas_int;
    const int m = blas_int(M, "M"), n = blas_int(N, "N"), k = blas_int(K, "K");
    const int lda = blas_int(a.ld, "lda"), ldb = blas_int(b.ld, "ldb"), ldc_ = blas_int(ldc, "ldc");
    const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasHandle_t h = cuda::cublas_handle();
    if (batch == 1) {
      if constexpr (std::is_same_v<T, float>) {
        LRT_CUBLAS_CHECK(cublasSgemm(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, a.p, lda, &beta, C,
                                     ldc_));
      } else {
        LRT_CUBLAS_CHECK(cublasDgemm(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, a.p, lda, &beta, C,
                                     ldc_));
      }
      return;
    }
    const int nb = blas_int(batch, "batch");
    const long long sa_ = sa, sb_ = sb, sc_ = sc;
    if constexpr (std::is_same_v<T, float>) {
      LRT_CUBLAS_CHECK(cublasSgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, sb_,
                                                 a.p, lda, sa_, &beta, C, ldc_, sc_, nb));
    } else {
      LRT_CUBLAS_CHECK(cublasDgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, sb_,
                                                 a.p, lda, sa_, &beta, C, ldc_, sc_, nb));
    }
  }
};

}  // namespace v0
}  // namespace lrt
