// lrt/eval/score.hpp: a model as a CORE scorer (eval/core.hpp), in two modes.
//   - parallel (zero_memory_scorer): the release's evaluation ("full-pass (zero-feedback)
//     semantics"): one forward of the rows with the memory at zero, the rows padded with BOS on
//     the right (causal attention keeps padding out of every scored position). Only the
//     positions that predict a span reach the head.
//   - sequential (sequential_scorer): the exact recurrence, as an LRT runs when deployed: the
//     decoder steps each row token by token with m_{t-1} carried (the Exact schedule's values).
//     A model without memory has one mode: its sequential scorer is the parallel one.
//
//   const lrt::eval::CoreScorer s = lrt::eval::zero_memory_scorer(model);
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../autodiff/graph.hpp"
#include "../decode/decoder.hpp"
#include "../model/gpt.hpp"
#include "../model/logits.hpp"
#include "core.hpp"

namespace lrt {
inline namespace v0 {
namespace eval {

/// Appends to o the score of one position from its capped logits x[0..vocab): the cross-entropy
/// of `target`, the argmax (the first of equals) and the top-two gap.
template <class E>
void score_position(const E* x, index_t vocab, index_t target, SpanScores& o) {
  index_t arg = 0;
  double top = -std::numeric_limits<double>::infinity(), second = top;
  for (index_t v = 0; v < vocab; ++v) {
    const double xv = static_cast<double>(x[v]);
    if (xv > top)
      second = top, top = xv, arg = v;
    else if (xv > second)
      second = xv;
  }
  double sum = 0;
  for (index_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(x[v]) - top);
  o.loss.push_back(top + std::log(sum) - static_cast<double>(x[target]));
  o.argmax.push_back(arg);
  o.gap.push_back(top - second);
}

/// Whether position p of row b predicts a token of its span. A span from position 0 (schema
/// options whose rows are all the same) scores nothing: the release's slice
/// losses[i, -1:end-1] is empty there, its mean nan.
inline bool scored(const CoreSpans& s, std::size_t b, index_t p) {
  return s.start[b] >= 1 && p >= s.start[b] - 1 && p < s.end[b] - 1;
}

/// The scores of each row's span from the capped logits `lg` (B, P, V) of positions lo..lo+P-1.
template <class E>
void span_scores_from_logits(const Tensor<E, 3>& lg, index_t lo, index_t vocab, const CoreSpans& s,
                             std::vector<SpanScores>& out) {
  out.assign(s.rows.size(), {});
  for (std::size_t b = 0; b < s.rows.size(); ++b)
    for (index_t p = std::max<index_t>(s.start[b] - 1, 0); p < s.end[b] - 1; ++p)
      if (scored(s, b, p))
        score_position(&lg(static_cast<index_t>(b), p - lo, 0), vocab, s.rows[b][static_cast<std::size_t>(p + 1)],
                       out[b]);
}

/// Scores the spans of s with one zero-memory forward of its rows (B rows of up to T tokens,
/// padded with BOS). No length limit: positions past sequence_len use the rotary table's
/// continuation and each layer's window, as the release's forward does.
template <class V, class T, Device D>
std::vector<SpanScores> score_zero_memory(const Model<V, T, D>& m, const CoreSpans& s) {
  const ModelConfig& c = m.config();
  const index_t B = static_cast<index_t>(s.rows.size());
  index_t Tt = 0, lo = std::numeric_limits<index_t>::max(), hi = 0;
  for (std::size_t b = 0; b < s.rows.size(); ++b) {
    Tt = std::max(Tt, static_cast<index_t>(s.rows[b].size()));
    lo = std::min(lo, std::max<index_t>(s.start[b] - 1, 0));
    hi = std::max(hi, s.end[b] - 1);
  }
  std::vector<SpanScores> out;
  if (hi <= lo) {
    out.assign(s.rows.size(), {});
    return out;
  }
  Tensor<index_t, 2> ids(Shape<2>{B, Tt});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < Tt; ++t) {
      const auto& r = s.rows[static_cast<std::size_t>(b)];
      const index_t id = t < static_cast<index_t>(r.size()) ? r[static_cast<std::size_t>(t)] : c.bos();
      check(id >= 0 && id < c.vocab_size, "core", "token id ", id, " outside the model's vocabulary of ", c.vocab_size);
      ids(b, t) = id;
    }
  ad::Graph g;
  ad::NoGrad ng;
  const auto& dev_ids = lrt::on_device<D>(ids);
  const auto qpos = IndexList<D>::range(0, Tt);
  const auto rope = ad::RopeTable<T, D>::make(qpos, c.head_dim(), c.rope_bf16_tables);
  const auto p = m.forward(dev_ids, rope, m.standard_attend(qpos));
  const auto z = m.head(ad::slice(p.h, 1, lo, hi));  // (B, hi - lo, Vp)
  Tensor<T, 3, D> capped(z.value().shape(), uninitialized);
  capped = capped_logits<T>(z.value(), c);
  const auto& host = lrt::on_device<cpu::Device>(capped);
  span_scores_from_logits(host, lo, c.vocab_size, s, out);
  return out;
}

/// Scores the spans of s with the exact recurrence: a decoder steps the rows together from zero
/// memory and an empty cache, token by token up to the last position any span needs (rows past
/// their end are fed BOS, which no scored position sees). No length limit.
template <class V, class T, Device D>
std::vector<SpanScores> score_sequential(const Model<V, T, D>& m, const CoreSpans& s) {
  const ModelConfig& c = m.config();
  const index_t B = static_cast<index_t>(s.rows.size());
  index_t last = 0;  // positions 0..last-1 are fed
  for (std::size_t b = 0; b < s.rows.size(); ++b) last = std::max(last, s.end[b] - 1);
  std::vector<SpanScores> out(s.rows.size());
  Decoder<V, T, D> dec(m, B);
  std::vector<index_t> tok(static_cast<std::size_t>(B));
  for (index_t t = 0; t < last; ++t) {
    for (index_t b = 0; b < B; ++b) {
      const auto& r = s.rows[static_cast<std::size_t>(b)];
      tok[static_cast<std::size_t>(b)] = t < static_cast<index_t>(r.size()) ? r[static_cast<std::size_t>(t)] : c.bos();
    }
    const auto& lg = lrt::on_device<cpu::Device>(dec.step(tok));  // (B, V) soft-capped, on the host
    for (index_t b = 0; b < B; ++b)
      if (scored(s, static_cast<std::size_t>(b), t))
        score_position(&lg(b, 0), c.vocab_size, s.rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(t + 1)],
                       out[static_cast<std::size_t>(b)]);
  }
  return out;
}

/// A CoreScorer of model m in the zero-memory mode (m must outlive it).
template <class V, class T, Device D>
CoreScorer zero_memory_scorer(const Model<V, T, D>& m) {
  return [&m](const CoreSpans& s) { return score_zero_memory(m, s); };
}

/// A CoreScorer of model m with the exact recurrence (m must outlive it); for a model without
/// memory, the zero-memory scorer (the two modes are one).
template <class V, class T, Device D>
CoreScorer sequential_scorer(const Model<V, T, D>& m) {
  if constexpr (!V::recurrent)
    return zero_memory_scorer(m);
  else
    return [&m](const CoreSpans& s) { return score_sequential(m, s); };
}

}  // namespace eval
}  // namespace v0
}  // namespace lrt
