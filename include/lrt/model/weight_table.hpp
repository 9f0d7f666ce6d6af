// lrt/model/weight_table.hpp: the model's parameters, written once. Each tensor of a model of a
// given config and variant structure: its name in the release's layout (spec §9), its shape, its
// role, its initialisation, and whether lrt-quantize packs it. Everything that needs to know what
// a model holds reads this table: Model's constructor and parameter roster (model/gpt.hpp), and
// through the roster save_model/load_weights, make_optimizers and the FLOP count; the checkpoint
// loader's checks (model/checkpoint_file.hpp); lrt-quantize's choice of matrices
// (io/quantize.hpp); the lean decoder's weights, file views and validation (decode/lean*.hpp). No
// other header spells a tensor name (tests/tree/tensor_names.cpp checks that).
//
// The structure is a runtime value, so that one table serves every variant; a variant type may add
// tensors of its own (V::add_weights, see weight_table<V>), which then reach the model, its
// checkpoints, its optimizers, the quantizer and the lean weights like the library's own.
//
// Two orders. The table is declared in initialisation order: Model draws the random tensors from
// its Philox stream in this order (wte; per layer c_q, c_k, c_v, c_fc, the value embedding and the
// memory projections; shared projections; lm_head). Files, the parameter roster and the
// optimizers use file order, the release's: the same entries grouped by file_section(role), each
// group keeping declaration order.
#pragma once

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "config.hpp"
#include "variant_structure.hpp"

namespace lrt {
inline namespace v0 {

/// What a parameter is: its optimizer (spec §8, train/optimizer_groups.hpp) and whether it is a
/// weight of a matrix multiply (the counts of §10).
enum class ParamRole {
  Embedding,       // the token table wte: AdamW at the embedding lr, no matmul
  Unembedding,     // lm_head: AdamW at the unembedding lr, a matmul
  Matrix,          // attention and MLP matrices: Muon, matmuls
  Gate,            // value-embedding and triple gates: Muon, matmuls
  Projection,      // the memory projections P_k, P_v (KV/Both): Muon, matmuls
  ValueEmbedding,  // value-embedding tables E_l: AdamW at the embedding lr, no matmul
  ResidLambda,     // resid_lambdas (alpha_l): AdamW at the residual-lambda lr
  X0Lambda,        // x0_lambdas (beta_l): AdamW at the scalar lr, beta1 0.96
  MemoryGain,      // gamma_l (Residual/Both): AdamW at the scalar lr
};
inline std::string_view to_string(ParamRole r) {
  switch (r) {
    case ParamRole::Embedding:
      return "embedding";
    case ParamRole::Unembedding:
      return "unembedding";
    case ParamRole::Matrix:
      return "matrix";
    case ParamRole::Gate:
      return "gate";
    case ParamRole::Projection:
      return "projection";
    case ParamRole::ValueEmbedding:
      return "value_embedding";
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
constexpr bool in_matmul(ParamRole r) {
  return r == ParamRole::Unembedding || r == ParamRole::Matrix || r == ParamRole::Gate || r == ParamRole::Projection;
}
/// Where tensors of role r lie in file order (the release's parameter order): wte; the blocks'
/// matrices and gates, layer by layer; lm_head; the per-layer scalars; the value embeddings; the
/// memory projections.
constexpr int file_section(ParamRole r) {
  switch (r) {
    case ParamRole::Embedding:
      return 0;
    case ParamRole::Matrix:
    case ParamRole::Gate:
      return 1;
    case ParamRole::Unembedding:
      return 2;
    case ParamRole::ResidLambda:
      return 3;
    case ParamRole::X0Lambda:
      return 4;
    case ParamRole::MemoryGain:
      return 5;
    case ParamRole::ValueEmbedding:
      return 6;
    case ParamRole::Projection:
      return 7;
  }
  return 8;
}

/// Which field of a weights struct a tensor fills (visit_field below). `other`: a tensor a variant
/// adds (V::add_weights), which has no field of the library's.
enum class WeightSlot {
  wte,
  c_q,
  c_k,
  c_v,
  c_proj,
  c_fc,
  mlp_proj,
  triple_gate,  // KV/Both: (3 Hkv, c)
  ve_gate,      // None/Residual value-embedding layers: (Hkv, c)
  value_embed,  // (Vp, D)
  proj_v,       // KV/Both: shared (layer -1) or per layer
  proj_k,       // KV/Both: shared (layer -1) or per layer
  gamma,        // Residual/Both: the memory gains (L)
  lm_head,
  resid_lambdas,  // (L)
  x0_lambdas,     // (L)
  other,
};

/// The field's name (LeanWeights, LeanLayerWeights and Model::Block name their fields so).
inline std::string_view to_string(WeightSlot s) {
  switch (s) {
    case WeightSlot::wte:
      return "wte";
    case WeightSlot::c_q:
      return "c_q";
    case WeightSlot::c_k:
      return "c_k";
    case WeightSlot::c_v:
      return "c_v";
    case WeightSlot::c_proj:
      return "c_proj";
    case WeightSlot::c_fc:
      return "c_fc";
    case WeightSlot::mlp_proj:
      return "mlp_proj";
    case WeightSlot::triple_gate:
      return "triple_gate";
    case WeightSlot::ve_gate:
      return "ve_gate";
    case WeightSlot::value_embed:
      return "value_embed";
    case WeightSlot::proj_v:
      return "proj_v";
    case WeightSlot::proj_k:
      return "proj_k";
    case WeightSlot::gamma:
      return "gamma";
    case WeightSlot::lm_head:
      return "lm_head";
    case WeightSlot::resid_lambdas:
      return "resid_lambdas";
    case WeightSlot::x0_lambdas:
      return "x0_lambdas";
    case WeightSlot::other:
      return "other";
  }
  return "?";
}

/// How a tensor starts (the release's initialisation, drawn from lrt's Philox stream).
struct WeightInit {
  enum class Kind { Zeros, Full, Normal, Uniform };
  Kind kind = Kind::Zeros;
  double value = 0;  // Full: the value; Normal: the standard deviation; Uniform: a in U(-a, a)
};

/// One tensor: name, layer (-1: not a block's), shape (cols 0 for a vector of `rows` entries),
/// role, initialisation, and whether lrt-quantize packs it (a product's matrix; not an embedding
/// table or a gate).
struct WeightSpec {
  std::string name;
  index_t layer = -1;
  WeightSlot slot = WeightSlot::other;
  ParamRole role = ParamRole::Matrix;
  index_t rows = 0, cols = 0;
  WeightInit init{};
  bool packable = false;
  bool is_vector() const { return cols == 0; }
};

/// A model's tensors (in file order unless said otherwise).
using WeightTable = std::vector<WeightSpec>;

namespace weight_detail {
/// The library's tensors of structure s and config c, appended to t in declaration order.
inline void declare(const ModelConfig& c, const VariantStructure& s, WeightTable& t) {
  const index_t L = c.n_layer, d = c.n_embd, Vp = c.padded_vocab(), D = c.kv_dim();
  const index_t hd = c.n_head * c.head_dim(), gc = c.gate_channels();
  const bool kv = s.injection == Injection::KV || s.injection == Injection::Both;
  const bool residual = s.injection == Injection::Residual || s.injection == Injection::Both;
  const bool layerwise = kv && s.projection == Projection::Layerwise;
  using K = WeightInit::Kind;
  using R = ParamRole;
  const WeightInit zeros{K::Zeros, 0}, uniform{K::Uniform, std::sqrt(3.0 / static_cast<double>(d))};
  const auto add = [&](std::string name, index_t layer, WeightSlot slot, R role, index_t rows, index_t cols,
                       WeightInit init, bool packable) {
    t.push_back(WeightSpec{std::move(name), layer, slot, role, rows, cols, init, packable});
  };
  add("transformer.wte.weight", -1, WeightSlot::wte, R::Embedding, Vp, d, {K::Normal, 1.0}, false);
  for (index_t l = 0; l < L; ++l) {
    const std::string n = std::to_string(l), p = "transformer.h." + n + ".";
    add(p + "attn.c_q.weight", l, WeightSlot::c_q, R::Matrix, hd, d, uniform, true);
    add(p + "attn.c_k.weight", l, WeightSlot::c_k, R::Matrix, D, d, uniform, true);
    add(p + "attn.c_v.weight", l, WeightSlot::c_v, R::Matrix, D, d, uniform, true);
    add(p + "attn.c_proj.weight", l, WeightSlot::c_proj, R::Matrix, d, hd, zeros, true);
    if (kv)
      add(p + "attn.triple_gate.weight", l, WeightSlot::triple_gate, R::Gate, 3 * c.n_kv_head, gc, zeros, false);
    else if (c.has_ve(l))
      add(p + "attn.ve_gate.weight", l, WeightSlot::ve_gate, R::Gate, c.n_kv_head, gc, zeros, false);
    add(p + "mlp.c_fc.weight", l, WeightSlot::c_fc, R::Matrix, 4 * d, d, uniform, true);
    add(p + "mlp.c_proj.weight", l, WeightSlot::mlp_proj, R::Matrix, d, 4 * d, zeros, true);
    if (kv) {
      add("interleaved_init_value_embeds." + n + ".weight", l, WeightSlot::value_embed, R::ValueEmbedding, Vp, D,
          uniform, false);
      if (layerwise) {
        add("interleaved_projections." + n + ".W_v.weight", l, WeightSlot::proj_v, R::Projection, D, d, uniform, true);
        add("interleaved_key_projections." + n + ".W_v.weight", l, WeightSlot::proj_k, R::Projection, D, d, uniform,
            true);
      }
    } else if (c.has_ve(l)) {
      add("value_embeds." + n + ".weight", l, WeightSlot::value_embed, R::ValueEmbedding, Vp, D, uniform, false);
    }
  }
  if (kv && !layerwise) {
    add("interleaved_projections.shared.W_v.weight", -1, WeightSlot::proj_v, R::Projection, D, d, uniform, true);
    add("interleaved_key_projections.shared.W_v.weight", -1, WeightSlot::proj_k, R::Projection, D, d, uniform, true);
  }
  if (residual) add("interleaved_lambdas", -1, WeightSlot::gamma, R::MemoryGain, L, 0, {K::Full, 0.1}, false);
  add("lm_head.weight", -1, WeightSlot::lm_head, R::Unembedding, Vp, d, {K::Normal, 0.001}, true);
  add("resid_lambdas", -1, WeightSlot::resid_lambdas, R::ResidLambda, L, 0, {K::Full, 1.0}, false);
  add("x0_lambdas", -1, WeightSlot::x0_lambdas, R::X0Lambda, L, 0, {K::Full, 0.1}, false);
}

/// Checks the tensors a variant added (after the library's `first`): each of slot `other`, with a
/// name no other tensor has and a shape.
inline void check_added(const WeightTable& t, std::size_t first, std::string_view variant) {
  std::set<std::string_view> names;
  for (const WeightSpec& s : t) {
    check(names.insert(s.name).second, "weight_table", "variant ", variant, ": two tensors are named '", s.name, "'");
  }
  for (std::size_t i = first; i < t.size(); ++i) {
    const WeightSpec& s = t[i];
    check(s.slot == WeightSlot::other, "weight_table", "variant ", variant, ": tensor '", s.name,
          "' it adds must have slot `other` (the library's slots are its own)");
    check(!s.name.empty() && s.rows >= 1 && s.cols >= 0, "weight_table", "variant ", variant, ": tensor '", s.name,
          "' needs a name and a shape (rows >= 1, cols >= 0), got (", s.rows, ", ", s.cols, ")");
    check(!s.packable || !s.is_vector(), "weight_table", "variant ", variant, ": tensor '", s.name,
          "' is a vector and cannot be packed");
  }
}
}  // namespace weight_detail

/// The order of a table.
enum class WeightOrder {
  File,  // the release's (save_model, the roster, the optimizers): grouped by file_section(role)
  Init,  // declaration order, in which Model draws the initial values
};

/// Whether a comes before b in file order (with a stable sort of a table in declaration order).
inline bool before_in_file(const WeightSpec& a, const WeightSpec& b) {
  return file_section(a.role) < file_section(b.role);
}

/// The tensors of a model of structure s and config c (the library's variants).
inline WeightTable weight_table(const ModelConfig& c, const VariantStructure& s,
                                WeightOrder order = WeightOrder::File) {
  WeightTable t;
  weight_detail::declare(c, s, t);
  if (order == WeightOrder::File) std::stable_sort(t.begin(), t.end(), before_in_file);
  return t;
}

/// A variant type that adds tensors of its own: `static void add_weights(const ModelConfig&,
/// WeightTable&)` appends WeightSpecs of slot `other` (a test-only variant does, in
/// tests/unit/model/test_weight_table.cpp).
template <class V>
concept AddsWeights = requires(const ModelConfig& c, WeightTable& t) {
  V::add_weights(c, t);
};

/// The tensors of a model of variant type V and config c: its structure's, and V's own.
template <class V>
WeightTable weight_table(const ModelConfig& c, WeightOrder order = WeightOrder::File) {
  WeightTable t;
  weight_detail::declare(c, structure_of<V>(), t);
  if constexpr (AddsWeights<V>) {
    const std::size_t first = t.size();
    V::add_weights(c, t);
    weight_detail::check_added(t, first, variant_name<V>());
  }
  if (order == WeightOrder::File) std::stable_sort(t.begin(), t.end(), before_in_file);
  return t;
}

/// The names of the tensors lrt-quantize packs.
inline std::set<std::string, std::less<>> packable_names(const WeightTable& t) {
  std::set<std::string, std::less<>> out;
  for (const WeightSpec& s : t)
    if (s.packable) out.insert(s.name);
  return out;
}

/// Hands the field of weights struct `w` that tensor s fills to mat (a matrix's field) or vec (a
/// vector's); returns false, calling neither, for a tensor of slot `other`. W has the fields of
/// LeanWeights (decode/lean.hpp): wte, lm_head, proj_k, proj_v (shared), resid_lambdas,
/// x0_lambdas, gamma, and layers[l] with c_q, c_k, c_v, c_proj, c_fc, mlp_proj, triple_gate,
/// ve_gate, value_embed, proj_k, proj_v; Model's (model/gpt.hpp) are named the same.
template <class W, class Mat, class Vec>
bool visit_field(W& w, const WeightSpec& s, Mat&& mat, Vec&& vec) {
  auto* b = s.layer >= 0 ? &w.layers[static_cast<std::size_t>(s.layer)] : nullptr;
  switch (s.slot) {
    case WeightSlot::wte:
      return mat(w.wte), true;
    case WeightSlot::lm_head:
      return mat(w.lm_head), true;
    case WeightSlot::c_q:
      return mat(b->c_q), true;
    case WeightSlot::c_k:
      return mat(b->c_k), true;
    case WeightSlot::c_v:
      return mat(b->c_v), true;
    case WeightSlot::c_proj:
      return mat(b->c_proj), true;
    case WeightSlot::c_fc:
      return mat(b->c_fc), true;
    case WeightSlot::mlp_proj:
      return mat(b->mlp_proj), true;
    case WeightSlot::triple_gate:
      return mat(b->triple_gate), true;
    case WeightSlot::ve_gate:
      return mat(b->ve_gate), true;
    case WeightSlot::value_embed:
      return mat(b->value_embed), true;
    case WeightSlot::proj_v:
      return mat(b ? b->proj_v : w.proj_v), true;
    case WeightSlot::proj_k:
      return mat(b ? b->proj_k : w.proj_k), true;
    case WeightSlot::gamma:
      return vec(w.gamma), true;
    case WeightSlot::resid_lambdas:
      return vec(w.resid_lambdas), true;
    case WeightSlot::x0_lambdas:
      return vec(w.x0_lambdas), true;
    case WeightSlot::other:
      break;
  }
  return false;
}

/// Calls f(slot, layer) for every field of a weights struct of L layers (see visit_field): the
/// whole model's (layer -1), then each layer's. What a table does not list stays empty.
template <class F>
void for_each_field(index_t L, F&& f) {
  using S = WeightSlot;
  for (S s : {S::wte, S::lm_head, S::proj_v, S::proj_k, S::gamma, S::resid_lambdas, S::x0_lambdas}) f(s, index_t{-1});
  for (index_t l = 0; l < L; ++l)
    for (S s : {S::c_q, S::c_k, S::c_v, S::c_proj, S::c_fc, S::mlp_proj, S::triple_gate, S::ve_gate, S::value_embed,
                S::proj_v, S::proj_k})
      f(s, l);
}

}  // namespace v0
}  // namespace lrt
