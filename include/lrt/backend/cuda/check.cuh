// lrt/backend/cuda/check.cuh: every CUDA runtime and cuBLAS call of the backend goes through
// LRT_CUDA_CHECK / LRT_CUBLAS_CHECK, which turn a failure into lrt::Error:
//   [cuda] cudaMalloc(1048576 bytes) failed: out of memory
//   [cublas] cublasSgemm(...) failed: an invalid numeric value was used as an argument
// A failed runtime call also clears the runtime's (non-sticky) last error, so that the next
// launch check does not report it a second time. nvcc only; no fmt, no Eigen.
#pragma once

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "../../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

/// Throws lrt::Error("cuda", "<what> failed: <CUDA error string>") unless e is cudaSuccess.
inline void check_cuda(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) [[likely]]
    return;
  (void)cudaGetLastError();  // reset the non-sticky error state; sticky errors stay anyway
  ::lrt::throw_error("cuda", what + " failed: " + cudaGetErrorString(e));
}

/// Throws lrt::Error("cublas", "<what> failed: <cuBLAS status string>") unless s is success.
inline void check_cublas(cublasStatus_t s, const std::string& what) {
  if (s == CUBLAS_STATUS_SUCCESS) [[likely]]
    return;
  ::lrt::throw_error("cublas", what + " failed: " + cublasGetStatusString(s));
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt

/// Checks a CUDA runtime call; the message names the call as written.
#define LRT_CUDA_CHECK(call) ::lrt::cuda::detail::check_cuda((call), #call)
/// Checks a cuBLAS call; the message names the call as written.
#define LRT_CUBLAS_CHECK(call) ::lrt::cuda::detail::check_cublas((call), #call)
