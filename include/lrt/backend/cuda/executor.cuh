// lrt/backend/cuda/executor.cuh: Executor<cuda::Device> runs an expression's evaluator over the
// destination in one grid-stride kernel on lrt's stream. The evaluators are the very structs
// the CPU loop uses (LRT_HD, trivially copyable), passed to the kernel by value.
// The launch is checked; the kernel itself runs asynchronously (errors surface at the next
// synchronising call: a copy to the host, lrt::cuda::synchronize()).
#pragma once

#include <algorithm>
#include <type_traits>

#include "../../core/device.hpp"
#include "../../core/shape.hpp"
#include "device.cuh"
#include "launch.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

/// Threads per block of the elementwise kernels.
inline constexpr int assign_threads = 256;

/// Multiprocessors of the current device (asked once).
inline int sm_count() {
  static const int n = [] {
    int dev = 0, sms = 0;
    LRT_CUDA_CHECK(cudaGetDevice(&dev));
    LRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return std::max(sms, 1);
  }();
  return n;
}

/// Blocks for a grid-stride loop over n elements: enough to fill the GPU, no more.
inline unsigned grid_for(index_t n, int threads) {
  const index_t want = (n + threads - 1) / threads;
  const index_t cap = index_t{sm_count()} * 32;
  return static_cast<unsigned>(std::max<index_t>(1, std::min(want, cap)));
}

/// d.lin(i) = s.lin(i) for i < n (both sides addressable by a flat row-major index).
template <class DstEv, class SrcEv>
__global__ void __launch_bounds__(assign_threads) assign_linear_kernel(index_t n, DstEv d, SrcEv s) {
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) d.lin(i) = s.lin(i);
}

/// d.at(idx) = s.at(idx) for every multi-index idx of shape (row-major position i < n).
template <int R, class DstEv, class SrcEv>
__global__ void __launch_bounds__(assign_threads) assign_strided_kernel(Shape<R> shape, index_t n, DstEv d, SrcEv s) {
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    const Index<R> idx = unravel(i, shape);
    d.at(idx) = s.at(idx);
  }
}

}  // namespace cuda::detail

template <>
struct Executor<cuda::Device> {
  /// dst[i] = src[i] over shape; linear: both sides addressable by a flat row-major index.
  template <int R, class DstEv, class SrcEv>
  static void run(const Shape<R>& shape, const DstEv& dst, const SrcEv& src, bool linear) {
    static_assert(std::is_trivially_copyable_v<DstEv> && std::is_trivially_copyable_v<SrcEv>,
                  "evaluators are kernel arguments: they must be trivially copyable");
    const index_t n = shape.numel();
    if (n == 0) return;
    constexpr int threads = cuda::detail::assign_threads;
    const unsigned blocks = cuda::detail::grid_for(n, threads);
    if (linear) {
      cuda::detail::launch(cuda::detail::assign_linear_kernel<DstEv, SrcEv>, blocks, threads, 0,
                           "elementwise kernel launch", n, dst, src);
    } else {
      cuda::detail::launch(cuda::detail::assign_strided_kernel<R, DstEv, SrcEv>, blocks, threads, 0,
                           "elementwise (strided) kernel launch", shape, n, dst, src);
    }
  }
};

}  // namespace v0
}  // namespace lrt
