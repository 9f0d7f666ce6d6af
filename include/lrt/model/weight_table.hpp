// lrt/model/weight_table.hpp: the tensors a model of a given structure and config holds, by their
// checkpoint names (the release's layout, spec §9) and shapes, for code that has no model: the
// checkpoint loader's checks (model/checkpoint_file.hpp) and the lean decoder's file views
// (decode/lean_file.hpp). The structure is a runtime value, so that one loop serves every variant.
// tests/unit/model/test_checkpoint_file.cpp checks it against Model's parameters for every named variant.
#pragma once

#include <string>

#include "config.hpp"
#include "variant_structure.hpp"

namespace lrt {
inline namespace v0 {

/// Which weight of the model a tensor is (the lean decoder's field it fills).
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
};

/// One tensor: name, layer (-1: not a block's), shape (cols 0 for a vector of `rows` entries), and
/// whether it is a product's matrix (what lrt-quantize packs; not an embedding table or a gate).
struct WeightSpec {
  std::string name;
  index_t layer = -1;
  WeightSlot slot = WeightSlot::wte;
  index_t rows = 0, cols = 0;
  bool packable = false;
  bool is_vector() const { return cols == 0; }
};

/// Calls f(const WeightSpec&) for every tensor of a model of structure s and config c, in the
/// order save_model writes them.
template <class F>
void for_each_weight(const ModelConfig& c, const VariantStructure& s, F&& f) {
  const index_t L = c.n_layer, d = c.n_embd, Vp = c.padded_vocab(), D = c.kv_dim();
  const index_t hd = c.n_head * c.head_dim(), gc = c.gate_channels();
  const bool kv = s.injection == Injection::KV || s.injection == Injection::Both;
  const bool residual = s.injection == Injection::Residual || s.injection == Injection::Both;
  const bool layerwise = kv && s.projection == Projection::Layerwise;
  const auto mat = [&](std::string name, index_t layer, WeightSlot slot, index_t rows, index_t cols, bool packable) {
    f(WeightSpec{std::move(name), layer, slot, rows, cols, packable});
  };
  mat("transformer.wte.weight", -1, WeightSlot::wte, Vp, d, false);
  for (index_t l = 0; l < L; ++l) {
    const std::string n = std::to_string(l), p = "transformer.h." + n + ".";
    mat(p + "attn.c_q.weight", l, WeightSlot::c_q, hd, d, true);
    mat(p + "attn.c_k.weight", l, WeightSlot::c_k, D, d, true);
    mat(p + "attn.c_v.weight", l, WeightSlot::c_v, D, d, true);
    mat(p + "attn.c_proj.weight", l, WeightSlot::c_proj, d, hd, true);
    mat(p + "mlp.c_fc.weight", l, WeightSlot::c_fc, 4 * d, d, true);
    mat(p + "mlp.c_proj.weight", l, WeightSlot::mlp_proj, d, 4 * d, true);
    if (kv) {
      mat(p + "attn.triple_gate.weight", l, WeightSlot::triple_gate, 3 * c.n_kv_head, gc, false);
      mat("interleaved_init_value_embeds." + n + ".weight", l, WeightSlot::value_embed, Vp, D, false);
      if (layerwise) {
        mat("interleaved_projections." + n + ".W_v.weight", l, WeightSlot::proj_v, D, d, true);
        mat("interleaved_key_projections." + n + ".W_v.weight", l, WeightSlot::proj_k, D, d, true);
      }
    } else if (c.has_ve(l)) {
      mat(p + "attn.ve_gate.weight", l, WeightSlot::ve_gate, c.n_kv_head, gc, false);
      mat("value_embeds." + n + ".weight", l, WeightSlot::value_embed, Vp, D, false);
    }
  }
  if (kv && !layerwise) {
    mat("interleaved_projections.shared.W_v.weight", -1, WeightSlot::proj_v, D, d, true);
    mat("interleaved_key_projections.shared.W_v.weight", -1, WeightSlot::proj_k, D, d, true);
  }
  if (residual) mat("interleaved_lambdas", -1, WeightSlot::gamma, L, 0, false);
  mat("lm_head.weight", -1, WeightSlot::lm_head, Vp, d, true);
  mat("resid_lambdas", -1, WeightSlot::resid_lambdas, L, 0, false);
  mat("x0_lambdas", -1, WeightSlot::x0_lambdas, L, 0, false);
}

}  // namespace v0
}  // namespace lrt
