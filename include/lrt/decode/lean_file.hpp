// lrt/decode/lean_file.hpp: the lean decoder's weights (decode/lean.hpp) viewed in a checkpoint
// file, without the model: lean_file_weights<V>(reader, config) points every view into the file's
// bytes, so that a Reader over a mapped file (st::Reader::map, io/mapped_file.hpp) decodes with no
// copy of the weights: f32 values, int8 values with their f32 scales, and bf16 bits are read where
// they lie. The safetensors format does not align tensors; one that is not aligned for its type
// is copied into `spill` (one allocation, made here), and so is a float tensor stored in another
// float type (BF16, F16, F64: save_model's dtype), converted. Errors come back as a Status.
// for_each_lean_weight gives each tensor of the weight table (model/weight_table.hpp) the view
// it fills.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../core/status.hpp"
#include "../io/quantize.hpp"
#include "../io/safetensors.hpp"
#include "../model/weight_table.hpp"
#include "lean.hpp"

namespace lrt {
inline namespace v0 {

/// Calls mat(name, rows, cols, LeanMatrix<T>& view, packable) for every matrix of a V model of
/// config c and vec(name, count, const T*& values) for every vector, w's view of it as the last
/// argument (the tensors of for_each_weight, model/weight_table.hpp); w.layers is sized to the
/// config's layers first. packable: a product's matrix (what lrt-quantize packs).
template <class V, class T, class Mat, class Vec>
void for_each_lean_weight(const ModelConfig& c, LeanWeights<T>& w, Mat&& mat, Vec&& vec) {
  w.config = c;
  w.layers.assign(static_cast<std::size_t>(c.n_layer), {});
  for_each_weight(c, structure_of<V>(), [&](const WeightSpec& s) {
    LeanLayerWeights<T>* b = s.layer >= 0 ? &w.layers[static_cast<std::size_t>(s.layer)] : nullptr;
    const auto m = [&](LeanMatrix<T>& view) { mat(s.name, s.rows, s.cols, view, s.packable); };
    switch (s.slot) {
      case WeightSlot::wte:
        return m(w.wte);
      case WeightSlot::lm_head:
        return m(w.lm_head);
      case WeightSlot::c_q:
        return m(b->c_q);
      case WeightSlot::c_k:
        return m(b->c_k);
      case WeightSlot::c_v:
        return m(b->c_v);
      case WeightSlot::c_proj:
        return m(b->c_proj);
      case WeightSlot::c_fc:
        return m(b->c_fc);
      case WeightSlot::mlp_proj:
        return m(b->mlp_proj);
      case WeightSlot::triple_gate:
        return m(b->triple_gate);
      case WeightSlot::ve_gate:
        return m(b->ve_gate);
      case WeightSlot::value_embed:
        return m(b->value_embed);
      case WeightSlot::proj_v:
        return m(b ? b->proj_v : w.proj_v);
      case WeightSlot::proj_k:
        return m(b ? b->proj_k : w.proj_k);
      case WeightSlot::gamma:
        return vec(s.name, s.rows, w.gamma);
      case WeightSlot::resid_lambdas:
        return vec(s.name, s.rows, w.resid_lambdas);
      case WeightSlot::x0_lambdas:
        return vec(s.name, s.rows, w.x0_lambdas);
    }
  });
}

/// Views of the weights of a V model of config c in the file r (see the top of this file): every
/// tensor present with its shape, stored as floats (F32 in place; BF16, F16, F64 converted), or
/// packed where the file's format packs it (int8: I8 values and NAME.scales in groups of its
/// quant_group; bf16: BF16). r and spill must outlive the views. Fills out and returns ok, or
/// says what is wrong.
template <class V>
Status lean_file_weights(const st::Reader& r, const ModelConfig& c, LeanWeights<float>& out,
                         std::vector<std::byte>& spill) {
  constexpr const char* op = "lean_file_weights";
  const std::string file = "'" + r.label() + "'";
  if (Status s = c.status(); !s.ok()) return s;
  WeightInfo info;
  if (Status s = weight_info(r, info); !s.ok()) return s;
  const WeightFormat format = info.format;
  const std::int64_t group = info.group;
  // Pass 1 checks every tensor and counts the bytes of those not aligned for their type; pass 2
  // points each view at the file's bytes, or at their copy in spill.
  LeanWeights<float> w;
  Status s;
  // take(name, dtype, shape, set): checks the tensor, then hands bind its bytes and the setter.
  const auto plan = [&](auto&& bind) {
    const auto take = [&](const std::string& name, st::DType dt, const std::vector<std::int64_t>& shape, auto&& set) {
      if (!s.ok()) return;
      if (!r.contains(name)) {
        s = Status::error(StatusCode::bad_file, op, file, ": no tensor '", name, "'");
        return;
      }
      const st::DType stored = r.dtype(name);
      // A float table or vector stored in another float type (BF16, F16, F64: save_model's dtype)
      // is converted, as load_weights converts it.
      const bool convert = dt == st::DType::F32 && stored != dt &&
                           (stored == st::DType::BF16 || stored == st::DType::F16 || stored == st::DType::F64);
      if ((stored != dt && !convert) || r.shape(name) != shape) {
        s = Status::error(StatusCode::bad_file, op, file, ": tensor '", name, "' is ", st::dtype_name(r.dtype(name)),
                          " ", st::shape_string(r.shape(name)), ", expected ", st::dtype_name(dt), " ",
                          st::shape_string(shape));
        return;
      }
      const std::string_view raw = r.raw(name);
      if (convert)
        bind(name, nullptr, raw.size() / st::dtype_size(stored) * sizeof(float), alignof(float), set);
      else
        bind(name, raw.data(), raw.size(), st::dtype_size(dt), set);
    };
    const auto mat_type = [&](const std::string& name, bool packable) {
      if (!packable || format == WeightFormat::F32) return st::DType::F32;
      if (format == WeightFormat::BF16) return st::DType::BF16;
      return r.contains(name) && r.dtype(name) == st::DType::I8 ? st::DType::I8 : st::DType::F32;
    };
    for_each_lean_weight<V>(
        c, w,
        [&](const std::string& name, index_t rows, index_t cols, LeanMatrix<float>& m, bool packable) {
          const st::DType dt = mat_type(name, packable);
          m = LeanMatrix<float>{};
          m.rows = rows, m.cols = cols;
          if (dt == st::DType::I8) {
            m.group = group;
            take(name, dt, {rows, cols}, [&m](const void* q) { m.q = static_cast<const std::int8_t*>(q); });
            take(name + std::string(quant_scales_suffix), st::DType::F32, {rows, quant_groups(cols, group)},
                 [&m](const void* q) { m.scales = static_cast<const float*>(q); });
          } else if (dt == st::DType::BF16) {
            take(name, dt, {rows, cols}, [&m](const void* q) { m.bf16 = static_cast<const std::uint16_t*>(q); });
          } else {
            take(name, dt, {rows, cols}, [&m](const void* q) { m.data = static_cast<const float*>(q); });
          }
        },
        [&](const std::string& name, index_t n, const float*& v) {
          take(name, st::DType::F32, {n}, [&v](const void* q) { v = static_cast<const float*>(q); });
        });
  };
  // p: the stored bytes, or null for a tensor converted to float.
  const auto in_place = [](const char* p, std::size_t align) {
    return p && reinterpret_cast<std::uintptr_t>(p) % align == 0;
  };
  std::size_t extra = 0;
  plan([&](const std::string&, const char* p, std::size_t bytes, std::size_t align, auto&&) {
    if (!in_place(p, align)) extra += (bytes + 15) / 16 * 16;
  });
  if (!s.ok()) return s;
  spill.assign(extra, std::byte{0});
  std::size_t used = 0;
  plan([&](const std::string& name, const char* p, std::size_t bytes, std::size_t align, auto&& set) {
    if (in_place(p, align)) return set(p);
    std::byte* to = spill.data() + used;
    if (p)
      std::memcpy(to, p, bytes);
    else
      r.read_f32(name, std::span<float>(reinterpret_cast<float*>(to), bytes / sizeof(float)), r.shape(name));
    used += (bytes + 15) / 16 * 16;
    set(to);
  });
  out = std::move(w);
  return s;
}

}  // namespace v0
}  // namespace lrt
