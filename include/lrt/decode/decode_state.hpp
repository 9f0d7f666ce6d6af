// lrt/decode/decode_state.hpp: the bookkeeping both decoders share (Decoder, decode/decoder.hpp;
// LeanDecoder, decode/lean.hpp), written once and free of the tensor and autodiff layers:
//   KvWindow            where layer l keeps its keys: window(l) + 1 of them in 2 (window(l) + 1)
//                       slots (or the capacity), the newest window moved to the front when the
//                       buffer is full, so rows run past the training context;
//   ring_read_slot/ring_write_slot   the memory ring: the last k source states, position t in
//                       slot t % k, read k positions later (the BOS cut is reads_state,
//                       decode/prefill_mode.hpp);
//   interleaved_subset  the position subsets of interleaved prefill: the training schedule's own
//                       rule (model/training_schedules/subsets.hpp, which Interleaved<S> reads);
//   fixed_point_frontier  how far fixed-point and approximate prefill know the exact states.
// What one decoder has and the other lacks is named in each one's header.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../model/config.hpp"
#include "../model/training_schedules/subsets.hpp"

namespace lrt {
inline namespace v0 {

/// Layer l's KV cache geometry: `keys` = window(l) + 1 keys are ever read, kept in `slots` slots
/// (2 keys, or the capacity if smaller). Position p sits in slot p - base(t) while the newest
/// position is t.
struct KvWindow {
  index_t keys = 0, slots = 0;

  static KvWindow of(const ModelConfig& c, index_t l, index_t capacity) noexcept {
    const index_t W = c.window(l) + 1;
    return {W, capacity > 0 ? std::min(capacity, 2 * W) : 2 * W};
  }
  /// The position in slot 0 while the newest position is t: 0 until the buffer is full, then it
  /// advances by slots - keys + 1 at a time, so that positions t - window .. t always lie in the
  /// buffer (a capacity below 2 keys bounds t below slots, so it stays 0).
  index_t base(index_t t) const noexcept {
    const index_t u = t - keys + 1;
    if (u <= 0) return 0;
    const index_t s = slots - keys + 1;
    return u / s * s;
  }
  /// How far the buffer's content moves toward the front when the newest position becomes t:
  /// positions base(t) .. t-1 go from slots shift(t) .. to 0 .. (0: nothing moves).
  index_t shift(index_t t) const noexcept { return t > 0 ? base(t) - base(t - 1) : 0; }
};

/// The memory ring's slot of the state position t reads (s_{t-k}; 0 before k, where none is read).
constexpr index_t ring_read_slot(index_t k, index_t t) noexcept { return t >= k ? (t - k) % k : 0; }
/// The slot position t's state and token go to.
constexpr index_t ring_write_slot(index_t k, index_t t) noexcept { return t % k; }

/// Fixed-point prefill (LeanDecoder): after a pass that recomputed positions F..P-1, the states
/// `now` and those of the pass before `before` ((P, d) each, row p the state of position p) say
/// how far the exact frontier moves. A pass that leaves the states of positions < q unchanged bit
/// for bit fixes every position < q + k (their inputs no longer change); with a tolerance > 0
/// (approximate), a state that moved by at most it counts as settled. Returns the new frontier, or
/// P when no state moved (the recurrence has converged: `converged` is set).
template <class T>
index_t fixed_point_frontier(const T* now, const T* before, index_t d, index_t P, index_t F, index_t k,
                             double tolerance, bool& converged) noexcept {
  index_t q = P;
  for (index_t p = F; p < P && q == P; ++p) {
    const T* a = now + p * d;
    const T* b = before + p * d;
    if (tolerance <= 0) {
      if (std::memcmp(a, b, static_cast<std::size_t>(d) * sizeof(T)) != 0) q = p;
    } else {
      for (index_t j = 0; j < d && q == P; ++j)
        if (static_cast<double>(std::abs(a[j] - b[j])) > tolerance) q = p;
    }
  }
  converged = q == P;
  return converged ? P : q + k;
}

}  // namespace v0
}  // namespace lrt
