// lrt/backend/sampler.hpp: what a device backend needs to sample tokens on its own memory (the
// sampler itself, spec §6, is decode/sampler.hpp): the sampler's options and DeviceSampler<D>,
// the trait that lrt::sample_tokens dispatches to for a device the host cannot read. A backend
// specialises it (backend/cuda/sample.cuh for lrt::cuda::Device) with
//   template <class T> static std::vector<index_t> sample(const Tensor<T, 2, D>& logits (B, Vp),
//       index_t vocab, const SamplerOptions&, std::span<const std::uint64_t> counters (B));
// returning the B chosen ids (the only data that comes back to the host). Arguments arrive checked.
#pragma once

#include <cstdint>

#include "../core/config.hpp"

namespace lrt {
inline namespace v0 {

struct SamplerOptions {
  double temperature = 1.0;  // 0: greedy (argmax, ties to the lowest id)
  index_t top_k = 0;         // > 0: keep the k largest logits (ties at the k-th kept)
  double top_p = 1.0;        // < 1: keep the shortest most-probable prefix with mass >= p
  std::uint64_t seed = 0;
};

/// Sampling on device D's memory (see the top of this file); undefined unless a backend defines it.
template <class D>
struct DeviceSampler;

}  // namespace v0
}  // namespace lrt
