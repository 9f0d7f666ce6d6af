// lrt/model/gpt.hpp: the model of LRT-SPEC §2-3 for every variant (Variant, variants::*,
// Model<V, T, D>): the nanochat-style GPT backbone and the LRT memory wiring; parameters with the release's names and
// shapes, its initialisation, the differentiable forward and the loss. The forward is model/block.hpp's
// model_forward, run here on the tape (TapeExec) by every autodiff path (training, evaluation, Decoder): the
// caller passes how a layer attends (all positions at once, or one new position against a cache). LeanDecoder runs
// the same function directly (decode/lean.hpp). Shapes: B batch, T time, d width, H heads, Hkv KV heads, Dh
// head dim, D = Hkv*Dh, Vp padded vocab.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../autodiff/graph.hpp"
#include "../autodiff/nn.hpp"
#include "../autodiff/ops.hpp"
#include "block.hpp"
#include "config.hpp"
#include "logits.hpp"
#include "variant.hpp"
#include "weight_table.hpp"

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

/// How a layer attends: (layer, q (B,Tq,H,Dh), k, v (B,Tq,Hkv,Dh)) -> (B,Tq,H,Dh).
template <class T, Device D>
using AttendFn =
    std::function<ad::Var<T, 4, D>(index_t, const ad::Var<T, 4, D>&, const ad::Var<T, 4, D>&, const ad::Var<T, 4, D>&)>;
/// kv_refresh's per-layer observer (Model::Observe).
template <class T, Device D>
using ObserveFn = std::function<void(index_t, const ad::Var<T, 4, D>&, const ad::Var<T, 4, D>&)>;

/// The tape execution of model/block.hpp: each op records an autodiff node (the Buf is ignored).
/// Rows (B, Tq, C), Heads and Gate (B, Tq, heads, Dh or 1), Coef a (L) vector and a layer.
template <class T, Device D>
struct TapeExec {
  using Rows = ad::Var<T, 3, D>;
  using Heads = ad::Var<T, 4, D>;
  using Gate = ad::Var<T, 4, D>;
  struct Coef {
    ad::Var<T, 1, D> vec;
    index_t l;
  };
  using P1 = ad::Param<T, 1, D>;
  using P2 = ad::Param<T, 2, D>;

  const ModelConfig& cfg;
  const ad::TokenIds<D>& tok;
  const ad::RopeTable<T, D>& rope;
  const AttendFn<T, D>& attend_fn;
  const ObserveFn<T, D>* observer;
  const P1 *resid, *x0l;
  index_t B, Tq;

  const ModelConfig& config() const noexcept { return cfg; }
  static bool has(const P2* w) noexcept { return w != nullptr; }
  bool observing() const noexcept { return observer != nullptr; }
  Rows rows_of(const P2* w, Buf) const { return ad::embedding(tok, w->var()); }
  template <class W>
  static const P1* other_vector(const W& w, std::string_view name) {
    for (const auto& o : w.other)
      if (o.name == name && o.p1) return o.p1;
    throw_error("model", "no vector tensor '" + std::string(name) + "' among the variant's own");
  }
  static Rows rmsnorm(const Rows& x, Buf) { return ad::rmsnorm(x); }
  static Rows copy(const Rows& x, Buf) { return x; }
  Rows lambda_mix(const Rows& x, const Rows& x0, index_t l, Buf) const {
    return model_detail::lambda_mix(x, x0, resid->var(), x0l->var(), l, cfg.use_resid_lambdas, cfg.use_x0_residual);
  }
  static Coef coef(const P1* v, index_t l) { return {v->var(), l}; }
  static Coef coef_mul(const Coef& a, const Coef& b) { return {a.vec * b.vec, a.l}; }
  static Coef coef_sigmoid(const Coef& a) { return {ad::sigmoid(a.vec), a.l}; }
  static Rows scaled_add(const Rows& x, const Rows& m, const Coef& g, Buf) {
    return model_detail::scaled_add(x, m, g.vec, g.l);
  }
  static Rows linear(const Rows& x, const P2* w, Buf) { return ad::linear(x, w->var()); }
  Heads heads(const Rows& x, index_t count) const {
    return ad::reshape(x, Shape<4>{B, Tq, count, x.shape()[2] / count});
  }
  static Rows flat(const Heads& y) {
    const auto s = y.shape();
    return ad::reshape(y, Shape<3>{s[0], s[1], s[2] * s[3]});
  }
  static Rows first_channels(const Rows& u, index_t c) { return c == u.shape()[2] ? u : ad::slice(u, 2, 0, c); }
  static Rows gate2(const Rows& z, Buf) { return ad::gate2(z); }
  Gate gate(const Rows& g, index_t j, index_t Hkv) const {
    const Shape<4> gs{B, Tq, Hkv, 1};
    return ad::reshape(g.shape()[2] == Hkv ? g : ad::slice(g, 2, j * Hkv, (j + 1) * Hkv), gs);
  }
  static Heads head_mul(const Gate& g, const Heads& x, Buf) { return g * x; }
  template <class X>
  static X add(const X& a, const X& b, Buf) {
    return a + b;
  }
  Heads value_embedding(const P2* w, Buf) const {
    return ad::reshape(ad::embedding(tok, w->var()), Shape<4>{B, Tq, cfg.n_kv_head, cfg.head_dim()});
  }
  Heads rope_norm(const Heads& x, Buf) const { return ad::rope_rmsnorm(x, rope); }
  Heads attend(index_t l, const Heads& q, const Heads& k, const Heads& v, Buf) const { return attend_fn(l, q, k, v); }
  static Rows relu2(const Rows& x, Buf) { return ad::relu2(x); }
  void observe(index_t l, const Gate& g_rec, const Heads& kpre) const {
    if (observer) (*observer)(l, g_rec, kpre);
  }
};
}  // namespace model_detail

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

  /// One block's parameters (null where the variant or layer has none); fields as WeightSlot names them.
  struct Block {
    P2 *c_q = nullptr, *c_k = nullptr, *c_v = nullptr, *c_proj = nullptr, *c_fc = nullptr, *mlp_proj = nullptr;
    P2* ve_gate = nullptr;                    // None/Residual: VE layers only
    P2* value_embed = nullptr;                // VE layers (every layer for KV/Both)
    P2* triple_gate = nullptr;                // KV/Both: G_l (3 Hkv, c), rows local, rec, ve
    P2 *proj_k = nullptr, *proj_v = nullptr;  // KV/Both, Layerwise: P_k, P_v (D, d)
  };

  /// A model with the release's initialisation drawn from lrt's Philox stream `seed`: every tensor
  /// of the parameter table (model/weight_table.hpp), drawn in its declaration order.
  explicit Model(ModelConfig cfg, std::uint64_t seed = 0) : cfg_(std::move(cfg)) {
    if constexpr (V::kv) cfg_.ve_layout = VELayout::Every;  // KV/Both: value embeddings on every layer
    cfg_.validate();
    check(V::source_layer < cfg_.n_layer, "model", "source layer ", V::source_layer, " is beyond the last block (",
          cfg_.n_layer, " layers)");
    check(cfg_.mem_offset >= 1, "model", "the memory offset k must be >= 1, got ", cfg_.mem_offset);
    Generator g(seed);
    w_.layers.resize(static_cast<std::size_t>(cfg_.n_layer));
    for (WeightSpec& s : lrt::weight_table<V>(cfg_, WeightOrder::Init)) {
      Param p{std::move(s), nullptr, nullptr};
      if (p.spec.is_vector())
        p.p1 = std::make_unique<P1>(initial<1>(g, p.spec, Shape<1>{p.spec.rows}), p.spec.name);
      else
        p.p2 = std::make_unique<P2>(initial<2>(g, p.spec, Shape<2>{p.spec.rows, p.spec.cols}), p.spec.name);
      if (!visit_field(
              w_, p.spec, [&](P2*& f) { f = p.p2.get(); }, [&](P1*& f) { f = p.p1.get(); }))
        w_.other.push_back({p.spec.name, p.p1.get(), p.p2.get()});
      params_.push_back(std::move(p));
    }
    std::stable_sort(params_.begin(), params_.end(),
                     [](const Param& a, const Param& b) { return before_in_file(a.spec, b.spec); });
  }

  const ModelConfig& config() const noexcept { return cfg_; }

  /// The parameter roster: every tensor of the parameter table once, in file order (the
  /// checkpoint's), with its role. f(p, role) with p a P1& or P2& (name via p.name()). Counts, the
  /// FLOP count, the optimizer groups (train/optimizer_groups.hpp) and checkpoints all read it.
  template <class F>
  void for_each_param_role(F&& f) const {
    for (const Param& p : params_) {
      if (p.p1)
        f(*p.p1, p.spec.role);
      else
        f(*p.p2, p.spec.role);
    }
  }
  /// The same with each tensor's entry of the table: f(p, const WeightSpec&).
  template <class F>
  void for_each_param_spec(F&& f) const {
    for (const Param& p : params_) {
      if (p.p1)
        f(*p.p1, p.spec);
      else
        f(*p.p2, p.spec);
    }
  }
  /// The model's parameter table (file order).
  WeightTable weight_table() const {
    WeightTable t;
    for (const Param& p : params_) t.push_back(p.spec);
    return t;
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

  P2& wte() const { return *w_.wte; }
  P2& lm_head() const { return *w_.lm_head; }
  P1& resid_lambdas() const { return *w_.resid_lambdas; }
  P1& x0_lambdas() const { return *w_.x0_lambdas; }
  /// gamma (Residual/Both; nullptr otherwise).
  P1* gamma() const { return w_.gamma; }
  /// Shared P_k, P_v (KV/Both with Shared projections; nullptr otherwise).
  P2* proj_k() const { return w_.proj_k; }
  P2* proj_v() const { return w_.proj_v; }
  const std::vector<Block>& blocks() const { return w_.layers; }

  /// How a layer attends: (layer, q (B,Tq,H,Dh), k, v (B,Tq,Hkv,Dh)) -> (B,Tq,H,Dh).
  using Attend = model_detail::AttendFn<T, D>;

  /// Optional per-layer observer of a KV/Both pass (spec §4.2's kv_refresh): (layer, g_rec
  /// (B,Tq,Hkv,1), kpre (B,Tq,Hkv,Dh)), where g_rec is the recurrent gate and kpre the gated key
  /// before RoPE and QK-norm (g_loc k_loc, plus g_rec k_rec with memory). Both stay in the graph.
  /// Never called for the None/Residual variants.
  using Observe = model_detail::ObserveFn<T, D>;

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
    const index_t B = tok.ids().shape()[0], Tq = tok.ids().shape()[1];
    model_detail::TapeExec<T, D> e{cfg_, tok, rope, attend, observe, w_.resid_lambdas, w_.x0_lambdas, B, Tq};
    const auto r = model_forward<V>(e, w_, memory);
    return Pass{r.h, r.source};
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
  Var3 head(const Var3& h) const { return ad::linear(h, w_.lm_head->var()); }

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
  /// A tensor of the table with its parameter (p1 for a vector, p2 for a matrix).
  struct Param {
    WeightSpec spec;
    std::unique_ptr<P1> p1;
    std::unique_ptr<P2> p2;
  };
  /// The fields a WeightSlot names (visit_field, model/weight_table.hpp), pointing into params_.
  struct Weights {
    P2 *wte = nullptr, *lm_head = nullptr;
    P2 *proj_k = nullptr, *proj_v = nullptr;  // KV/Both with Shared projections
    P1 *resid_lambdas = nullptr, *x0_lambdas = nullptr, *gamma = nullptr;
    std::vector<Block> layers;
    struct Other {  // a variant's own tensors (WeightSlot::other), as LeanWeights::other
      std::string name;
      P1* p1;
      P2* p2;
    };
    std::vector<Other> other;
  };
  /// The initial values of tensor s (shape sh) from the stream g.
  template <int R>
  static Tensor<T, R, D> initial(Generator& g, const WeightSpec& s, Shape<R> sh) {
    const T v = static_cast<T>(s.init.value);
    switch (s.init.kind) {
      case WeightInit::Kind::Normal:
        return Tensor<T, R, D>(g.normal<T>(sh, T(0), v));
      case WeightInit::Kind::Uniform:
        return Tensor<T, R, D>(g.uniform<T>(sh, -v, v));
      case WeightInit::Kind::Full:
        return Tensor<T, R, D>::full(sh, v);
      case WeightInit::Kind::Zeros:
        break;
    }
    return Tensor<T, R, D>(sh);
  }

  ModelConfig cfg_;
  std::vector<Param> params_;  // file order
  Weights w_;
};

/// The baseline GPT (Injection::None).
template <class T = float, Device D = cpu::Device>
using GPT = Model<variants::Baseline, T, D>;

#if defined(LRT_COMPILED_PAIRS)  // compiled in the runtime library (variant.hpp, LRT_COMPILED_VARIANTS)
#define LRT_DETAIL_EXTERN_MODEL(V) extern template class LRT_API Model<V>;
LRT_COMPILED_VARIANTS(LRT_DETAIL_EXTERN_MODEL)
#undef LRT_DETAIL_EXTERN_MODEL
#endif

}  // namespace v0
}  // namespace lrt
