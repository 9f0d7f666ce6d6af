// lrt/train/eval.hpp: validation bits per byte (spec §7):
// bpb = sum of nats / (ln 2 * sum of bytes) over target tokens, where a token stands for
// token_bytes(id) raw bytes, from the tokenizer's table (lrt::TokenBytes; the byte tokenizer's:
// 1 for ids 0-255, 0 for BOS); targets with 0 bytes (specials, ignored -1) carry no nats.
// Without a table the evaluations use the byte tokenizer's, and only for a model whose config is
// the byte vocabulary (vocab_size 257, BOS 256): any other config is an lrt::Error.
//
//   auto r = lrt::evaluate_parallel<lrt::Standard>(model, batches, tokenizer_token_bytes);
#pragma once

#include <cmath>
#include <numbers>
#include <numeric>

#include "../decode/decoder.hpp"
#include "../model/training_schedule.hpp"
#include "../data/token_bytes.hpp"

namespace lrt {
inline namespace v0 {

struct BpbResult {
  double nats = 0;     // over targets with bytes > 0
  index_t bytes = 0;   // raw bytes those targets stand for
  index_t tokens = 0;  // targets scored (bytes > 0)
  double bpb() const { return bytes > 0 ? nats / (std::numbers::ln2 * static_cast<double>(bytes)) : 0.0; }
  /// Mean nats per scored token (the validation loss).
  double loss() const { return tokens > 0 ? nats / static_cast<double>(tokens) : 0.0; }
  BpbResult& operator+=(const BpbResult& o) {
    nats += o.nats, bytes += o.bytes, tokens += o.tokens;
    return *this;
  }
};

/// The table the evaluations use when given none: the byte tokenizer's (ids 0..255 one byte, BOS
/// none), and only when c is the byte vocabulary (vocab_size 257, bos() 256); for any other
/// config an lrt::Error naming `op` that asks for the tokenizer's token bytes.
inline TokenBytes default_token_bytes(const ModelConfig& c, const char* op = "token_bytes") {
  check(c.vocab_size == 257 && c.bos() == 256, op,
        "without a token-bytes table bits per byte assume the byte tokenizer (vocab_size 257, BOS 256), but the "
        "model has vocab_size ",
        c.vocab_size, " and BOS ", c.bos(),
        ": pass the tokenizer's token bytes (an lrt::TokenBytes, e.g. from the tokenizer's token_bytes_table())");
  return byte_vocab_token_bytes(257);
}

namespace detail {
/// The table must cover the model's vocabulary and count no negative bytes.
inline void check_token_bytes(const TokenBytes& tb, const ModelConfig& c, const char* op) {
  check(tb.size() >= c.vocab_size, op, "the token-bytes table has ", tb.size(),
        " entries, fewer than the model's vocab_size ", c.vocab_size);
  for (index_t id = 0; id < tb.size(); ++id)
    check(tb.bytes[static_cast<std::size_t>(id)] >= 0, op, "the token-bytes table gives id ", id, " ",
          tb.bytes[static_cast<std::size_t>(id)], " bytes (must be >= 0)");
}
}  // namespace detail

/// Adds per-token losses (N) of targets (N) to r; token_bytes(id) (an lrt::TokenBytes or any
/// callable index_t(index_t)) gives each target's raw bytes.
template <class T, class D, class F>
void accumulate_bpb(BpbResult& r, const Tensor<T, 1, D>& per_token, TensorView<const index_t, 1, D> targets,
                    const F& token_bytes) {
  static_assert(D::host_accessible, "bits per byte are summed on the host");
  for (index_t i = 0; i < targets.shape()[0]; ++i) {
    const index_t nb = token_bytes(targets(i));
    if (nb <= 0) continue;
    r.nats += static_cast<double>(per_token(i));
    r.bytes += nb;
    r.tokens += 1;
  }
}

/// Parallel-mode bits per byte of a schedule (spec §7): every position scored by the last pass
/// that computed it ("merged"), plus each pass over its own positions.
struct ParallelBpb {
  BpbResult merged;
  std::vector<BpbResult> passes;
};

template <class Sched, class V, class T, Device D, class Batches>
ParallelBpb evaluate_parallel(const Model<V, T, D>& m, const Batches& batches, const TokenBytes& token_bytes,
                              const ScheduleOptions& o = {}) {
  detail::check_token_bytes(token_bytes, m.config(), "evaluate_parallel");
  ParallelBpb r;
  for (const auto& b : batches) {
    ad::Graph g;
    ad::NoGrad ng;
    const auto s = schedule_loss<Sched>(m, lrt::on_device<D>(b.inputs), lrt::on_device<D>(b.targets), o);
    const index_t B = b.targets.shape()[0], Tt = b.targets.shape()[1];
    if (r.passes.size() < s.passes.size()) r.passes.resize(s.passes.size());
    std::vector<std::pair<double, index_t>> last(static_cast<std::size_t>(B * Tt), {0.0, 0});  // nats, bytes
    for (std::size_t p = 0; p < s.passes.size(); ++p) {
      const auto& pr = s.passes[p];
      const index_t n = static_cast<index_t>(pr.positions.size());
      // Scores and targets on the host (one copy each per pass from a GPU).
      const auto& per_token = lrt::on_device<cpu::Device>(pr.per_token);
      const auto& targets = lrt::on_device<cpu::Device>(pr.targets);
      accumulate_bpb(r.passes[p], per_token, targets.view(), token_bytes);
      for (index_t bb = 0; bb < B; ++bb)
        for (index_t i = 0; i < n; ++i) {
          const index_t flat = bb * n + i, nb = token_bytes(targets(flat));
          last[static_cast<std::size_t>(bb * Tt + pr.positions[static_cast<std::size_t>(i)])] = {
              nb > 0 ? static_cast<double>(per_token(flat)) : 0.0, nb};
        }
    }
    for (const auto& [nats, nb] : last)
      if (nb > 0) r.merged.nats += nats, r.merged.bytes += nb, r.merged.tokens += 1;
  }
  return r;
}
/// The same with the byte tokenizer's table: byte-vocabulary configs only (default_token_bytes).
template <class Sched, class V, class T, Device D, class Batches>
ParallelBpb evaluate_parallel(const Model<V, T, D>& m, const Batches& batches, const ScheduleOptions& o = {}) {
  return evaluate_parallel<Sched>(m, batches, default_token_bytes(m.config(), "evaluate_parallel"), o);
}

/// Bits per byte of the baseline's single pass (the Standard forward) over batches (each with
/// .inputs and .targets (B, T)).
template <class T, Device D, class Batches>
BpbResult evaluate_bpb(const GPT<T, D>& m, const Batches& batches, const TokenBytes& token_bytes) {
  detail::check_token_bytes(token_bytes, m.config(), "evaluate_bpb");
  return evaluate_parallel<Standard>(m, batches, token_bytes).merged;
}
/// The same with the byte tokenizer's table: byte-vocabulary configs only (default_token_bytes).
template <class T, Device D, class Batches>
BpbResult evaluate_bpb(const GPT<T, D>& m, const Batches& batches) {
  return evaluate_bpb(m, batches, default_token_bytes(m.config(), "evaluate_bpb"));
}

namespace detail {
/// Feeds every batch row token by token through a decoder (zero memory and an empty cache at
/// the start of each batch) and calls f(t, nats, bytes) for each target at position t that stands
/// for bytes > 0.
template <class V, class T, Device D, class Batches, class F>
void sequential_scores(const Model<V, T, D>& m, const Batches& batches, const TokenBytes& token_bytes, const F& f,
                       index_t sinks = 0) {
  for (const auto& b : batches) {
    const index_t B = b.inputs.shape()[0], Tt = b.inputs.shape()[1];
    Decoder dec(m, B, 0, sinks);  // no length limit: rows may be longer than sequence_len
    std::vector<index_t> tok(static_cast<std::size_t>(B));
    for (index_t t = 0; t < Tt; ++t) {
      for (index_t bb = 0; bb < B; ++bb) tok[static_cast<std::size_t>(bb)] = b.inputs(bb, t);
      const auto& lg = lrt::on_device<cpu::Device>(dec.step(tok));  // (B, V) soft-capped, on the host
      for (index_t bb = 0; bb < B; ++bb) {
        const index_t y = b.targets(bb, t), nb = token_bytes(y);
        if (nb <= 0) continue;
        double mx = -1e300, z = 0;
        for (index_t v = 0; v < lg.shape()[1]; ++v) mx = std::max(mx, static_cast<double>(lg(bb, v)));
        for (index_t v = 0; v < lg.shape()[1]; ++v) z += std::exp(static_cast<double>(lg(bb, v)) - mx);
        f(t, mx + std::log(z) - static_cast<double>(lg(bb, y)), nb);
      }
    }
  }
}
}  // namespace detail

/// Sequential-mode bits per byte: the exact recurrence, one decode step per position (spec §7,
/// the deployment number); each row starts from zero memory and an empty cache. Rows may be
/// longer than sequence_len (the decoder's cache is a window, see decode.hpp).
template <class V, class T, Device D, class Batches>
BpbResult evaluate_sequential(const Model<V, T, D>& m, const Batches& batches, const TokenBytes& token_bytes) {
  detail::check_token_bytes(token_bytes, m.config(), "evaluate_sequential");
  BpbResult r;
  detail::sequential_scores(m, batches, token_bytes,
                            [&](index_t, double nats, index_t nb) { r.nats += nats, r.bytes += nb, r.tokens += 1; });
  return r;
}

/// The same split by position: element i covers the targets at positions [i * width, (i + 1) *
/// width) of the rows (width 0: the model's sequence_len), e.g. rows of 4T scored in four bands
/// to see what happens past the training context; `sinks` attention sinks in the decoder (see
/// decode.hpp; 0: none).
template <class V, class T, Device D, class Batches>
std::vector<BpbResult> evaluate_sequential_by_position(const Model<V, T, D>& m, const Batches& batches,
                                                       const TokenBytes& token_bytes, index_t width = 0,
                                                       index_t sinks = 0) {
  detail::check_token_bytes(token_bytes, m.config(), "evaluate_sequential_by_position");
  check(width >= 0, "evaluate_sequential_by_position", "band width must be >= 0, got ", width);
  if (width == 0) width = m.config().sequence_len;
  std::vector<BpbResult> r;
  detail::sequential_scores(
      m, batches, token_bytes,
      [&](index_t t, double nats, index_t nb) {
        const std::size_t i = static_cast<std::size_t>(t / width);
        if (r.size() <= i) r.resize(i + 1);
        r[i].nats += nats, r[i].bytes += nb, r[i].tokens += 1;
      },
      sinks);
  return r;
}

/// The same with the byte tokenizer's table: byte-vocabulary configs only (default_token_bytes).
template <class V, class T, Device D, class Batches>
BpbResult evaluate_sequential(const Model<V, T, D>& m, const Batches& batches) {
  return evaluate_sequential(m, batches, default_token_bytes(m.config(), "evaluate_sequential"));
}

/// What the memory does in each layer, as the release logs it during training: gamma_l
/// (Residual/Both; NaN otherwise) and the mean and standard deviation of the recurrent gate g_rec
/// (KV/Both; NaN otherwise) over every position, row and KV head of `inputs` (B, T), with the
/// memory of one refinement (the zero-memory pass's source states shifted by mem_offset, as in
/// MultiRefine<1>'s second pass). Empty for the baseline. No gradients; the model is unchanged.
struct LayerMemoryStats {
  double gamma = NAN, gate_mean = NAN, gate_sd = NAN;
};
template <class V, class T, Device D>
std::vector<LayerMemoryStats> memory_statistics(const Model<V, T, D>& m, const Tensor<index_t, 2>& inputs) {
  using M = Model<V, T, D>;
  const ModelConfig& c = m.config();
  std::vector<LayerMemoryStats> r;
  if constexpr (V::recurrent) {
    r.resize(static_cast<std::size_t>(c.n_layer));
    if constexpr (V::residual) {
      const auto& g = lrt::on_device<cpu::Device>(m.gamma()->value());
      for (index_t l = 0; l < c.n_layer; ++l) r[static_cast<std::size_t>(l)].gamma = static_cast<double>(g(l));
    }
    if constexpr (V::kv) {
      const index_t Tt = inputs.shape()[1];
      check(Tt >= 1 && Tt <= c.sequence_len, "memory_statistics", "rows of ", Tt, " tokens; the model takes 1 to ",
            c.sequence_len);
      ad::Graph graph;
      ad::NoGrad ng;
      const auto& ids = lrt::on_device<D>(inputs);
      std::vector<index_t> all(static_cast<std::size_t>(Tt));
      std::iota(all.begin(), all.end(), index_t{0});
      const auto qpos = IndexList<D>::range(0, Tt);
      const auto rope = ad::RopeTable<T, D>::make(qpos, c.head_dim(), c.rope_bf16_tables);
      const auto p0 = m.forward(ids, rope, m.standard_attend(qpos));
      const typename M::Var3 mem = sched_detail::shift_memory(p0.source, all, ids, c);
      const typename M::Observe observe = [&](index_t l, const typename M::Var4& g_rec, const typename M::Var4&) {
        const auto& g = lrt::on_device<cpu::Device>(g_rec.value());
        double sum = 0, sq = 0;
        const index_t n = g.numel();
        for (index_t i = 0; i < n; ++i) sum += static_cast<double>(g.data()[i]);
        const double mean = sum / static_cast<double>(n);
        for (index_t i = 0; i < n; ++i) sq += (static_cast<double>(g.data()[i]) - mean) * (g.data()[i] - mean);
        r[static_cast<std::size_t>(l)].gate_mean = mean;
        r[static_cast<std::size_t>(l)].gate_sd = std::sqrt(sq / static_cast<double>(n));
      };
      m.forward(ids, rope, m.standard_attend(qpos), &mem, &observe);
    }
  }
  return r;
}

}  // namespace v0
}  // namespace lrt
