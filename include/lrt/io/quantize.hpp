// lrt/io/quantize.hpp: weight-only quantization of a model's matrices, for decoding (spec §6):
// int8 with one float scale per group of `group` consecutive values of a row, or bfloat16. No
// Eigen, no fmt: the embedded decoder reads these files too.
//
// int8, row r of a (rows, cols) matrix in groups g of `group` values (the last one may be shorter):
//   scale[r, g] = max |w[r, i]| over the group / 127,  q[r, i] = round(w[r, i] / scale[r, g]) in [-127, 127]
//   (scale 0 and q 0 for an all-zero group), so w ~ scale q with |error| <= scale / 2.
// In a file (safetensors, the checkpoint's names): the matrix `name` stored I8 (rows, cols) beside
// `name.scales` F32 (rows, ceil(cols / group)); metadata "weights" = "int8" and "quant_group" =
// the group. bf16: the matrix stored BF16 (rounded to nearest even), "weights" = "bf16".
// Which matrices: those the decoder multiplies by, the parameter table's packable entries
// (model/weight_table.hpp; here a set of names, PackableNames): attention and MLP projections,
// the LRT memory projections, lm_head. Embedding tables (one row read per token), gates and
// scalars stay as they were.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/status.hpp"
#include "safetensors.hpp"

namespace lrt {
inline namespace v0 {

/// How a matrix's values are stored for decoding.
enum class WeightFormat { F32, BF16, Int8 };

inline std::string_view to_string(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32:
      return "f32";
    case WeightFormat::BF16:
      return "bf16";
    case WeightFormat::Int8:
      return "int8";
  }
  return "?";
}

/// "f32" / "fp32", "bf16", "int8"; an lrt::Error naming the choices otherwise.
inline WeightFormat weight_format_from_string(std::string_view s) {
  if (s == "f32" || s == "fp32") return WeightFormat::F32;
  if (s == "bf16") return WeightFormat::BF16;
  if (s == "int8") return WeightFormat::Int8;
  ::lrt::throw_error("quantize", "weight format must be f32, bf16 or int8, got '" + std::string(s) + "'");
}

/// Groups of a row of `cols` values.
inline std::int64_t quant_groups(std::int64_t cols, std::int64_t group) { return (cols + group - 1) / group; }

namespace quant_detail {
/// Checks the sizes of an int8 matrix's buffers; returns its groups per row.
inline std::int64_t check_int8_sizes(const char* op, std::int64_t rows, std::int64_t cols, std::int64_t group,
                                     std::size_t floats, std::size_t values, std::size_t scales) {
  check(rows >= 0 && cols >= 0 && group >= 1, op, "rows ", rows, ", cols ", cols, ", group ", group,
        ": need rows, cols >= 0 and group >= 1");
  const std::int64_t ng = quant_groups(cols, group);
  check(static_cast<std::int64_t>(floats) == rows * cols && static_cast<std::int64_t>(values) == rows * cols &&
            static_cast<std::int64_t>(scales) == rows * ng,
        op, "a (", rows, ", ", cols, ") matrix in groups of ", group, " needs ", rows * cols, " floats, ", rows * cols,
        " int8 values and ", rows * ng, " scales; got ", floats, ", ", values, " and ", scales);
  return ng;
}
}  // namespace quant_detail

/// int8 values q (rows * cols) and scales (rows * quant_groups(cols, group)) of the row-major
/// matrix w, as the top of this file says. Every value must be finite.
inline void quantize_int8(std::span<const float> w, std::int64_t rows, std::int64_t cols, std::int64_t group,
                          std::span<std::int8_t> q, std::span<float> scales) {
  const std::int64_t ng =
      quant_detail::check_int8_sizes("quantize_int8", rows, cols, group, w.size(), q.size(), scales.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < ng; ++g) {
      const std::int64_t lo = r * cols + g * group, hi = r * cols + std::min(cols, (g + 1) * group);
      float m = 0;
      for (std::int64_t i = lo; i < hi; ++i) {
        check(std::isfinite(w[static_cast<std::size_t>(i)]), "quantize_int8", "value ", w[static_cast<std::size_t>(i)],
              " at row ", r, ", column ", i - r * cols, " is not finite");
        m = std::max(m, std::fabs(w[static_cast<std::size_t>(i)]));
      }
      const float s = m / 127.0f;
      scales[static_cast<std::size_t>(r * ng + g)] = s;
      for (std::int64_t i = lo; i < hi; ++i) {
        const float v = s > 0 ? std::nearbyint(w[static_cast<std::size_t>(i)] / s) : 0.0f;
        q[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(std::clamp(v, -127.0f, 127.0f));
      }
    }
}

/// w = scale q, the float values an int8 matrix stands for.
inline void dequantize_int8(std::span<const std::int8_t> q, std::span<const float> scales, std::int64_t rows,
                            std::int64_t cols, std::int64_t group, std::span<float> w) {
  const std::int64_t ng =
      quant_detail::check_int8_sizes("dequantize_int8", rows, cols, group, w.size(), q.size(), scales.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < cols; ++i)
      w[static_cast<std::size_t>(r * cols + i)] = scales[static_cast<std::size_t>(r * ng + i / group)] *
                                                  static_cast<float>(q[static_cast<std::size_t>(r * cols + i)]);
}

/// The names of the matrices a quantized file packs: the packable entries of the model's parameter
/// table (model/weight_table.hpp, packable_names), the matrices the decoder multiplies by.
using PackableNames = std::set<std::string, std::less<>>;

/// The suffix of an int8 matrix's scales tensor.
inline constexpr std::string_view quant_scales_suffix = ".scales";

/// A checkpoint's weight format ("weights" in its metadata; none: f32) and int8 group.
struct WeightInfo {
  WeightFormat format = WeightFormat::F32;
  std::int64_t group = 0;  // int8 only
};

/// The format a file's metadata records ("weights", "quant_group"), into out; or why it is bad.
inline Status weight_info(const st::Reader& r, WeightInfo& out) {
  out = WeightInfo{};
  const auto f = r.meta("weights");
  if (!f) return {};
  const std::string file = "'" + r.label() + "'";
  if (*f != "int8" && *f != "bf16" && *f != "f32")
    return Status::error(StatusCode::bad_file, "checkpoint", file, ": metadata 'weights' is '", *f,
                         "', not f32, bf16 or int8");
  out.format = weight_format_from_string(*f);  // one of its three names: cannot fail
  if (out.format == WeightFormat::Int8) {
    const auto g = r.meta("quant_group");
    if (!g)
      return Status::error(StatusCode::bad_file, "checkpoint", file,
                           ": int8 weights without 'quant_group' in __metadata__");
    std::int64_t n = 0;
    bool ok = !g->empty() && g->size() <= 9;
    for (char ch : *g) ok = ok && ch >= '0' && ch <= '9', n = n * 10 + (ch - '0');
    if (!ok || n < 1)
      return Status::error(StatusCode::bad_file, "checkpoint", file, ": quant_group '", *g,
                           "' is not a positive integer");
    out.group = n;
  }
  return {};
}
inline WeightInfo weight_info(const st::Reader& r) {
  WeightInfo w;
  throw_if_error(weight_info(r, w));
  return w;
}

/// The float values of a tensor stored F32/BF16/F16/F64 (read_f32), or I8 with its scales (the
/// int8 format above; dequantized). `shape` is the expected shape.
inline void read_weight_f32(const st::Reader& r, const WeightInfo& info, const std::string& name, std::span<float> out,
                            const std::vector<std::int64_t>& shape) {
  if (r.dtype(name) != st::DType::I8) return r.read_f32(name, out, shape);
  check(info.format == WeightFormat::Int8, "checkpoint",
        "'" + r.label() + "': tensor '" + name + "' is stored I8 but the metadata says weights '" +
            std::string(to_string(info.format)) + "'");
  check(shape.size() == 2, "checkpoint", "'" + r.label() + "': tensor '" + name + "' is stored I8 but is not a matrix");
  const auto q = r.read_i8(name, shape);
  std::vector<float> s(static_cast<std::size_t>(shape[0] * quant_groups(shape[1], info.group)));
  r.read_f32(name + std::string(quant_scales_suffix), s, {shape[0], quant_groups(shape[1], info.group)});
  dequantize_int8(q, s, shape[0], shape[1], info.group, out);
}

/// The tensor names a file of these parameters holds: each name, and its scales for I8 ones.
inline std::vector<std::string> stored_names(const st::Reader& r, std::vector<std::string> params) {
  const std::size_t n = params.size();
  for (std::size_t i = 0; i < n; ++i)
    if (r.contains(params[i]) && r.dtype(params[i]) == st::DType::I8)
      params.push_back(params[i] + std::string(quant_scales_suffix));
  return params;
}

/// Packed matrices for the lean decoder (decode/lean.hpp), by tensor name: int8 values with their
/// scales, or bf16 bits. Owned here; the decoder views them.
struct PackedWeights {
  struct Matrix {
    std::int64_t rows = 0, cols = 0;
    std::vector<std::int8_t> q;       // int8
    std::vector<float> scales;        // int8: (rows, ceil(cols / group))
    std::vector<std::uint16_t> bf16;  // bf16
  };
  WeightFormat format = WeightFormat::F32;
  std::int64_t group = 0;
  std::map<std::string, Matrix, std::less<>> matrices;

  const Matrix* find(std::string_view name) const {
    const auto it = matrices.find(name);
    return it == matrices.end() ? nullptr : &it->second;
  }
  /// The bytes the packed values take.
  std::size_t bytes() const {
    std::size_t b = 0;
    for (const auto& [n, m] : matrices) b += m.q.size() + m.scales.size() * 4 + m.bf16.size() * 2;
    return b;
  }

  /// The packed matrices of a file: its I8 matrices (with scales) in an int8 file, its BF16
  /// matrices named in `packable` in a bf16 one; none in an f32 file.
  static PackedWeights read(const st::Reader& r, const PackableNames& packable) {
    PackedWeights p;
    const WeightInfo info = weight_info(r);
    p.format = info.format, p.group = info.group;
    if (info.format == WeightFormat::F32) return p;
    for (const auto& name : r.names()) {
      const auto dt = r.dtype(name);
      const auto shape = r.shape(name);
      if (shape.size() != 2) continue;
      Matrix m;
      m.rows = shape[0], m.cols = shape[1];
      if (info.format == WeightFormat::Int8 && dt == st::DType::I8) {
        m.q = r.read_i8(name, shape);
        m.scales.resize(static_cast<std::size_t>(m.rows * quant_groups(m.cols, info.group)));
        r.read_f32(name + std::string(quant_scales_suffix), m.scales, {m.rows, quant_groups(m.cols, info.group)});
      } else if (info.format == WeightFormat::BF16 && dt == st::DType::BF16 && packable.contains(name)) {
        const std::string_view raw = r.raw(name);
        m.bf16.resize(raw.size() / 2);
        std::memcpy(m.bf16.data(), raw.data(), raw.size());
      } else {
        continue;
      }
      p.matrices.emplace(name, std::move(m));
    }
    return p;
  }

  /// Packs float matrices in memory (what a file of `format` would hold): f(name, data, rows,
  /// cols) is called by `each` for every matrix to pack (the packable ones, see PackableNames).
  template <class Each>
  static PackedWeights pack(WeightFormat format, std::int64_t group, Each&& each) {
    check(format != WeightFormat::Int8 || group >= 1, "quantize", "int8 needs a group >= 1, got ", group);
    PackedWeights p;
    p.format = format, p.group = format == WeightFormat::Int8 ? group : 0;
    if (format == WeightFormat::F32) return p;
    each([&](const std::string& name, std::span<const float> w, std::int64_t rows, std::int64_t cols) {
      Matrix m;
      m.rows = rows, m.cols = cols;
      if (format == WeightFormat::Int8) {
        m.q.resize(w.size()), m.scales.resize(static_cast<std::size_t>(rows * quant_groups(cols, group)));
        quantize_int8(w, rows, cols, group, m.q, m.scales);
      } else {
        m.bf16.resize(w.size());
        for (std::size_t i = 0; i < w.size(); ++i) m.bf16[i] = st::f32_to_bf16(w[i]);
      }
      p.matrices.emplace(name, std::move(m));
    });
    return p;
  }
};

/// What quantize_checkpoint did.
struct QuantizeReport {
  std::int64_t packed = 0, kept = 0;        // tensors
  std::size_t bytes_in = 0, bytes_out = 0;  // data bytes
  double max_abs_error = 0;                 // over the packed values
};

/// The checkpoint r with its matrices named in `packable` in `format` (bf16 or int8 in groups of
/// `group`); every other tensor and all metadata as they were, plus "weights" (and "quant_group").
/// r must hold f32 weights (re-quantizing quantized values is refused).
inline st::Writer quantize_checkpoint(const st::Reader& r, WeightFormat format, std::int64_t group,
                                      const PackableNames& packable, QuantizeReport* report = nullptr) {
  check(format != WeightFormat::F32, "quantize", "the target format is bf16 or int8");
  check(format != WeightFormat::Int8 || group >= 1, "quantize", "int8 needs a group >= 1, got ", group);
  const WeightInfo info = weight_info(r);
  check(info.format == WeightFormat::F32, "quantize",
        "'" + r.label() + "' already holds " + std::string(to_string(info.format)) +
            " weights: quantize the f32 checkpoint they came from");
  QuantizeReport rep;
  st::Writer w;
  for (const auto& [k, v] : r.metadata()) w.set_metadata(k, v);
  w.set_metadata("weights", std::string(to_string(format)));
  if (format == WeightFormat::Int8) w.set_metadata("quant_group", std::to_string(group));
  for (const auto& name : r.names()) {
    const auto shape = r.shape(name);
    const auto dt = r.dtype(name);
    rep.bytes_in += r.raw(name).size();
    std::int64_t numel = 1;
    for (auto d : shape) numel *= d;
    if (shape.size() == 2 && st::is_floating(dt) && packable.contains(name)) {
      std::vector<float> v(static_cast<std::size_t>(numel)), back(v.size());
      r.read_f32(name, v, shape);
      if (format == WeightFormat::Int8) {
        std::vector<std::int8_t> q(v.size());
        std::vector<float> s(static_cast<std::size_t>(shape[0] * quant_groups(shape[1], group)));
        quantize_int8(v, shape[0], shape[1], group, q, s);
        dequantize_int8(q, s, shape[0], shape[1], group, back);
        w.add_i8(name, q, shape);
        w.add_f32(name + std::string(quant_scales_suffix), s, {shape[0], quant_groups(shape[1], group)});
        rep.bytes_out += q.size() + s.size() * 4;
      } else {
        w.add_f32(name, v, shape, st::DType::BF16);
        for (std::size_t i = 0; i < v.size(); ++i) back[i] = st::bf16_to_f32(st::f32_to_bf16(v[i]));
        rep.bytes_out += v.size() * 2;
      }
      for (std::size_t i = 0; i < v.size(); ++i)
        rep.max_abs_error = std::max(rep.max_abs_error, static_cast<double>(std::fabs(v[i] - back[i])));
      ++rep.packed;
      continue;
    }
    if (dt == st::DType::F32 || dt == st::DType::BF16 || dt == st::DType::F16) {  // as stored (F16 widened to F32)
      std::vector<float> v(static_cast<std::size_t>(numel));
      r.read_f32(name, v, shape);
      const st::DType to = dt == st::DType::F16 ? st::DType::F32 : dt;
      w.add_f32(name, v, shape, to);
      rep.bytes_out += v.size() * st::dtype_size(to);
    } else if (dt == st::DType::F64) {
      const auto v = r.read_f64(name, shape);
      w.add_f64(name, v, shape);
      rep.bytes_out += v.size() * 8;
    } else if (dt == st::DType::I64) {
      const auto v = r.read_i64(name, shape);
      w.add_i64(name, v, shape);
      rep.bytes_out += v.size() * 8;
    } else {
      ::lrt::throw_error("quantize", "'" + r.label() + "': tensor '" + name + "' is stored " +
                                         std::string(st::dtype_name(dt)) + ", which lrt checkpoints do not hold");
    }
    ++rep.kept;
  }
  if (report) *report = rep;
  return w;
}

}  // namespace v0
}  // namespace lrt
