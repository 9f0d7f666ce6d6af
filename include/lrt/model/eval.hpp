// lrt/model/eval.hpp: validation bits per byte (spec §7):
// bpb = sum of nats / (ln 2 * sum of bytes) over target tokens, where a token stands for
// token_bytes(id) raw bytes (1 for ids 0-255, 0 for BOS and ignored targets; those carry no nats).
#pragma once

#include <cmath>
#include <numbers>

#include "gpt.hpp"

namespace lrt {
inline namespace v0 {

struct BpbResult {
  double nats = 0;    // over targets with bytes > 0
  index_t bytes = 0;  // raw bytes those targets stand for
  index_t tokens = 0; // targets scored (bytes > 0)
  double bpb() const { return bytes > 0 ? nats / (std::numbers::ln2 * static_cast<double>(bytes)) : 0.0; }
  /// Mean nats per scored token (the validation loss).
  double loss() const { return tokens > 0 ? nats / static_cast<double>(tokens) : 0.0; }
  BpbResult& operator+=(const BpbResult& o) {
    nats += o.nats, bytes += o.bytes, tokens += o.tokens;
    return *this;
  }
};

/// Raw bytes of a byte-tokenizer id: 1 for 0..255, 0 for BOS, specials and ignored (-1).
inline index_t byte_token_bytes(index_t id) { return id >= 0 && id < 256 ? 1 : 0; }

/// Adds per-token losses (N) of targets (N) to r.
template <class T, class D, class F = index_t (*)(index_t)>
void accumulate_bpb(BpbResult& r, const Tensor<T, 1, D>& per_token, TensorView<const index_t, 1, D> targets,
                    F token_bytes = &byte_token_bytes) {
  static_assert(D::host_accessible, "bits per byte are summed on the host");
  for (index_t i = 0; i < targets.shape()[0]; ++i) {
    const index_t nb = token_bytes(targets(i));
    if (nb <= 0) continue;
    r.nats += static_cast<double>(per_token(i));
    r.bytes += nb;
    r.tokens += 1;
  }
}

/// Bits per byte of the Standard forward over batches (each with .inputs and .targets (B, T)).
template <class T, Device D, class Batches>
BpbResult evaluate_bpb(const GPT<T, D>& m, const Batches& batches) {  // the baseline's single pass
  BpbResult r;
  for (const auto& b : batches) {
    ad::Graph g;
    ad::NoGrad ng;
    const auto ce = m.loss(b.inputs, b.targets);
    const index_t n = b.targets.numel();
    accumulate_bpb(r, ce.per_token, b.targets.view().template reshape<1>(Shape<1>{n}));
  }
  return r;
}

}  // namespace v0
}  // namespace lrt
