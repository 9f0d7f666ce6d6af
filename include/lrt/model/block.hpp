// lrt/model/block.hpp: the LRT's wiring, written once (spec §2.2-2.3, §3.2): model_forward (the
// token embedding, the blocks, the source capture, the final norm) and block_forward (lambda mix,
// residual injection gamma_l m, triple gate, recurrent K/V, value embedding, QK norm, attention,
// MLP). Both are templates over an execution E that supplies the operations; there are two:
//   - the tape (model_detail::TapeExec, model/gpt.hpp): autodiff ops on ad::Var, run by training on
//     any device and by Decoder (decode/decoder.hpp);
//   - the direct one (LeanDecoder's DirectExec, decode/lean.hpp): the kernels on the caller's row
//     buffers, no allocation, no exceptions, every call inlined.
// A variant's addition is a constexpr branch here (and its tensors a row of the parameter table,
// model/weight_table.hpp); both executions then run it. This header includes no autodiff or fmt
// header, so that the embedded build can use it.
//
// The execution's vocabulary (E::Rows: (n, C) rows of a token; E::Heads: the same as (n, heads,
// Dh); E::Gate: one gate per KV head of n rows; E::Coef: a per-layer coefficient). Every op takes a
// Buf: where the direct execution writes its result (the tape makes a new node and ignores it).
// Ops record in the order they are called here: the tape's backward (and with it every gradient's
// rounding) follows this order, so reordering two lines changes gradients in the last bits.
//   rows_of(W, dst)                 the embedding rows of the tokens (W: a table)
//   rmsnorm(x, dst), copy(x, dst)
//   lambda_mix(x, x0, l, dst)       a_l x + b_l x0 (the config's use_* flags choose the terms)
//   coef(vec, l), coef_mul(a, b), coef_sigmoid(a)      per-layer scalars of a (L) weight vector
//   scaled_add(x, m, coef, dst)     x + coef m
//   linear(x, W, dst)               x W^T;  heads(rows, count): the same values as (n, count, Dh)
//   first_channels(x, c)            x[:, 0:c] (the gates' input)
//   gate2(z, dst)                   2 sigmoid(z);  gate(g, j, Hkv): gates j Hkv .. (j+1) Hkv - 1 of g
//   head_mul(g, x, dst)             g (per head) * x;  add(a, b, dst): a + b
//   value_embedding(W, dst)         the rows of the value-embedding table W, as heads
//   rope_norm(x, dst)               RMSNorm(RoPE(x)) per head vector (QK norm after RoPE)
//   attend(l, q, k, v, dst)         the layer's attention;  flat(heads): the same values as rows
//   relu2(x, dst)                   relu(x)^2
//   observe(l, g_rec, kpre)         kv_refresh's observer (tape only); observing(): whether one is set
//   has(W)                          whether the variant/layer has weight W
//   other_vector(w, name)           a vector tensor of the variant's own (WeightSlot::other)
#pragma once

#include <concepts>
#include <string_view>

#include "config.hpp"
#include "variant.hpp"

namespace lrt {
inline namespace v0 {

/// Where the direct execution keeps a block's values (E's ops take one; the tape ignores it).
enum class Buf { emb, x, x0, u, q, k, v, gz, g, e, kr, vr, tmp, qn, kn, y, proj, fc, act, source, h };

/// One block l: x (after block l-1) -> x after block l; mem: the memory rows m~ (null: zero memory);
/// krec/vrec: the shared projections of the memory (Shared KV/Both variants with memory).
template <class V, class E, class W>
typename E::Rows block_forward(E& e, const W& w, index_t l, typename E::Rows x, const typename E::Rows& x0,
                               const typename E::Rows* mem, const typename E::Heads& krec_shared,
                               const typename E::Heads& vrec_shared) {
  using Heads = typename E::Heads;
  const ModelConfig& c = e.config();
  const auto& b = w.layers[static_cast<std::size_t>(l)];
  const index_t H = c.n_head, Hkv = c.n_kv_head;
  x = e.lambda_mix(x, x0, l, Buf::x);
  if constexpr (V::residual) {  // x + gamma_l m
    if (mem) {
      auto gain = e.coef(w.gamma, l);
      if constexpr (requires { requires V::gated_residual; })  // test-only: gamma_l sigmoid(w_l) m
        gain = e.coef_mul(gain, e.coef_sigmoid(e.coef(e.other_vector(w, "gamma_gate"), l)));
      x = e.scaled_add(x, *mem, gain, Buf::x);
    }
  }
  const auto u = e.rmsnorm(x, Buf::u);
  Heads q = e.heads(e.linear(u, b.c_q, Buf::q), H);
  Heads k = e.heads(e.linear(u, b.c_k, Buf::k), Hkv);
  Heads v = e.heads(e.linear(u, b.c_v, Buf::v), Hkv);
  if constexpr (V::kv) {  // spec §3.2 steps 4-6: triple gate (rows local, rec, ve), recurrent K/V, value embedding
    const auto g = e.gate2(e.linear(e.first_channels(u, c.gate_channels()), b.triple_gate, Buf::gz), Buf::g);
    const auto g_loc = e.gate(g, 0, Hkv), g_ve = e.gate(g, 2, Hkv);
    const Heads ve = e.value_embedding(b.value_embed, Buf::e);
    k = e.head_mul(g_loc, k, Buf::k);
    v = e.head_mul(g_loc, v, Buf::v);
    typename E::Gate g_rec{};
    if (mem || e.observing()) g_rec = e.gate(g, 1, Hkv);
    if (mem) {
      Heads krec = krec_shared, vrec = vrec_shared;
      if constexpr (V::projection == Projection::Layerwise) {
        krec = e.heads(e.linear(*mem, b.proj_k, Buf::kr), Hkv);
        vrec = e.heads(e.linear(*mem, b.proj_v, Buf::vr), Hkv);
      }
      k = e.add(k, e.head_mul(g_rec, krec, Buf::tmp), Buf::k);
      v = e.add(v, e.head_mul(g_rec, vrec, Buf::tmp), Buf::v);
    }
    v = e.add(v, e.head_mul(g_ve, ve, Buf::tmp), Buf::v);
    e.observe(l, g_rec, k);           // k: pre-RoPE, pre-norm (kv_refresh's kpre)
  } else if (e.has(b.value_embed)) {  // v + 2 sigmoid(W_g u[0:c]) (per KV head) * E_l[tok]
    const auto g = e.gate2(e.linear(e.first_channels(u, c.gate_channels()), b.ve_gate, Buf::gz), Buf::g);
    const Heads ve = e.value_embedding(b.value_embed, Buf::e);
    v = e.add(v, e.head_mul(e.gate(g, 0, Hkv), ve, Buf::tmp), Buf::v);
  }
  q = e.rope_norm(q, Buf::qn);  // QK-norm after RoPE, one fused op
  k = e.rope_norm(k, Buf::kn);
  const Heads y = e.attend(l, q, k, v, Buf::y);
  x = e.add(x, e.linear(e.flat(y), b.c_proj, Buf::proj), Buf::x);
  x = e.add(x, e.linear(e.relu2(e.linear(e.rmsnorm(x, Buf::u), b.c_fc, Buf::fc), Buf::act), b.mlp_proj, Buf::proj),
            Buf::x);
  return x;
}

/// What a forward leaves: the final normed states h and the memory source states (h itself for
/// FinalSource, N(x after block l) for BlockSource<l>).
template <class Rows>
struct ForwardResult {
  Rows h, source;
};

/// The whole forward of the tokens E holds with memory rows mem (null: zero memory; the gates
/// still apply, spec §3.2): the normed token embedding, every block, the source capture, the final norm.
template <class V, class E, class W>
ForwardResult<typename E::Rows> model_forward(E& e, const W& w, const typename E::Rows* mem) {
  using Rows = typename E::Rows;
  using Heads = typename E::Heads;
  const ModelConfig& c = e.config();
  Rows x = e.rmsnorm(e.rows_of(w.wte, Buf::emb), Buf::x);  // norm after the embedding
  const Rows x0 = e.copy(x, Buf::x0);
  Heads krec{}, vrec{};  // Shared projections of the memory: computed once per pass
  if constexpr (V::kv && V::projection == Projection::Shared) {
    if (mem) {
      krec = e.heads(e.linear(*mem, w.proj_k, Buf::kr), c.n_kv_head);
      vrec = e.heads(e.linear(*mem, w.proj_v, Buf::vr), c.n_kv_head);
    }
  }
  ForwardResult<Rows> out;
  for (index_t l = 0; l < c.n_layer; ++l) {
    x = block_forward<V>(e, w, l, x, x0, mem, krec, vrec);
    if (l == V::source_layer) out.source = e.rmsnorm(x, Buf::source);
  }
  out.h = e.rmsnorm(x, Buf::h);
  if (V::source_layer < 0) out.source = e.copy(out.h, Buf::source);
  return out;
}

}  // namespace v0
}  // namespace lrt
