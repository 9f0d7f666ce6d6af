// The CUDA sessions of lrt-train, lrt-eval and lrt-generate (session.hpp): compiled by nvcc from
// the registry's pair files (registry.hpp with LRT_TOOL_CUDA), or by the host compiler against the
// CUDA emulator of the tests. No fmt here (nvcc cannot take it).
#pragma once

#include <cuda_runtime.h>

#include <lrt/cuda.hpp>

#include "session.hpp"

namespace tool {

/// The GPU lrt runs on: "NAME (N GiB)".
inline std::string cuda_device_name() {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return "GPU 0";
  }
  return std::string(p.name) + " (" +
         std::to_string(static_cast<long long>(p.totalGlobalMem / (std::size_t{1} << 30))) + " GiB)";
}

/// Why --device cuda cannot run here, or "" (a GPU is visible).
inline std::string cuda_unavailable() {
  if (lrt::cuda::device_count() > 0) return "";
  return "this build has CUDA, but no GPU is visible (cudaGetDeviceCount found none: no device, no driver, or "
         "CUDA_VISIBLE_DEVICES hides them)";
}

/// A session of (V, Sched) on lrt's GPU with matmuls at `precision` (a process-wide setting).
template <class V, class Sched>
std::unique_ptr<Session> make_cuda_session(const lrt::ModelConfig& cfg, std::uint64_t seed, Precision precision) {
  const std::string why = cuda_unavailable();
  lrt::check(why.empty(), "--device cuda", why);
  lrt::cuda::set_matmul_precision(precision == Precision::bf16   ? lrt::cuda::MatmulPrecision::bf16
                                  : precision == Precision::tf32 ? lrt::cuda::MatmulPrecision::tf32
                                                                 : lrt::cuda::MatmulPrecision::fp32);
  return std::make_unique<SessionOf<V, Sched, lrt::cuda::Device>>(cfg, seed, DeviceKind::cuda, cuda_device_name());
}

/// Registers the CUDA session of a registry pair (V, Sched) at static initialisation
/// (LRT_TOOL_PAIR, registry.hpp).
template <class V, class Sched>
struct CudaRegistration {
  CudaRegistration() {
    device_registry().push_back({DeviceKind::cuda, lrt::structure_of<V>(), lrt::schedule_spec<Sched>(),
                                 &make_cuda_session<V, Sched>, &cuda_unavailable});
  }
};

}  // namespace tool
