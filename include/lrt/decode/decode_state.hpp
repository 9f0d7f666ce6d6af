// lrt/decode/decode_state.hpp: the bookkeeping both decoders share (Decoder, decode/decoder.hpp;
// LeanDecoder, decode/lean.hpp), written once and free of the tensor and autodiff layers:
//   KvWindow            where layer l keeps its keys: window(l) + 1 of them in 2 (window(l) + 1)
//                       slots (or the capacity), the newest window moved to the front when the
//                       buffer is full, so rows run past the training context;
//   KvWindow::slide, KvWindow::load  the copies into a row's buffer: a step's, a whole prompt's;
//   ring_read_slot/ring_write_slot/ring_load   the memory ring: the last k source states, position t in
//                       slot t % k, read k positions later (the BOS cut is reads_state,
//                       model/training_schedules/pass_plan.hpp);
//   fixed_point_frontier  how far fixed-point and approximate prefill know the exact states;
//   prompt_status, step_status  the checks of a prompt and of a step's token, one wording for
//                       both decoders.
// The interleaved subsets, the memory's BOS cut and the pass loop are the training schedules'
// (model/training_schedules/pass_plan.hpp): one definition for training and both prefills.
// What one decoder has and the other lacks is named in each one's header.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "../core/status.hpp"
#include "../model/config.hpp"
#include "../model/training_schedules/pass_plan.hpp"
#include "prefill_mode.hpp"

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

  // The two copies into a row's buffer, written once for both decoders (each passes its own copy:
  // tensor slices, memmove):
  /// Before position t's key is written: when the base advances, positions base(t)..t-1 move from
  /// slots shift(t).. to 0.. (disjoint: shift(t) > keys - 1): move(from_slot, count).
  template <class Move>
  void slide(index_t t, Move&& move) const {
    if (const index_t s = shift(t)) move(s, t - base(t));
  }
  /// A row loaded with positions 0..n-1 at once (a prefill's buffers, saved states): positions
  /// base(n-1)..n-1, what a step at n - 1 leaves, go to slots 0..: copy(first_position, count).
  template <class Copy>
  void load(index_t n, Copy&& copy) const {
    const index_t lo = base(n - 1);
    copy(lo, n - lo);
  }
};

/// The memory ring's slot of the state position t reads (s_{t-k}; 0 before k, where none is read).
constexpr index_t ring_read_slot(index_t k, index_t t) noexcept { return t >= k ? (t - k) % k : 0; }
/// The slot position t's state and token go to.
constexpr index_t ring_write_slot(index_t k, index_t t) noexcept { return t % k; }
/// A ring loaded with positions 0..n-1 at once: the last k of them, put(position, slot).
template <class Put>
void ring_load(index_t k, index_t n, Put&& put) {
  for (index_t p = std::max<index_t>(0, n - k); p < n; ++p) put(p, ring_write_slot(k, p));
}

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

/// The checks of a prompt a decoder (`who`: "decoder", "lean decoder") feeds the way `mode` says,
/// written once for both: not empty, at most `capacity` tokens (0: no limit), a valid mode
/// parameter, token ids in the vocabulary, and with attention sinks a whole-prompt mode only on
/// prompts of at most the shortest window + 1 tokens (its passes attend without sinks). row >= 0
/// names the row ("the prompt of row 1"). The lean decoder's workspace check is its own.
inline Status prompt_status(const char* who, const ModelConfig& c, std::span<const index_t> prompt,
                            const PrefillMode& mode, index_t capacity, index_t sinks = 0, index_t row = -1) {
  const index_t P = static_cast<index_t>(prompt.size());
  using K = PrefillMode::Kind;
  const auto fail = [&](const auto&... parts) {
    return row < 0 ? Status::error(StatusCode::invalid_argument, who, "the prompt", parts...)
                   : Status::error(StatusCode::invalid_argument, who, "the prompt of row ", row, parts...);
  };
  if (P < 1) return fail(" is empty");
  if (capacity > 0 && P > capacity) return fail(" has ", P, " tokens, more than the capacity ", capacity);
  if (mode.kind == K::Interleaved && mode.passes < 1)
    return Status::error(StatusCode::invalid_argument, who, "interleaved prefill needs S >= 1 refinement passes, got ",
                         mode.passes);
  if (mode.kind == K::Approximate && !(std::isfinite(mode.tolerance) && mode.tolerance > 0))
    return Status::error(StatusCode::invalid_argument, who, "approximate prefill needs a tolerance > 0, got ",
                         mode.tolerance);
  if (sinks > 0 && mode.kind != K::Exact) {
    index_t shortest = c.window(0);
    for (index_t l = 1; l < c.n_layer; ++l) shortest = std::min(shortest, c.window(l));
    if (P > shortest + 1)
      return fail(" has ", P, " tokens: with attention sinks a ", mode.name(),
                  " prefill takes at most the shortest window + 1 = ", shortest + 1, " (use exact prefill)");
  }
  for (index_t tok : prompt)
    if (tok < 0 || tok >= c.vocab_size)
      return Status::error(StatusCode::invalid_argument, who, "token id ", tok, " outside the vocabulary [0, ",
                           c.vocab_size, ")");
  return {};
}

/// The checks of token `tok` fed to row `row` at position t, both decoders': an id in the
/// vocabulary, a position below the capacity (0: no limit) and below 2^40.
inline Status step_status(const char* who, const ModelConfig& c, index_t row, index_t t, index_t tok,
                          index_t capacity) {
  if (tok < 0 || tok >= c.vocab_size)
    return Status::error(StatusCode::invalid_argument, who, "token id ", tok, " outside the vocabulary [0, ",
                         c.vocab_size, ")");
  if (capacity > 0 && t >= capacity)
    return Status::error(StatusCode::state, who, "context full: position ", t, " of row ", row,
                         " is past the capacity ", capacity, " (capacity 0: no limit)");
  if (t >= (index_t{1} << 40))
    return Status::error(StatusCode::state, who, "position ", t, " of row ", row, " is past 2^40");
  return {};
}

}  // namespace v0
}  // namespace lrt
