// lrt/model/training_schedules/subsets.hpp: the interleaved position subsets (spec §4.2), the one
// rule that Interleaved<S> training (interleaved.hpp) and interleaved prefill in both decoders
// (decode/decoder.hpp through interleaved_prefill, decode/lean.hpp directly) read. No tensors, no
// allocation: the lean decoder uses it in its own buffers.
#pragma once

#include <algorithm>

#include "../../core/config.hpp"

namespace lrt {
inline namespace v0 {

/// The number of interleaved subsets of P positions for S refinement passes: min(S, P), so that
/// none is empty ([O] spec §4.2).
constexpr index_t interleaved_subset_count(index_t P, index_t S) noexcept {
  return std::max<index_t>(0, std::min(S, P));
}
/// Subset i of P positions in n = interleaved_subset_count(P, S) subsets: the positions p with
/// p mod n == i, ascending, written to out (room for ceil(P / n)); returns how many.
inline index_t interleaved_subset(index_t P, index_t S, index_t i, index_t* out) noexcept {
  const index_t n = interleaved_subset_count(P, S);
  index_t m = 0;
  for (index_t p = i; n > 0 && p < P; p += n) out[m++] = p;
  return m;
}

}  // namespace v0
}  // namespace lrt
