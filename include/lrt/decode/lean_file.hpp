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

#include <algorithm>
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
/// argument (the tensors of its parameter table, model/weight_table.hpp); w.layers is sized to the
/// config's layers first, and a tensor outside w's fields (a variant's own) gets an entry of
/// w.other (cols 0 there: a vector of `rows` values, which w.other views as (rows, 1)). packable:
/// what lrt-quantize packs.
template <class V, class T, class Mat, class Vec>
void for_each_lean_weight(const ModelConfig& c, LeanWeights<T>& w, Mat&& mat, Vec&& vec) {
  w.config = c;
  w.layers.assign(static_cast<std::size_t>(c.n_layer), {});
  w.other.clear();
  for (const WeightSpec& s : weight_table<V>(c)) {
    const bool field = visit_field(
        w, s, [&](LeanMatrix<T>& view) { mat(s.name, s.rows, s.cols, view, s.packable); },
        [&](const T*& values) { vec(s.name, s.rows, values); });
    if (!field) {
      w.other.push_back({s.name, {}});
      mat(s.name, s.rows, s.cols, w.other.back().m, s.packable);
    }
  }
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
          m.rows = rows, m.cols = std::max<index_t>(cols, 1);  // cols 0: a vector of w.other
          const std::vector<std::int64_t> shape =
              cols > 0 ? std::vector<std::int64_t>{rows, cols} : std::vector<std::int64_t>{rows};
          if (dt == st::DType::I8) {
            m.group = group;
            take(name, dt, shape, [&m](const void* q) { m.q = static_cast<const std::int8_t*>(q); });
            take(name + std::string(quant_scales_suffix), st::DType::F32, {rows, quant_groups(cols, group)},
                 [&m](const void* q) { m.scales = static_cast<const float*>(q); });
          } else if (dt == st::DType::BF16) {
            take(name, dt, shape, [&m](const void* q) { m.bf16 = static_cast<const std::uint16_t*>(q); });
          } else {
            take(name, dt, shape, [&m](const void* q) { m.data = static_cast<const float*>(q); });
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
