// lrt/model/decode.hpp: KV-cache decoding (one forward per token, spec §6) and the sampler
// (temperature, top-k, top-p, counter-based draws so that every backend samples the same tokens).
// The decoder runs the model's own block code with an attend hook that appends the new key and
// value to a preallocated cache and attends over it; no gradient is recorded.
// Shapes: B rows, Tmax cache capacity, Hkv KV heads, Dh head dim, V vocabulary (cropped).
#pragma once

#include <algorithm>
#include <numeric>
#include <span>
#include <vector>

#include "gpt.hpp"

namespace lrt {
inline namespace v0 {

/// Decodes B rows in lockstep: step(tokens) feeds one token per row at the current position and
/// returns the soft-capped logits (B, V) of the next token.
template <class V = variants::Baseline, class T = float, Device D = cpu::Device>
class Decoder {
 public:
  using Model = lrt::Model<V, T, D>;

  /// A decoder for `batch` rows with room for `capacity` positions (0: the model's sequence_len).
  explicit Decoder(const Model& model, index_t batch = 1, index_t capacity = 0)
      : m_(&model), B_(batch), cap_(capacity > 0 ? capacity : model.config().sequence_len) {
    check(batch >= 1, "decoder", "batch must be >= 1, got ", batch);
    const ModelConfig& c = model.config();
    for (index_t l = 0; l < c.n_layer; ++l) {
      k_.emplace_back(Shape<4>{B_, cap_, c.n_kv_head, c.head_dim()});
      v_.emplace_back(Shape<4>{B_, cap_, c.n_kv_head, c.head_dim()});
    }
    logits_ = Tensor<T, 2, D>(Shape<2>{B_, c.vocab_size});
    if constexpr (V::recurrent) {  // ring of the last k source states and tokens per row
      ring_ = Tensor<T, 3, D>(Shape<3>{c.mem_offset, B_, c.n_embd});
      ring_tok_ = Tensor<index_t, 2>(Shape<2>{c.mem_offset, B_});
    }
  }

  index_t batch() const noexcept { return B_; }
  index_t capacity() const noexcept { return cap_; }
  /// Number of positions fed so far (the position of the next token).
  index_t position() const noexcept { return t_; }
  /// Forgets the context (the cache is kept allocated).
  void reset() noexcept { t_ = 0; }

  /// Feeds tokens (B) at position(); returns the next-token logits (B, V), 15 tanh(z / 15).
  const Tensor<T, 2, D>& step(std::span<const index_t> tokens) {
    const ModelConfig& c = m_->config();
    check(static_cast<index_t>(tokens.size()) == B_, "decoder", "got ", tokens.size(), " tokens for ", B_, " rows");
    check(t_ < cap_, "decoder", "context full: position ", t_, " is past the cache capacity ", cap_);
    for (index_t tok : tokens)
      check(tok >= 0 && tok < c.vocab_size, "decoder", "token id ", tok, " outside the vocabulary [0, ",
            c.vocab_size, ")");
    ad::Graph graph;
    ad::NoGrad no_grad;
    Tensor<index_t, 2> ids_host(Shape<2>{B_, 1});
    for (index_t b = 0; b < B_; ++b) ids_host(b, 0) = tokens[static_cast<std::size_t>(b)];
    Tensor<index_t, 2, D> ids;
    if constexpr (std::is_same_v<D, cpu::Device>) {
      ids = std::move(ids_host);
    } else {
      ids = to<D>(ids_host);
    }
    const Tensor<index_t, 1, D> qpos = Tensor<index_t, 1, D>::full(Shape<1>{1}, t_);
    const auto rope = ad::RopeTable<T, D>::make(qpos.view(), c.head_dim(), c.rope_bf16_tables);
    const index_t t = t_;
    const T scale = T(1) / std::sqrt(static_cast<T>(c.head_dim()));
    const auto attend = [&](index_t l, const ad::Var<T, 4, D>& q, const ad::Var<T, 4, D>& k,
                            const ad::Var<T, 4, D>& v) {
      auto& kc = k_[static_cast<std::size_t>(l)];
      auto& vc = v_[static_cast<std::size_t>(l)];
      kc.slice(1, t, t + 1) = k.value();
      vc.slice(1, t, t + 1) = v.value();
      Tensor<T, 4, D> out(q.shape(), uninitialized);
      Tensor<T, 3, D> lse(Shape<3>{B_, c.n_head, 1}, uninitialized);
      const auto kv = [&](Tensor<T, 4, D>& cache) { return TensorView<const T, 4, D>(cache.slice(1, 0, t + 1)); };
      NnBackend<D>::template attention_forward<T>(q.value().view(), kv(kc), kv(vc), qpos.view(), c.window(l), scale,
                                                  out.view(), lse.view());
      return ad::constant(std::move(out));
    };
    typename Model::Var3 mem;
    if constexpr (V::recurrent) {  // m~_t = s_{t-k} (0 before k, or across a BOS with reset_at_bos)
      const index_t k = c.mem_offset;
      Tensor<T, 3, D> m(Shape<3>{B_, 1, c.n_embd});
      if (t >= k)
        for (index_t b = 0; b < B_; ++b) {
          bool cut = false;
          if (c.reset_at_bos) {  // tokens t-k+1..t: the k-1 newest in the ring, and this one
            cut = tokens[static_cast<std::size_t>(b)] == 256;
            for (index_t j = t - k + 1; j < t; ++j) cut = cut || ring_tok_(j % k, b) == 256;
          }
          if (!cut) m.view().select(1, 0).slice(0, b, b + 1) = ring_.view().select(0, (t - k) % k).slice(0, b, b + 1);
        }
      mem = ad::constant(std::move(m));
    }
    const auto pass = m_->forward(ids, rope, attend, V::recurrent ? &mem : nullptr);
    if constexpr (V::recurrent) {
      const index_t slot = t % c.mem_offset;
      ring_.view().select(0, slot) = pass.source.value().view().select(1, 0);
      for (index_t b = 0; b < B_; ++b) ring_tok_(slot, b) = tokens[static_cast<std::size_t>(b)];
    }
    const auto z = m_->head(pass.h);  // (B, 1, Vp)
    const T cap = T(15);
    logits_ = lrt::tanh(z.value().view().select(1, 0).slice(1, 0, c.vocab_size) / cap) * cap;
    ++t_;
    return logits_;
  }

 private:
  const Model* m_;
  index_t B_, cap_, t_ = 0;
  std::vector<Tensor<T, 4, D>> k_, v_;  // per layer (B, Tmax, Hkv, Dh)
  Tensor<T, 2, D> logits_;
  Tensor<T, 3, D> ring_;          // (k, B, d) source states, slot t % k
  Tensor<index_t, 2> ring_tok_;   // (k, B) their tokens (host)
};

template <class V, class T, Device D>
Decoder(const Model<V, T, D>&, index_t = 1, index_t = 0) -> Decoder<V, T, D>;

struct SamplerOptions {
  double temperature = 1.0;  // 0: greedy (argmax, ties to the lowest id)
  index_t top_k = 0;         // > 0: keep the k largest logits (ties at the k-th kept)
  double top_p = 1.0;        // < 1: keep the shortest most-probable prefix with mass >= p
  std::uint64_t seed = 0;
};

/// Picks the next token from logits (V) per spec §6. `counter` selects the uniform draw of lrt's
/// Philox stream (key = seed): pass row * Tmax + t so that every backend draws the same number.
template <class T>
index_t sample_token(std::span<const T> logits, const SamplerOptions& o, std::uint64_t counter) {
  const index_t V = static_cast<index_t>(logits.size());
  check(V > 0, "sample", "empty logits");
  check(o.temperature >= 0, "sample", "temperature must be >= 0, got ", o.temperature);
  check(o.top_p > 0 && o.top_p <= 1, "sample", "top_p must be in (0, 1], got ", o.top_p);
  check(o.top_k >= 0, "sample", "top_k must be >= 0, got ", o.top_k);
  if (o.temperature == 0) return static_cast<index_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Scratch reused by this thread (no allocation per token after the first).
  thread_local std::vector<double> prob;
  thread_local std::vector<index_t> order;
  prob.assign(logits.begin(), logits.end());
  if (o.top_k > 0 && o.top_k < V) {
    thread_local std::vector<double> tmp;
    tmp.assign(prob.begin(), prob.end());
    std::nth_element(tmp.begin(), tmp.begin() + (o.top_k - 1), tmp.end(), std::greater<double>());
    const double kth = tmp[static_cast<std::size_t>(o.top_k - 1)];
    for (double& x : prob)
      if (x < kth) x = -std::numeric_limits<double>::infinity();
  }
  double mx = -std::numeric_limits<double>::infinity();
  for (double& x : prob) mx = std::max(mx, x /= o.temperature);
  double sum = 0;
  for (double& x : prob) sum += (x = std::exp(x - mx));
  for (double& x : prob) x /= sum;
  if (o.top_p < 1) {
    order.resize(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), index_t{0});
    std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) { return prob[a] > prob[b]; });
    double cum = 0;
    std::size_t keep = 0;
    while (keep < order.size() && (keep == 0 || cum < o.top_p)) cum += prob[static_cast<std::size_t>(order[keep++])];
    for (std::size_t i = keep; i < order.size(); ++i) prob[static_cast<std::size_t>(order[i])] = 0;
    for (double& x : prob) x /= cum;
  }
  // One draw u in [0, 1), then the first id (ascending) whose cumulative mass exceeds u.
  const double u = lrt::detail::unit_float(Philox::generate(o.seed, counter).v[0]);
  double cum = 0;
  index_t last = 0;
  for (index_t i = 0; i < V; ++i) {
    if (prob[static_cast<std::size_t>(i)] <= 0) continue;
    last = i;
    cum += prob[static_cast<std::size_t>(i)];
    if (u < cum) return i;
  }
  return last;  // rounding left u above the total: the last kept id
}

}  // namespace v0
}  // namespace lrt
