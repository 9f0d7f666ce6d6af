// lrt/eval/score.hpp: a model as a CORE scorer (eval/core.hpp), in two modes.
//   - parallel (zero_memory_scorer): the release's evaluation ("full-pass (zero-feedback)
//     semantics"): the memory at zero throughout.
//   - sequential (sequential_scorer): the exact recurrence, as an LRT runs when deployed: each
//     row token by token with m_{t-1} carried (the Exact schedule's values).
//     A model without memory has one mode: its sequential scorer is the parallel one.
// Both share the rows' common prefix (the few-shot context and the query): it is computed once,
// as one row. Parallel (score_zero_memory_shared): one zero-memory pass over the prefix, then one
// batched forward of the rows' remaining positions attending to the prefix's keys and values.
// Sequential (score_shared): a pooled decoder feeds the prefix on one row, copies its cache and
// memory to every row (Decoder::prefill_shared) and steps the rows on. The direct forms, each row
// from position 0, stay as the references the tests hold the scorers to: score_zero_memory (one
// zero-memory forward of the padded rows, the head only on the positions that predict a span) and
// score_sequential (a decoder stepping every row).
//
//   const lrt::eval::CoreScorer s = lrt::eval::zero_memory_scorer(model);
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
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

/// The tokens every row of s has in common before the first position any row scores (>= 1, the
/// BOS at least): the work a decoder does once for all the rows of an example.
inline index_t shared_prefix(const CoreSpans& s) {
  index_t n = static_cast<index_t>(s.rows[0].size());
  for (const auto& r : s.rows) {
    index_t i = 0;
    while (i < n && i < static_cast<index_t>(r.size()) &&
           r[static_cast<std::size_t>(i)] == s.rows[0][static_cast<std::size_t>(i)])
      ++i;
    n = i;
  }
  for (std::size_t b = 0; b < s.rows.size(); ++b)
    if (s.start[b] >= 1) n = std::min(n, s.start[b]);  // position start - 1 is the first one scored
  return std::max<index_t>(n, 1);
}

/// An lrt::Error unless every token of s lies in the model's vocabulary.
inline void check_tokens(const CoreSpans& s, const ModelConfig& c) {
  for (const auto& r : s.rows)
    for (index_t id : r)
      check(id >= 0 && id < c.vocab_size, "core", "token id ", id, " outside the model's vocabulary of ", c.vocab_size);
}

/// The positions fed (0..result-1): at least the shared prefix, up to the last one any span needs.
inline index_t fed_positions(const CoreSpans& s, index_t share) {
  index_t last = share;
  for (std::size_t b = 0; b < s.rows.size(); ++b) last = std::max(last, s.end[b] - 1);
  return last;
}

/// Scores the spans of s with the memory at zero, sharing the rows' common prefix: one zero-memory
/// pass over the prefix as one row (interleaved_prefill with no refinement: its keys, values and
/// last logits), then one batched forward of every row's remaining positions whose attention
/// reads the prefix's keys and values before its own (rows past their end padded with BOS). The
/// values of score_zero_memory with the prefix computed once instead of once per row.
template <class V, class T, Device D>
std::vector<SpanScores> score_zero_memory_shared(const Model<V, T, D>& m, const CoreSpans& s) {
  const ModelConfig& c = m.config();
  const index_t B = static_cast<index_t>(s.rows.size());
  check_tokens(s, c);
  const index_t share = shared_prefix(s), last = fed_positions(s, share);
  std::vector<SpanScores> out(s.rows.size());
  ad::Graph g;
  ad::NoGrad ng;
  Tensor<index_t, 2> prefix(Shape<2>{1, share});
  std::copy(s.rows[0].begin(), s.rows[0].begin() + share, prefix.data());
  const PrefillState<T, D> st = interleaved_prefill(m, lrt::on_device<D>(std::move(prefix)), 0);
  {
    const auto& lg = lrt::on_device<cpu::Device>(st.logits);  // (1, V): position share - 1, every row's
    for (std::size_t b = 0; b < s.rows.size(); ++b)
      if (scored(s, b, share - 1))
        score_position(&lg(0, 0), c.vocab_size, s.rows[b][static_cast<std::size_t>(share)], out[b]);
  }
  const index_t n = last - share;
  if (n == 0) return out;
  Tensor<index_t, 2> ids(Shape<2>{B, n});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < n; ++t) {
      const auto& r = s.rows[static_cast<std::size_t>(b)];
      const index_t p = share + t;
      ids(b, t) = p < static_cast<index_t>(r.size()) ? r[static_cast<std::size_t>(p)] : c.bos();
    }
  std::vector<ad::Var<T, 4, D>> pk, pv;  // per layer: the prefix's keys and values on every row
  for (std::size_t l = 0; l < st.k.size(); ++l) {
    const auto& k1 = st.k[l];
    Tensor<T, 4, D> k(Shape<4>{B, share, k1.shape()[2], k1.shape()[3]}, uninitialized), v(k.shape(), uninitialized);
    for (index_t b = 0; b < B; ++b) k.slice(0, b, b + 1) = k1.view(), v.slice(0, b, b + 1) = st.v[l].view();
    pk.push_back(ad::constant(std::move(k))), pv.push_back(ad::constant(std::move(v)));
  }
  const auto qpos = IndexList<D>::range(share, last);
  const auto rope = ad::RopeTable<T, D>::make(qpos, c.head_dim(), c.rope_bf16_tables);
  const typename Model<V, T, D>::Attend attend = [&](index_t l, const ad::Var<T, 4, D>& q, const ad::Var<T, 4, D>& k,
                                                     const ad::Var<T, 4, D>& v) {
    const std::size_t i = static_cast<std::size_t>(l);
    return ad::attention(q, ad::concat(pk[i], k, 1), ad::concat(pv[i], v, 1), qpos, c.window(l));
  };
  const auto p = m.forward(lrt::on_device<D>(ids), rope, attend);
  index_t first = n;  // the first remaining position any row scores: the head runs from there
  for (std::size_t b = 0; b < s.rows.size(); ++b)
    if (s.start[b] >= 1) first = std::min(first, std::max<index_t>(s.start[b] - 1 - share, 0));
  if (first == n) return out;
  const auto z = m.head(ad::slice(p.h, 1, first, n));  // (B, n - first, Vp)
  Tensor<T, 3, D> capped(z.value().shape(), uninitialized);
  capped = capped_logits<T>(z.value(), c);
  const auto& lg = lrt::on_device<cpu::Device>(capped);
  for (index_t t = first; t < n; ++t)
    for (index_t b = 0; b < B; ++b)
      if (scored(s, static_cast<std::size_t>(b), share + t))
        score_position(&lg(b, t - first, 0), c.vocab_size,
                       s.rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(share + t + 1)],
                       out[static_cast<std::size_t>(b)]);
  return out;
}

/// Scores the spans of s with a decoder of s.rows.size() rows, sharing the rows' common prefix:
/// its tokens are fed once (Decoder::prefill_shared, `mode` exact: the exact recurrence; zero: the
/// memory at zero, as score_zero_memory), then every row continues from that cache and memory,
/// stepped together up to the last position any span needs (rows past their end are fed BOS,
/// which no scored position sees). Equal to scoring each row alone to within rounding.
template <class V, class T, Device D>
std::vector<SpanScores> score_shared(Decoder<V, T, D>& dec, const CoreSpans& s, const PrefillMode& mode) {
  const ModelConfig& c = dec.model().config();
  const index_t B = static_cast<index_t>(s.rows.size());
  check(dec.batch() == B, "core", "a decoder of ", dec.batch(), " rows for an example of ", B);
  check_tokens(s, c);
  const index_t share = shared_prefix(s), last = fed_positions(s, share);
  std::vector<SpanScores> out(s.rows.size());
  const auto score_all = [&](const Tensor<T, 2, D>& logits, index_t p, bool one_row) {
    const auto& lg = lrt::on_device<cpu::Device>(logits);  // (B, V) soft-capped, on the host
    for (index_t b = 0; b < B; ++b)
      if (scored(s, static_cast<std::size_t>(b), p))
        score_position(&lg(one_row ? 0 : b, 0), c.vocab_size,
                       s.rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(p + 1)],
                       out[static_cast<std::size_t>(b)]);
  };
  score_all(dec.prefill_shared(std::span<const index_t>(s.rows[0].data(), static_cast<std::size_t>(share)), mode),
            share - 1, true);
  std::vector<index_t> tok(static_cast<std::size_t>(B));
  for (index_t t = share; t < last; ++t) {
    for (index_t b = 0; b < B; ++b) {
      const auto& r = s.rows[static_cast<std::size_t>(b)];
      tok[static_cast<std::size_t>(b)] = t < static_cast<index_t>(r.size()) ? r[static_cast<std::size_t>(t)] : c.bos();
    }
    score_all(dec.step(tok), t, false);
  }
  return out;
}

/// Decoders of one model kept for reuse by a scorer: an example takes one of its batch size
/// (constructed the first time that size is needed by that many threads at once) and gives it
/// back, so after warm-up no example builds a decoder or its cache. Thread-safe.
template <class V, class T, Device D>
class DecoderPool {
 public:
  using Dec = Decoder<V, T, D>;
  explicit DecoderPool(const Model<V, T, D>& m) : m_(&m) {}

  /// A decoder of `rows` rows, given back when the lease ends.
  class Lease {
   public:
    Lease(DecoderPool& p, std::unique_ptr<Dec> d) : p_(&p), d_(std::move(d)) {}
    Lease(Lease&&) = delete;
    ~Lease() {
      std::lock_guard<std::mutex> lk(p_->mu_);
      p_->free_.push_back(std::move(d_));
    }
    Dec& operator*() const noexcept { return *d_; }

   private:
    DecoderPool* p_;
    std::unique_ptr<Dec> d_;
  };

  Lease take(index_t rows) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (auto& d : free_)
        if (d->batch() == rows) {
          std::unique_ptr<Dec> got = std::move(d);
          d = std::move(free_.back());
          free_.pop_back();
          return Lease(*this, std::move(got));
        }
    }
    return Lease(*this, std::make_unique<Dec>(*m_, rows));
  }

 private:
  const Model<V, T, D>* m_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Dec>> free_;
};

/// A CoreScorer of model m through pooled decoders (score_shared) fed the way `mode` says (m must
/// outlive it; copies share the pool).
template <class V, class T, Device D>
CoreScorer decoder_scorer(const Model<V, T, D>& m, PrefillMode mode) {
  auto pool = std::make_shared<DecoderPool<V, T, D>>(m);
  return [pool, mode](const CoreSpans& s) {
    const auto lease = pool->take(static_cast<index_t>(s.rows.size()));
    return score_shared(*lease, s, mode);
  };
}

/// A CoreScorer of model m in the zero-memory mode, the options sharing their prefix
/// (score_zero_memory_shared; m must outlive it).
template <class V, class T, Device D>
CoreScorer zero_memory_scorer(const Model<V, T, D>& m) {
  return [&m](const CoreSpans& s) { return score_zero_memory_shared(m, s); };
}

/// A CoreScorer of model m with the exact recurrence, the options sharing their prefix; for a
/// model without memory, the zero-memory scorer (the two modes are one).
template <class V, class T, Device D>
CoreScorer sequential_scorer(const Model<V, T, D>& m) {
  if constexpr (!V::recurrent)
    return zero_memory_scorer(m);
  else
    return decoder_scorer(m, PrefillMode::exact());
}

}  // namespace eval
}  // namespace v0
}  // namespace lrt
