// lrt/model/training_schedules/pass_plan.hpp: the plan of spec §4.2's passes, written once for
// every execution that runs them: Interleaved<S> and Chunked<C> training and Decoder's interleaved
// prefill (on the tape, through subset_passes in interleaved.hpp) and LeanDecoder's (directly,
// decode/lean.hpp). Three rules, no tensors and no allocation (the lean decoder runs them in its
// own buffers):
//   interleaved_subset   the position subsets p mod S == i ([O] spec §4.2: none empty);
//   reads_state / memory_source   the memory each position reads: m~_p = s_{p-k}, or none before
//                        k tokens and, with reset_at_bos, across a BOS (spec §3.1); also the
//                        decoders' memory ring and the Exact schedule;
//   run_subset_passes    the pass loop: pass 0 with zero memory, then each subset in turn.
#pragma once

#include <algorithm>
#include <span>

#include "../../core/config.hpp"
#include "../config.hpp"

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

/// The memory's BOS cut (spec §3.1): whether a row fed token `tok` at position t reads the state
/// s_{t-k} (m~_t = s_{t-k}) or none (m~_t = 0): none before k tokens (t < k), nor with
/// reset_at_bos when the config's BOS id lies in tokens t-k+1..t (`token_at(j)` gives the row's
/// token at position j, for the k - 1 positions before t; then tok).
template <class TokenAt>
bool reads_state(const ModelConfig& c, index_t t, index_t tok, TokenAt&& token_at) {
  const index_t k = c.mem_offset;
  if (t < k) return false;
  if (!c.reset_at_bos) return true;
  const index_t bos = c.bos();
  if (tok == bos) return false;
  for (index_t j = t - k + 1; j < t; ++j)
    if (token_at(j) == bos) return false;
  return true;
}
/// The position whose source state position p of a row reads (p - k), or -1 where it reads none
/// (reads_state over the row's tokens token_at(j), j <= p).
template <class TokenAt>
index_t memory_source(const ModelConfig& c, index_t p, TokenAt&& token_at) {
  return reads_state(c, p, token_at(p), token_at) ? p - c.mem_offset : -1;
}

/// The pass loop of spec §4.2 over positions `all` (0..P-1): pass 0 over all of them with zero
/// memory, then subsets 0..count-1 in turn (empty ones skipped), each pass reading the source
/// states the passes before it left (m~_p = s_{p-k}) and writing its own K/V and states back. What
/// a pass computes is the execution's:
///   pass(positions, memory)   one pass over positions (ascending); memory false: pass 0
///   after(positions, last)    after each pass; `last`: no pass follows (kv_refresh stops there)
/// subset(i) gives subset i's positions as a std::span<const index_t>.
template <class Subset, class Pass, class After>
void run_subset_passes(std::span<const index_t> all, index_t count, Subset&& subset, Pass&& pass, After&& after) {
  index_t last = count - 1;  // the last non-empty subset
  while (last >= 0 && subset(last).empty()) --last;
  pass(all, false);
  after(all, last < 0);
  for (index_t i = 0; i <= last; ++i) {
    const std::span<const index_t> P = subset(i);
    if (P.empty()) continue;
    pass(P, true);
    after(P, i == last);
  }
}

}  // namespace v0
}  // namespace lrt
