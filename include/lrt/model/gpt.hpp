// lrt/model/gpt.hpp: the model of LRT-SPEC §2-3 for every variant (Variant, variants::*,
// Model<V, T, D>): the nanochat-style GPT backbone and the LRT memory wiring; parameters with the release's names and
// shapes, its initialisation, the differentiable forward and the loss. The forward of one block is written once and
// reused by every code path (training, evaluation, KV-cache decoding): the caller passes how a layer attends (all
// positions at once, or one new position against a cache). Shapes: B batch, T time, d width, H heads, Hkv KV heads, Dh
// head dim, D = Hkv*Dh, Vp padded vocab.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../autodiff/graph.hpp"
#include "../autodiff/nn.hpp"
#include "../autodiff/ops.hpp"
#include "config.hpp"
#include "logits.hpp"
#include "variant.hpp"

namespace lrt {
inline namespace v0 {

namespace model_detail {
/// t(i) += sum(e). On a device the host cannot read, the sum stays on the device (the add is
/// queued, nothing waits for it).
template <class T, class D, class E>
void add_sum_at(Tensor<T, 1, D>& t, index_t i, const E& e) {
  if constexpr (D::host_accessible) {
    t(i) += lrt::sum(e);
  } else {
    auto slot = t.view().slice(0, i, i + 1);
    const Tensor<T, 0, D> s = lrt::sum_tensor(e);
    slot = slot + s.view().template reshape<1>(Shape<1>{1});
  }
}
/// The coefficient t[l] in an expression: a host scalar on the CPU, a broadcast (1) view read on
/// the device elsewhere (so that nothing waits for the GPU).
template <class T, class D>
auto coef(const Tensor<T, 1, D>& t, index_t l) {
  if constexpr (D::host_accessible) {
    return t(l);
  } else {
    return t.view().slice(0, l, l + 1);
  }
}

/// y = a[l] x + b[l] x0 (the release's per-layer residual and x0 lambdas, in one pass).
/// x, x0 (B, T, d); a, b (L). use_a / use_b off: that term is the identity / absent.
template <class T, Device D>
ad::Var<T, 3, D> lambda_mix(const ad::Var<T, 3, D>& x, const ad::Var<T, 3, D>& x0, const ad::Var<T, 1, D>& a,
                            const ad::Var<T, 1, D>& b, index_t l, bool use_a, bool use_b) {
  Tensor<T, 3, D> y(x.shape(), uninitialized);
  if constexpr (D::host_accessible) {
    const T al = use_a ? a.value()(l) : T(1);
    const T bl = use_b ? b.value()(l) : T(0);
    y = x.value() * al + x0.value() * bl;  // alpha_l x first, then + beta_l x0 (the release's order)
  } else {
    if (use_a && use_b)
      y = x.value() * coef(a.value(), l) + x0.value() * coef(b.value(), l);
    else if (use_a)
      y = x.value() * coef(a.value(), l);
    else if (use_b)
      y = x.value() + x0.value() * coef(b.value(), l);
    else
      y = x.value();
  }
  return ad::record<T, 3, D>(
      "lambda_mix", std::move(y),
      [x, x0, a, b, l, use_a, use_b](const Tensor<T, 3, D>& gy, const Tensor<T, 3, D>&) {
        if (use_a)
          ad::accumulate(x, gy * coef(a.value(), l));
        else
          ad::accumulate(x, gy);
        if (use_b) ad::accumulate(x0, gy * coef(b.value(), l));
        if (use_a)
          if (auto* ga = ad::grad_slot(a)) add_sum_at(*ga, l, gy * x.value());
        if (use_b)
          if (auto* gb = ad::grad_slot(b)) add_sum_at(*gb, l, gy * x0.value());
      },
      x, x0, a, b);
}

/// y = x + g[l] m (the Residual injection gamma_l m). x, m (B, T, d); g (L).
template <class T, Device D>
ad::Var<T, 3, D> scaled_add(const ad::Var<T, 3, D>& x, const ad::Var<T, 3, D>& m, const ad::Var<T, 1, D>& g,
                            index_t l) {
  Tensor<T, 3, D> y(x.shape(), uninitialized);
  y = x.value() + m.value() * coef(g.value(), l);
  return ad::record<T, 3, D>(
      "scaled_add", std::move(y),
      [x, m, g, l](const Tensor<T, 3, D>& gy, const Tensor<T, 3, D>&) {
        ad::accumulate(x, gy);
        ad::accumulate(m, gy * coef(g.value(), l));
        if (auto* gg = ad::grad_slot(g)) add_sum_at(*gg, l, gy * m.value());
      },
      x, m, g);
}
}  // namespace model_detail

/// What a parameter is, for the optimizer split of spec §8 and the counts of §10.
enum class ParamRole {
  Embedding,    // token and value-embedding tables (wte, E_l): AdamW at the embedding lr, no matmul
  Unembedding,  // lm_head: AdamW at the unembedding lr, a matmul
  Matrix,       // block matrices, gates and memory projections: Muon, matmuls
  ResidLambda,  // resid_lambdas (alpha_l): AdamW at the residual-lambda lr
  X0Lambda,     // x0_lambdas (beta_l): AdamW at the scalar lr, beta1 0.96
  MemoryGain,   // interleaved_lambdas (gamma_l, Residual/Both): AdamW at the scalar lr
};
inline std::string_view to_string(ParamRole r) {
  switch (r) {
    case ParamRole::Embedding:
      return "embedding";
    case ParamRole::Unembedding:
      return "unembedding";
    case ParamRole::Matrix:
      return "matrix";
    case ParamRole::ResidLambda:
      return "resid_lambda";
    case ParamRole::X0Lambda:
      return "x0_lambda";
    case ParamRole::MemoryGain:
      return "memory_gain";
  }
  return "?";
}
/// Whether a parameter of role r is a weight of a matrix multiply (counts in N_mm).
constexpr bool in_matmul(ParamRole r) { return r == ParamRole::Unembedding || r == ParamRole::Matrix; }

/// The transformer of spec §2 with the LRT additions of §3 selected by V, float or double, on
/// device D. variants::Baseline is the plain GPT (GPT<T, D> below).
template <class V = variants::Baseline, class T = float, Device D = cpu::Device>
class Model {
 public:
  using variant = V;
  using value_type = T;
  using P1 = ad::Param<T, 1, D>;
  using P2 = ad::Param<T, 2, D>;
  using Var3 = ad::Var<T, 3, D>;
  using Var4 = ad::Var<T, 4, D>;
  using Ids = Tensor<index_t, 2, D>;

  struct Block {
    std::unique_ptr<P2> c_q, c_k, c_v, c_proj, c_fc, mlp_proj;
    std::unique_ptr<P2> ve_gate, value_embed;  // None/Residual: VE layers only
    std::unique_ptr<P2> triple_gate;           // KV/Both: G_l (3 Hkv, c), rows local, rec, ve
    std::unique_ptr<P2> proj_k, proj_v;        // KV/Both, Layerwise: P_k, P_v (D, d)
  };

  /// A model with the release's initialisation drawn from lrt's Philox stream `seed`.
  explicit Model(ModelConfig cfg, std::uint64_t seed = 0) : cfg_(std::move(cfg)) {
    if constexpr (V::kv) cfg_.ve_layout = VELayout::Every;  // KV/Both: value embeddings on every layer
    cfg_.validate();
    check(V::source_layer < cfg_.n_layer, "model", "source layer ", V::source_layer, " is beyond the last block (",
          cfg_.n_layer, " layers)");
    check(cfg_.mem_offset >= 1, "model", "the memory offset k must be >= 1, got ", cfg_.mem_offset);
    const index_t L = cfg_.n_layer, d = cfg_.n_embd, Vp = cfg_.padded_vocab(), Dk = cfg_.kv_dim();
    const index_t hd = cfg_.n_head * cfg_.head_dim(), c = cfg_.gate_channels();
    const T s = static_cast<T>(std::sqrt(3.0 / static_cast<double>(d)));
    Generator g(seed);
    auto normal = [&](Shape<2> sh, T std) { return Tensor<T, 2, D>(g.normal<T>(sh, T(0), std)); };
    auto unif = [&](Shape<2> sh) { return Tensor<T, 2, D>(g.uniform<T>(sh, -s, s)); };
    auto zeros = [&](Shape<2> sh) { return Tensor<T, 2, D>(sh); };
    wte_ = std::make_unique<P2>(normal({Vp, d}, T(1)), "transformer.wte.weight");
    blocks_.resize(static_cast<std::size_t>(L));
    for (index_t l = 0; l < L; ++l) {
      Block& b = blocks_[static_cast<std::size_t>(l)];
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      b.c_q = std::make_unique<P2>(unif({hd, d}), p + "attn.c_q.weight");
      b.c_k = std::make_unique<P2>(unif({Dk, d}), p + "attn.c_k.weight");
      b.c_v = std::make_unique<P2>(unif({Dk, d}), p + "attn.c_v.weight");
      b.c_proj = std::make_unique<P2>(zeros({d, hd}), p + "attn.c_proj.weight");
      b.c_fc = std::make_unique<P2>(unif({4 * d, d}), p + "mlp.c_fc.weight");
      b.mlp_proj = std::make_unique<P2>(zeros({d, 4 * d}), p + "mlp.c_proj.weight");
      if constexpr (V::kv) {
        b.triple_gate = std::make_unique<P2>(zeros({3 * cfg_.n_kv_head, c}), p + "attn.triple_gate.weight");
        b.value_embed =
            std::make_unique<P2>(unif({Vp, Dk}), "interleaved_init_value_embeds." + std::to_string(l) + ".weight");
        if constexpr (V::projection == Projection::Layerwise) {
          b.proj_v =
              std::make_unique<P2>(unif({Dk, d}), "interleaved_projections." + std::to_string(l) + ".W_v.weight");
          b.proj_k =
              std::make_unique<P2>(unif({Dk, d}), "interleaved_key_projections." + std::to_string(l) + ".W_v.weight");
        }
      } else if (cfg_.has_ve(l)) {
        b.ve_gate = std::make_unique<P2>(zeros({cfg_.n_kv_head, c}), p + "attn.ve_gate.weight");
        b.value_embed = std::make_unique<P2>(unif({Vp, Dk}), "value_embeds." + std::to_string(l) + ".weight");
      }
    }
    if constexpr (V::kv && V::projection == Projection::Shared) {
      proj_v_ = std::make_unique<P2>(unif({Dk, d}), "interleaved_projections.shared.W_v.weight");
      proj_k_ = std::make_unique<P2>(unif({Dk, d}), "interleaved_key_projections.shared.W_v.weight");
    }
    if constexpr (V::residual)
      gamma_ = std::make_unique<P1>(Tensor<T, 1, D>::full(Shape<1>{L}, T(0.1)), "interleaved_lambdas");
    lm_head_ = std::make_unique<P2>(normal({Vp, d}, T(0.001)), "lm_head.weight");
    resid_lambdas_ = std::make_unique<P1>(Tensor<T, 1, D>::full(Shape<1>{L}, T(1)), "resid_lambdas");
    x0_lambdas_ = std::make_unique<P1>(Tensor<T, 1, D>::full(Shape<1>{L}, T(0.1)), "x0_lambdas");
  }

  const ModelConfig& config() const noexcept { return cfg_; }

  /// The parameter roster: every parameter once, in a fixed order (the checkpoint's), with what it
  /// is. f(p, role) with p a P1& or P2& (name via p.name()). Counts, the FLOP count, the
  /// optimizer groups (train/optimizer_groups.hpp) and checkpoints all read this one list.
  template <class F>
  void for_each_param_role(F&& f) const {
    using R = ParamRole;
    f(*wte_, R::Embedding);
    for (const Block& b : blocks_) {
      f(*b.c_q, R::Matrix), f(*b.c_k, R::Matrix), f(*b.c_v, R::Matrix), f(*b.c_proj, R::Matrix);
      if (b.ve_gate) f(*b.ve_gate, R::Matrix);
      if (b.triple_gate) f(*b.triple_gate, R::Matrix);
      f(*b.c_fc, R::Matrix), f(*b.mlp_proj, R::Matrix);
    }
    f(*lm_head_, R::Unembedding);
    f(*resid_lambdas_, R::ResidLambda), f(*x0_lambdas_, R::X0Lambda);
    if (gamma_) f(*gamma_, R::MemoryGain);
    for (const Block& b : blocks_)
      if (b.value_embed) f(*b.value_embed, R::Embedding);
    for (const Block& b : blocks_)
      if (b.proj_v) f(*b.proj_v, R::Matrix), f(*b.proj_k, R::Matrix);
    if (proj_v_) f(*proj_v_, R::Matrix), f(*proj_k_, R::Matrix);
  }
  /// Every parameter in the roster's order: f(P1&) or f(P2&).
  template <class F>
  void for_each_param(F&& f) const {
    for_each_param_role([&](auto& p, ParamRole) { f(p); });
  }
  /// Total number of parameter values (padding rows included).
  index_t num_params() const {
    index_t n = 0;
    for_each_param([&](auto& p) { n += p.shape().numel(); });
    return n;
  }
  /// N_mm of spec §10: parameters in matrix multiplies (all but wte, VE tables and scalars).
  index_t num_matmul_params() const {
    index_t n = 0;
    for_each_param_role([&](auto& p, ParamRole r) {
      if (in_matmul(r)) n += p.shape().numel();
    });
    return n;
  }
  /// Training FLOPs per token of one pass (spec §10): 6 N_mm + sum_l 12 H Dh min(w_l, T).
  double flops_per_token() const {
    double f = 6.0 * static_cast<double>(num_matmul_params());
    for (index_t l = 0; l < cfg_.n_layer; ++l)
      f += 12.0 * static_cast<double>(cfg_.n_head * cfg_.head_dim()) *
           static_cast<double>(std::min(cfg_.window(l), cfg_.sequence_len));
    return f;
  }
  void zero_grad() const {
    for_each_param([](auto& p) { p.zero_grad(); });
  }

  P2& wte() const { return *wte_; }
  P2& lm_head() const { return *lm_head_; }
  P1& resid_lambdas() const { return *resid_lambdas_; }
  P1& x0_lambdas() const { return *x0_lambdas_; }
  /// gamma (Residual/Both; nullptr otherwise).
  P1* gamma() const { return gamma_.get(); }
  /// Shared P_k, P_v (KV/Both with Shared projections; nullptr otherwise).
  P2* proj_k() const { return proj_k_.get(); }
  P2* proj_v() const { return proj_v_.get(); }
  const std::vector<Block>& blocks() const { return blocks_; }

  /// How a layer attends: (layer, q (B,Tq,H,Dh), k, v (B,Tq,Hkv,Dh)) -> (B,Tq,H,Dh).
  using Attend = std::function<Var4(index_t, const Var4&, const Var4&, const Var4&)>;

  /// Optional per-layer observer of a KV/Both pass (spec §4.2's kv_refresh): (layer, g_rec
  /// (B,Tq,Hkv,1), kpre (B,Tq,Hkv,Dh)), where g_rec is the recurrent gate and kpre the gated key
  /// before RoPE and QK-norm (g_loc k_loc, plus g_rec k_rec with memory). Both stay in the graph.
  /// Never called for the None/Residual variants.
  using Observe = std::function<void(index_t, const Var4&, const Var4&)>;

  /// One pass: final normed states h (B, Tq, d) and the memory source states s (h itself for
  /// FinalSource, N(x after block l) for BlockSource<l>) of tokens ids (B, Tq) whose RoPE rows are
  /// `rope`, with memory m~ (B, Tq, d) (nullptr: zero memory; the gates still apply, spec §3.2).
  /// `observe` (optional) sees each layer's g_rec and pre-RoPE key; without it nothing extra runs.
  struct Pass {
    Var3 h, source;
  };
  Pass forward(const Ids& ids, const ad::RopeTable<T, D>& rope, const Attend& attend, const Var3* memory = nullptr,
               const Observe* observe = nullptr) const {
    const ad::TokenIds<D> tok(ids, cfg_.padded_vocab());  // checked once for every lookup
    return forward(tok, rope, attend, memory, observe);
  }
  /// The same with prepared ids (see ad::TokenIds).
  Pass forward(const ad::TokenIds<D>& tok, const ad::RopeTable<T, D>& rope, const Attend& attend,
               const Var3* memory = nullptr, const Observe* observe = nullptr) const {
    const Ids& ids = tok.ids();
    Var3 x = ad::rmsnorm(ad::embedding(tok, wte_->var()));  // norm after the embedding
    const Var3 x0 = x;
    const index_t B = ids.shape()[0], Tq = ids.shape()[1];
    Var4 krec, vrec;  // Shared projections of the memory: computed once per pass
    if constexpr (V::kv && V::projection == Projection::Shared) {
      if (memory) {
        const Shape<4> s4{B, Tq, cfg_.n_kv_head, cfg_.head_dim()};
        krec = ad::reshape(ad::linear(*memory, proj_k_->var()), s4);
        vrec = ad::reshape(ad::linear(*memory, proj_v_->var()), s4);
      }
    }
    Pass out;
    for (index_t l = 0; l < cfg_.n_layer; ++l) {
      x = block(l, x, x0, tok, rope, attend, memory, krec, vrec, observe);
      if (l == V::source_layer) out.source = ad::rmsnorm(x);
    }
    out.h = ad::rmsnorm(x);
    if (V::source_layer < 0) out.source = out.h;
    return out;
  }
  /// Final normed hidden states h (B, Tq, d) with zero memory.
  Var3 hidden(const Ids& ids, const ad::RopeTable<T, D>& rope, const Attend& attend) const {
    return forward(ids, rope, attend).h;
  }

  /// Standard attention over all Tq positions of the row (positions 0..Tq-1).
  Attend standard_attend(const Tensor<index_t, 1, D>& qpos) const {
    return [this, &qpos](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      return ad::attention(q, k, v, qpos, cfg_.window(l));
    };
  }
  /// The same with positions whose host copy is known (no wait for the device per layer).
  Attend standard_attend(const IndexList<D>& qpos) const {
    return [this, &qpos](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      return ad::attention(q, k, v, qpos, cfg_.window(l));
    };
  }

  /// Raw (uncapped) logits z = lm_head h: (B, Tq, d) -> (B, Tq, Vp).
  Var3 head(const Var3& h) const { return ad::linear(h, lm_head_->var()); }

  /// The Standard forward and loss of inputs/targets (B, T): mean cross-entropy of the soft-capped
  /// logits over non-ignored targets (-1), plus per-token nats (for bits per byte).
  ad::CrossEntropy<T, D> loss(const Ids& inputs, const Ids& targets) const {
    const index_t B = inputs.shape()[0], Tt = inputs.shape()[1];
    check(targets.shape() == inputs.shape(), "gpt.loss", "inputs ", inputs.shape(), " vs targets ", targets.shape());
    check(Tt <= cfg_.sequence_len, "gpt.loss", "sequence length ", Tt, " exceeds the model's sequence_len ",
          cfg_.sequence_len);
    const auto qpos = IndexList<D>::range(0, Tt);
    const auto rope = ad::RopeTable<T, D>::make(qpos, cfg_.head_dim(), cfg_.rope_bf16_tables);
    const Var3 z = head(hidden(inputs, rope, standard_attend(qpos)));
    const Tensor<index_t, 1, D> tg(targets.view().template reshape<1>(Shape<1>{B * Tt}));
    return ad::cross_entropy(ad::reshape(z, Shape<2>{B * Tt, cfg_.padded_vocab()}), tg,
                             static_cast<T>(cfg_.logit_softcap), cfg_.vocab_size);
  }

 private:
  Var3 block(index_t l, const Var3& xin, const Var3& x0, const ad::TokenIds<D>& tok, const ad::RopeTable<T, D>& rope,
             const Attend& attend, const Var3* memory, const Var4& krec_shared, const Var4& vrec_shared,
             const Observe* observe) const {
    const Block& b = blocks_[static_cast<std::size_t>(l)];
    const index_t B = tok.ids().shape()[0], Tq = tok.ids().shape()[1], H = cfg_.n_head, Hkv = cfg_.n_kv_head,
                  Dh = cfg_.head_dim(), d = cfg_.n_embd;
    Var3 x = model_detail::lambda_mix(xin, x0, resid_lambdas_->var(), x0_lambdas_->var(), l, cfg_.use_resid_lambdas,
                                      cfg_.use_x0_residual);
    if constexpr (V::residual) {  // x = x + gamma_l m
      if (memory) x = model_detail::scaled_add(x, *memory, gamma_->var(), l);
    }
    const Var3 u = ad::rmsnorm(x);
    Var4 q = ad::reshape(ad::linear(u, b.c_q->var()), Shape<4>{B, Tq, H, Dh});
    Var4 k = ad::reshape(ad::linear(u, b.c_k->var()), Shape<4>{B, Tq, Hkv, Dh});
    Var4 v = ad::reshape(ad::linear(u, b.c_v->var()), Shape<4>{B, Tq, Hkv, Dh});
    const index_t c = cfg_.gate_channels();
    if constexpr (V::kv) {  // spec §3.2 steps 4-6: triple gate, recurrent K/V, value embedding
      const Var3 gin = c == d ? u : ad::slice(u, 2, 0, c);
      const Var3 g = ad::gate2(ad::linear(gin, b.triple_gate->var()));  // (B, Tq, 3 Hkv)
      const Shape<4> gs{B, Tq, Hkv, 1};
      const Var4 g_loc = ad::reshape(ad::slice(g, 2, 0, Hkv), gs);
      const Var4 g_ve = ad::reshape(ad::slice(g, 2, 2 * Hkv, 3 * Hkv), gs);
      const Var4 e = ad::reshape(ad::embedding(tok, b.value_embed->var()), Shape<4>{B, Tq, Hkv, Dh});
      k = g_loc * k;
      v = g_loc * v;
      Var4 g_rec;
      if (memory || observe) g_rec = ad::reshape(ad::slice(g, 2, Hkv, 2 * Hkv), gs);
      if (memory) {
        Var4 krec = krec_shared, vrec = vrec_shared;
        if constexpr (V::projection == Projection::Layerwise) {
          krec = ad::reshape(ad::linear(*memory, b.proj_k->var()), Shape<4>{B, Tq, Hkv, Dh});
          vrec = ad::reshape(ad::linear(*memory, b.proj_v->var()), Shape<4>{B, Tq, Hkv, Dh});
        }
        k = k + g_rec * krec;
        v = v + g_rec * vrec;
      }
      v = v + g_ve * e;
      if (observe) (*observe)(l, g_rec, k);  // k: pre-RoPE, pre-norm (kv_refresh's kpre)
    } else if (b.value_embed) {              // v += 2 sigmoid(W_g u[0:c]) (per KV head) * E_l[tok]
      const Var3 gin = c == d ? u : ad::slice(u, 2, 0, c);
      const Var3 g = ad::gate2(ad::linear(gin, b.ve_gate->var()));  // (B, Tq, Hkv)
      const Var4 e = ad::reshape(ad::embedding(tok, b.value_embed->var()), Shape<4>{B, Tq, Hkv, Dh});
      v = v + ad::reshape(g, Shape<4>{B, Tq, Hkv, 1}) * e;
    }
    q = ad::rope_rmsnorm(q, rope);  // QK-norm after RoPE, one fused op
    k = ad::rope_rmsnorm(k, rope);
    const Var4 y = attend(l, q, k, v);
    x = x + ad::linear(ad::reshape(y, Shape<3>{B, Tq, H * Dh}), b.c_proj->var());
    x = x + ad::linear(ad::relu2(ad::linear(ad::rmsnorm(x), b.c_fc->var())), b.mlp_proj->var());
    return x;
  }

  ModelConfig cfg_;
  std::unique_ptr<P2> wte_, lm_head_;
  std::unique_ptr<P1> resid_lambdas_, x0_lambdas_, gamma_;
  std::unique_ptr<P2> proj_k_, proj_v_;
  std::vector<Block> blocks_;
};

/// The baseline GPT (Injection::None).
template <class T = float, Device D = cpu::Device>
using GPT = Model<variants::Baseline, T, D>;

}  // namespace v0
}  // namespace lrt
