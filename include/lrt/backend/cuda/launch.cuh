// lrt/backend/cuda/launch.cuh: the one place where the backend's kernels are launched.
//
//   cuda::detail::launch(kernel<T>, grid, block, shmem, "what kernel launch", args...);
//
// is `kernel<<<grid, block, shmem, cuda::stream()>>>(args...)` followed by the launch check
// (lrt::Error("cuda", "<what> failed: <CUDA error string>") on a bad configuration or a failed
// launch). The arguments are converted to the kernel's parameter types exactly as in a
// <<<...>>> launch. The kernel itself runs asynchronously on lrt's stream.
//
// Keeping the launch syntax here lets a host compiler take the kernels too: the CUDA emulator of
// the tests (tests/emu/fake/cuda_runtime.h, for g++ without nvcc or GPU) defines
// LRT_CUDA_EMULATOR and lrt_cuda_emu::launch, which runs the grid on the CPU.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>

#include "check.cuh"
#include "device.cuh"
#include "profile.cuh"

#if !defined(__CUDACC__) && !defined(LRT_CUDA_EMULATOR)
#error "lrt's CUDA kernels need nvcc: compile this file as CUDA (a .cu file, or LANGUAGE CUDA in CMake)"
#endif

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

/// "rmsnorm_forward kernel launch" -> "rmsnorm_forward kernel" (the profiler's row name).
inline std::string_view trim_launch(std::string_view what) {
  constexpr std::string_view tail = " launch";
  if (what.size() > tail.size() && what.ends_with(tail)) what.remove_suffix(tail.size());
  return what;
}

/// kernel<<<grid, block, shmem, cuda::stream()>>>(args...), then
/// check_cuda(cudaGetLastError(), what).
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t shmem, const char* what, A&&... args) {
  ProfileMark mark(stream());
#if defined(LRT_CUDA_EMULATOR)
  ::lrt_cuda_emu::launch(kernel, grid, block, shmem, stream(), std::forward<A>(args)...);
#else
  kernel<<<grid, block, shmem, stream()>>>(std::forward<A>(args)...);
#endif
  check_cuda(cudaGetLastError(), what);
  mark.done(trim_launch(what));
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
