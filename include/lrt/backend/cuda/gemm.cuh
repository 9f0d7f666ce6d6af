// lrt/backend/cuda/gemm.cuh: GemmBackend<cuda::Device> through cuBLAS (float and double).
// cuBLAS is column-major: a row-major C (M, N) is a column-major C^T (N, M), and
// C^T = op(B)^T op(A)^T, so every call passes (N, M, K) and B before A; a MatRef that is
// read transposed maps to CUBLAS_OP_T. One handle per process, bound to lrt's stream, in
// cuBLAS's default math mode. K == 0 is handled here (C = beta * C, or 0 when beta == 0) without
// calling cuBLAS.
//
// Precision of float GEMMs (process-wide, set_matmul_precision / MatmulPrecisionScope):
//   fp32 (default)  cublasSgemm: full FP32
//   tf32            cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to TF32
//   bf16            cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_16BF: inputs rounded to bfloat16 on the
//                   tensor cores, FP32 accumulation and output
// Tensors, master weights, optimizer state and every other kernel stay float32 in all three
// ("bf16 matmuls with fp32 master weights"); the setting covers every float GEMM, the model's and
// Muon's. cuBLAS is allowed, not required, to down-convert, so a result may be more exact than
// the mode says. Double GEMMs are always FP64.
#pragma once

#include <atomic>
#include <climits>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include "../../tensor/linalg.hpp"
#include "device.cuh"
#include "executor.cuh"
#include "launch.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda {

/// How float GEMMs run on the GPU (see the top of this file).
enum class MatmulPrecision { fp32, tf32, bf16 };

namespace detail {
inline std::atomic<MatmulPrecision>& matmul_precision_slot() {
  static std::atomic<MatmulPrecision> p{MatmulPrecision::fp32};
  return p;
}
}  // namespace detail

/// The precision of float GEMMs from now on, for the whole process (all threads).
inline void set_matmul_precision(MatmulPrecision p) { detail::matmul_precision_slot().store(p); }
/// The current precision of float GEMMs (fp32 unless set).
inline MatmulPrecision matmul_precision() { return detail::matmul_precision_slot().load(); }

/// "fp32", "tf32" or "bf16".
inline const char* to_string(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::fp32:
      return "fp32";
    case MatmulPrecision::tf32:
      return "tf32";
    case MatmulPrecision::bf16:
      return "bf16";
  }
  return "?";
}

/// Parses "fp32", "tf32" or "bf16"; anything else is an lrt::Error naming the choices.
inline MatmulPrecision parse_matmul_precision(std::string_view s) {
  if (s == "fp32") return MatmulPrecision::fp32;
  if (s == "tf32") return MatmulPrecision::tf32;
  if (s == "bf16") return MatmulPrecision::bf16;
  ::lrt::throw_error("cuda", "unknown matmul precision '" + std::string(s) + "' (expected fp32, tf32 or bf16)");
}

/// Sets the float GEMM precision for its lifetime and restores the previous one after.
using MatmulPrecisionScope = detail::SettingScope<MatmulPrecision, &detail::matmul_precision_slot>;

/// Bytes of the workspace lrt gives cuBLAS (so that GEMMs captured into a graph allocate nothing).
inline constexpr std::size_t cublas_workspace_bytes = std::size_t{32} << 20;

/// The cuBLAS handle lrt uses (created at first call on lrt's stream with its own workspace,
/// never destroyed).
inline cublasHandle_t cublas_handle() {
  static const cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    LRT_CUBLAS_CHECK(cublasCreate(&x));
    LRT_CUBLAS_CHECK(cublasSetStream(x, stream()));  // before the workspace: setting a stream resets it
    void* ws = nullptr;
    LRT_CUDA_CHECK(cudaMalloc(&ws, cublas_workspace_bytes));
    LRT_CUBLAS_CHECK(cublasSetWorkspace(x, ws, cublas_workspace_bytes));
    LRT_CUBLAS_CHECK(cublasSetPointerMode(x, CUBLAS_POINTER_MODE_HOST));
    return x;
  }();
  return h;
}

namespace detail {

/// C[b] = beta * C[b] (0 when beta == 0, whatever C held) for b < batch: GEMM with K == 0.
template <class T>
__global__ void __launch_bounds__(assign_threads)
    scale_matrices_kernel(index_t batch, index_t M, index_t N, T beta, T* C, index_t ldc, index_t sc) {
  const index_t n = batch * M * N, step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    const index_t b = i / (M * N), r = (i / N) % M, c = i % N;
    T& x = C[b * sc + r * ldc + c];
    x = beta == T(0) ? T(0) : beta * x;
  }
}

/// The profiler's row name of a GEMM: "gemm bf16 8192x768x768" (M x N x K), "gemm fp32
/// 12x2048x2048x64" when batched.
inline std::string gemm_profile_name(const char* precision, index_t batch, index_t M, index_t N, index_t K) {
  std::string s = std::string("gemm ") + precision + " ";
  if (batch != 1) s += std::to_string(batch) + "x";
  return s + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
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
  static void run(index_t batch, index_t M, index_t N, index_t K, T alpha, MatRef<T> a, index_t sa, MatRef<T> b,
                  index_t sb, T beta, T* C, index_t ldc, index_t sc) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "GEMM on lrt::cuda::Device supports float and double (cuBLAS S/D gemm)");
    if (batch <= 0 || M <= 0 || N <= 0) return;
    if (K == 0) {
      const index_t n = batch * M * N;
      constexpr int threads = cuda::detail::assign_threads;
      cuda::detail::launch(cuda::detail::scale_matrices_kernel<T>, cuda::detail::grid_for(n, threads), threads, 0,
                           "gemm (K = 0) kernel launch", batch, M, N, beta, C, ldc, sc);
      return;
    }
    using cuda::detail::blas_int;
    const int m = blas_int(M, "M"), n = blas_int(N, "N"), k = blas_int(K, "K");
    const int lda = blas_int(a.ld, "lda"), ldb = blas_int(b.ld, "ldb"), ldc_ = blas_int(ldc, "ldc");
    const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasHandle_t h = cuda::cublas_handle();
    cuda::detail::ProfileMark mark(cuda::stream());
    auto profiled = [&](const char* precision) {
      if (mark.recording())
        mark.done(cuda::detail::gemm_profile_name(precision, batch, M, N, K),
                  2.0 * double(batch) * double(M) * double(N) * double(K));
    };
    if constexpr (std::is_same_v<T, float>) {
      const cuda::MatmulPrecision prec = cuda::matmul_precision();
      if (prec != cuda::MatmulPrecision::fp32) {
        const cublasComputeType_t ct =
            prec == cuda::MatmulPrecision::bf16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_TF32;
        if (batch == 1) {
          LRT_CUBLAS_CHECK(cublasGemmEx(h, op_b, op_a, n, m, k, &alpha, b.p, CUDA_R_32F, ldb, a.p, CUDA_R_32F, lda,
                                        &beta, C, CUDA_R_32F, ldc_, ct, CUBLAS_GEMM_DEFAULT));
        } else {
          LRT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
              h, op_b, op_a, n, m, k, &alpha, b.p, CUDA_R_32F, ldb, static_cast<long long>(sb), a.p, CUDA_R_32F, lda,
              static_cast<long long>(sa), &beta, C, CUDA_R_32F, ldc_, static_cast<long long>(sc),
              blas_int(batch, "batch"), ct, CUBLAS_GEMM_DEFAULT));
        }
        profiled(cuda::to_string(prec));
        return;
      }
    }
    if (batch == 1) {
      if constexpr (std::is_same_v<T, float>) {
        LRT_CUBLAS_CHECK(cublasSgemm(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, a.p, lda, &beta, C, ldc_));
      } else {
        LRT_CUBLAS_CHECK(cublasDgemm(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, a.p, lda, &beta, C, ldc_));
      }
      profiled(std::is_same_v<T, float> ? "fp32" : "fp64");
      return;
    }
    const int nb = blas_int(batch, "batch");
    const long long sa_ = sa, sb_ = sb, sc_ = sc;
    if constexpr (std::is_same_v<T, float>) {
      LRT_CUBLAS_CHECK(cublasSgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, sb_, a.p, lda, sa_, &beta, C,
                                                 ldc_, sc_, nb));
    } else {
      LRT_CUBLAS_CHECK(cublasDgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha, b.p, ldb, sb_, a.p, lda, sa_, &beta, C,
                                                 ldc_, sc_, nb));
    }
    profiled(std::is_same_v<T, float> ? "fp32" : "fp64");
  }
};

}  // namespace v0
}  // namespace lrt
