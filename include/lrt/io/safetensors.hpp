// lrt/io/safetensors.hpp: reader and writer of the safetensors format
// (https://github.com/huggingface/safetensors):
//   u64 little-endian N | N bytes of JSON header | data section
// Header: {"__metadata__": {str: str}?,
//          "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
// with offsets relative to the data section.
// The reader validates the whole header when it opens a file (files may be damaged or hostile):
// every problem is an lrt::Error("safetensors", "'<file>': ..."), never UB or a huge allocation.
// It is strict: the tensors must tile the data section exactly (no gaps, overlaps or trailing
// bytes). Data are copied out with memcpy (the data section has no alignment), or viewed in place
// (raw()) in the file's bytes: held in memory (open, from_bytes) or mapped (map: nothing copied).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "file.hpp"
#include "json.hpp"
#include "mapped_file.hpp"

namespace lrt {
inline namespace v0 {
namespace st {

static_assert(std::endian::native == std::endian::little,
              "lrt's safetensors I/O copies raw little-endian data: big-endian "
              "hosts unsupported");

enum class DType { F32, BF16, F16, F64, I64, I32, U8, I8 };

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::F64:
      return "F64";
    case DType::I64:
      return "I64";
    case DType::I32:
      return "I32";
    case DType::U8:
      return "U8";
    case DType::I8:
      return "I8";
  }
  return "?";
}

inline std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::BF16:
      return 2;
    case DType::F16:
      return 2;
    case DType::F64:
      return 8;
    case DType::I64:
      return 8;
    case DType::I32:
      return 4;
    case DType::U8:
    case DType::I8:
      return 1;
  }
  return 0;
}

inline std::optional<DType> dtype_from_name(std::string_view s) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64, DType::I64, DType::I32, DType::U8, DType::I8})
    if (dtype_name(t) == s) return t;
  return std::nullopt;
}

inline bool is_floating(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F64; }

/// float -> bfloat16 bits, rounding to nearest, ties to even (as PyTorch). NaN stays a (quiet) NaN
/// with its sign; values beyond the bf16 range round to infinity.
inline std::uint16_t f32_to_bf16(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

/// IEEE half bits -> float (exact: every half is a float).
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t man = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal half: normalize
    std::uint32_t e = 113;
    while (!(man & 0x400u)) {
      man <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((man & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

/// "(320, 128)"; rank 1 is "(5,)" and a scalar "()" (as lrt::Shape and Python print them).
inline std::string shape_string(const std::vector<std::int64_t>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (s.size() == 1) out += ",";
  return out + ")";
}

namespace detail {
// Elements of a shape, or nullopt when a dimension is negative or the product of the nonzero
// dimensions times elem_size overflows int64 (so strides and byte counts stay representable even
// for empty tensors).
inline std::optional<std::int64_t> checked_numel(const std::vector<std::int64_t>& shape, std::size_t elem_size) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  std::int64_t bound = static_cast<std::int64_t>(elem_size), n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d > 0 && bound > max / d) return std::nullopt;
    if (d > 0) bound *= d;
    n *= d;
  }
  return n;
}
}  // namespace detail

/// Builds a safetensors file in memory: tensors are written in the order added.
class Writer {
 public:
  /// `stored` is F32 (bit-exact) or BF16 (rounded to nearest even).
  void add_f32(std::string name, std::span<const float> data, std::vector<std::int64_t> shape,
               DType stored = DType::F32) {
    check(stored == DType::F32 || stored == DType::BF16, "safetensors", "tensor '", name,
          "': float data can be stored as F32 or BF16, not ", std::string(dtype_name(stored)));
    check_new(name, shape, data.size());
    std::string bytes;
    if (stored == DType::F32) {
      bytes.assign(reinterpret_cast<const char*>(data.data()), data.size_bytes());
    } else {
      bytes.resize(data.size() * 2);
      for (std::size_t i = 0; i < data.size(); ++i) {
        const std::uint16_t h = f32_to_bf16(data[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    push(std::move(name), stored, std::move(shape), std::move(bytes));
  }
  void add_f64(std::string name, std::span<const double> data, std::vector<std::int64_t> shape) {
    check_new(name, shape, data.size());
    std::string bytes(reinterpret_cast<const char*>(data.data()), data.size_bytes());
    push(std::move(name), DType::F64, std::move(shape), std::move(bytes));
  }
  void add_i64(std::string name, std::span<const std::int64_t> data, std::vector<std::int64_t> shape) {
    check_new(name, shape, data.size());
    std::string bytes(reinterpret_cast<const char*>(data.data()), data.size_bytes());
    push(std::move(name), DType::I64, std::move(shape), std::move(bytes));
  }
  /// int8 values (weight-only quantization: model/quantize.hpp), stored I8.
  void add_i8(std::string name, std::span<const std::int8_t> data, std::vector<std::int64_t> shape) {
    check_new(name, shape, data.size());
    std::string bytes(reinterpret_cast<const char*>(data.data()), data.size_bytes());
    push(std::move(name), DType::I8, std::move(shape), std::move(bytes));
  }
  /// Sets (or replaces) a "__metadata__" string.
  void set_metadata(std::string key, std::string value) {
    for (auto& [k, v] : metadata_)
      if (k == key) {
        v = std::move(value);
        return;
      }
    metadata_.emplace_back(std::move(key), std::move(value));
  }

  /// The whole file. The header is space-padded to a multiple of 8 bytes so the data section starts
  /// 8-aligned in the file (as the reference implementation writes it).
  std::string serialize() const {
    // Built member by member: json::Value::operator[] searches linearly, and names are unique.
    std::string text = "{";
    if (!metadata_.empty()) {
      json::Value m = json::Value::object();
      for (const auto& [k, v] : metadata_) m[k] = v;
      text += "\"__metadata__\":" + m.dump();
    }
    std::uint64_t offset = 0;
    for (const auto& t : tensors_) {
      json::Value e = json::Value::object();
      e["dtype"] = dtype_name(t.dtype);
      json::Value shape = json::Value::array();
      for (std::int64_t d : t.shape) shape.push_back(d);
      e["shape"] = std::move(shape);
      json::Value offs = json::Value::array();
      offs.push_back(offset);
      offs.push_back(offset + t.bytes.size());
      e["data_offsets"] = std::move(offs);
      offset += t.bytes.size();
      if (text.size() > 1) text += ',';
      text += json::Value(t.name).dump() + ':' + e.dump();
    }
    text += '}';
    text.append((8 - text.size() % 8) % 8, ' ');
    const std::uint64_t n = text.size();
    std::string out;
    out.reserve(8 + text.size() + offset);
    out.append(reinterpret_cast<const char*>(&n), 8);
    out += text;
    for (const auto& t : tensors_) out += t.bytes;
    return out;
  }

  /// serialize() written with write_file_atomic.
  void write(const std::string& path) const { write_file_atomic(path, serialize()); }

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::string bytes;
  };

  void check_new(const std::string& name, const std::vector<std::int64_t>& shape, std::size_t n) const {
    check(name != "__metadata__", "safetensors", "'__metadata__' is reserved, not a tensor name");
    check(!names_.count(name), "safetensors", "tensor '", name, "' added twice");
    const auto numel = detail::checked_numel(shape, 8);
    check(numel.has_value(), "safetensors", "tensor '", name, "': invalid shape ", shape_string(shape));
    check(static_cast<std::uint64_t>(*numel) == n, "safetensors", "tensor '", name, "': shape ", shape_string(shape),
          " has ", *numel, " elements, data has ", n);
  }

  void push(std::string name, DType t, std::vector<std::int64_t> shape, std::string bytes) {
    names_.insert(name);
    tensors_.push_back({std::move(name), t, std::move(shape), std::move(bytes)});
  }

  std::vector<Entry> tensors_;
  std::set<std::string, std::less<>> names_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

/// A validated safetensors file held in memory.
class Reader {
 public:
  /// Largest header accepted (the reference implementation's limit).
  static constexpr std::uint64_t max_header_bytes = 100'000'000;

  static Reader open(const std::string& path) { return from_bytes(read_file(path, "safetensors"), path); }

  /// `label` names the source in errors (a path, "<memory>", ...).
  static Reader from_bytes(std::string bytes, std::string label) {
    auto held = std::make_shared<const std::string>(std::move(bytes));
    const std::string_view view(*held);
    return over(std::move(held), view, std::move(label));
  }

  /// The file at `path` mapped, not read: raw() views point into the mapping, which lives as long
  /// as the Reader or a copy of it.
  static Reader map(const std::string& path) {
    auto m = std::make_shared<MappedFile>();
    throw_if_error(m->open(path.c_str()));
    const std::string_view view = m->bytes();
    return over(std::move(m), view, path);
  }

  /// A file's bytes that `owner` keeps alive (a MappedFile, a buffer, ...).
  static Reader over(std::shared_ptr<const void> owner, std::string_view bytes, std::string label) {
    Reader r;
    r.owner_ = std::move(owner);
    r.bytes_ = bytes;
    r.label_ = std::move(label);
    r.validate();
    return r;
  }

  const std::string& label() const { return label_; }
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  std::optional<std::string> meta(std::string_view key) const {
    for (const auto& [k, v] : metadata_)
      if (k == key) return v;
    return std::nullopt;
  }

  /// Tensor names in header order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(tensors_.size());
    for (const auto& t : tensors_) out.push_back(t.name);
    return out;
  }
  bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }
  DType dtype(std::string_view name) const { return entry(name).dtype; }
  std::vector<std::int64_t> shape(std::string_view name) const { return entry(name).shape; }
  /// The stored little-endian bytes of a tensor (valid while the Reader lives).
  std::string_view raw(std::string_view name) const {
    const Tensor& t = entry(name);
    return bytes_.substr(data_start_ + t.begin, t.end - t.begin);
  }

  /// Reads a floating tensor (F32, BF16, F16 or F64 stored) as float; its shape must equal
  /// `expected` and out must hold exactly its elements.
  void read_f32(std::string_view name, std::span<float> out, const std::vector<std::int64_t>& expected) const {
    const Tensor& t = checked(name, expected);
    if (out.size() != t.numel)
      fail("tensor '", t.name, "': destination holds ", out.size(), " elements, tensor has ", t.numel);
    const char* p = bytes_.data() + data_start_ + t.begin;
    switch (t.dtype) {
      case DType::F32:
        if (!out.empty()) std::memcpy(out.data(), p, out.size_bytes());
        break;
      case DType::BF16:
        convert<std::uint16_t>(p, out, bf16_to_f32);
        break;
      case DType::F16:
        convert<std::uint16_t>(p, out, f16_to_f32);
        break;
      case DType::F64:
        convert<double>(p, out, [](double d) { return static_cast<float>(d); });
        break;
      default:
        wrong_dtype(t, "F32");
    }
  }
  std::vector<float> read_f32(std::string_view name, const std::vector<std::int64_t>& expected) const {
    std::vector<float> out(checked(name, expected).numel);
    read_f32(name, out, expected);
    return out;
  }
  /// Reads a floating tensor (F64 exactly; F32, BF16, F16 widened) as double.
  std::vector<double> read_f64(std::string_view name, const std::vector<std::int64_t>& expected) const {
    const Tensor& t = checked(name, expected);
    std::vector<double> out(t.numel);
    const char* p = bytes_.data() + data_start_ + t.begin;
    auto widen = [](float f) { return static_cast<double>(f); };
    switch (t.dtype) {
      case DType::F64:
        if (t.numel) std::memcpy(out.data(), p, t.numel * 8);
        break;
      case DType::F32:
        convert<float>(p, std::span<double>(out), widen);
        break;
      case DType::BF16:
        convert<std::uint16_t>(p, std::span<double>(out),
                               [](std::uint16_t h) { return static_cast<double>(bf16_to_f32(h)); });
        break;
      case DType::F16:
        convert<std::uint16_t>(p, std::span<double>(out),
                               [](std::uint16_t h) { return static_cast<double>(f16_to_f32(h)); });
        break;
      default:
        wrong_dtype(t, "F64");
    }
    return out;
  }
  /// Reads an integer tensor (I64; I32 and U8 widened exactly) as int64.
  std::vector<std::int64_t> read_i64(std::string_view name, const std::vector<std::int64_t>& expected) const {
    const Tensor& t = checked(name, expected);
    std::vector<std::int64_t> out(t.numel);
    const char* p = bytes_.data() + data_start_ + t.begin;
    auto widen = [](auto x) { return static_cast<std::int64_t>(x); };
    switch (t.dtype) {
      case DType::I64:
        if (t.numel) std::memcpy(out.data(), p, t.numel * 8);
        break;
      case DType::I32:
        convert<std::int32_t>(p, std::span<std::int64_t>(out), widen);
        break;
      case DType::U8:
        convert<std::uint8_t>(p, std::span<std::int64_t>(out), widen);
        break;
      default:
        wrong_dtype(t, "I64");
    }
    return out;
  }

  /// Reads an I8 tensor (no other dtype: int8 data are quantized values, not integers to widen).
  std::vector<std::int8_t> read_i8(std::string_view name, const std::vector<std::int64_t>& expected) const {
    const Tensor& t = checked(name, expected);
    if (t.dtype != DType::I8) wrong_dtype(t, "I8");
    std::vector<std::int8_t> out(t.numel);
    if (t.numel) std::memcpy(out.data(), bytes_.data() + data_start_ + t.begin, t.numel);
    return out;
  }

  /// Checks the file holds exactly these tensors; one error lists every missing and every
  /// unexpected name.
  void expect_names(const std::vector<std::string>& expected) const {
    std::vector<std::string> missing, unexpected;
    std::set<std::string_view, std::less<>> want;
    for (const auto& n : expected) {
      want.insert(n);
      if (!contains(n)) missing.push_back(n);
    }
    for (const auto& t : tensors_)
      if (!want.count(t.name)) unexpected.push_back(t.name);
    if (missing.empty() && unexpected.empty()) return;
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      const std::size_t shown = std::min<std::size_t>(v.size(), 20);
      for (std::size_t i = 0; i < shown; ++i) s += (i ? ", '" : "'") + v[i] + "'";
      if (v.size() > shown) s += " and " + std::to_string(v.size() - shown) + " more";
      return s;
    };
    std::string msg;
    if (!missing.empty()) msg += "missing tensors " + list(missing);
    if (!unexpected.empty()) msg += (msg.empty() ? "" : "; ") + std::string("unexpected tensors ") + list(unexpected);
    fail(msg);
  }

 private:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::size_t numel;
    std::uint64_t begin, end;  // relative to the data section
  };

  Reader() = default;

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    ::lrt::throw_error("safetensors", "'" + label_ + "': " + lrt::detail::str_cat(parts...));
  }

  const Tensor& entry(std::string_view name) const {
    auto it = index_.find(name);
    if (it == index_.end()) fail("no tensor '", std::string(name), "'");
    return tensors_[it->second];
  }

  const Tensor& checked(std::string_view name, const std::vector<std::int64_t>& expected) const {
    const Tensor& t = entry(name);
    if (t.shape != expected)
      fail("tensor '", t.name, "': shape ", shape_string(t.shape), " expected ", shape_string(expected));
    return t;
  }

  static std::string kind(const json::Value& v) { return std::string(json::Value::kind_name(v.kind())); }

  [[noreturn]] void wrong_dtype(const Tensor& t, const char* as) const {
    fail("tensor '", t.name, "': stored as ", std::string(dtype_name(t.dtype)), ", cannot be read as ", as);
  }

  template <class Src, class Dst, class F>
  static void convert(const char* p, std::span<Dst> out, F f) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      Src s;
      std::memcpy(&s, p + i * sizeof(Src), sizeof(Src));
      out[i] = static_cast<Dst>(f(s));
    }
  }

  void validate() {
    const std::uint64_t size = bytes_.size();
    if (size < 8) fail("file too short (", size, " bytes) for the 8-byte header length");
    std::uint64_t n = 0;
    std::memcpy(&n, bytes_.data(), 8);
    if (n > max_header_bytes) fail("header length ", n, " exceeds the limit of ", max_header_bytes, " bytes");
    if (n > size - 8) fail("header length ", n, " exceeds the file size (", size, " bytes)");
    data_start_ = 8 + n;
    const std::uint64_t data_size = size - data_start_;

    // "[safetensors] 'FILE': invalid JSON header: ... at byte N", with exceptions or without.
    const json::Value header = json::parse(bytes_.substr(8, n), "'" + label_ + "': invalid JSON header", "safetensors");
    if (!header.is_object()) fail("header is a JSON ", kind(header), ", not an object");

    for (const auto& [name, e] : header.members()) {
      if (name == "__metadata__") {
        if (!e.is_object()) fail("__metadata__ is a JSON ", kind(e), ", not an object of strings");
        for (const auto& [k, v] : e.members()) {
          if (!v.is_string()) fail("__metadata__ '", k, "' is a JSON ", kind(v), ", not a string");
          metadata_.emplace_back(k, v.as_string());
        }
        continue;
      }
      tensors_.push_back(parse_entry(name, e, data_size));
      index_.emplace(tensors_.back().name, tensors_.size() - 1);
    }

    // The tensors must tile [0, data_size) exactly: sort by (begin, end), then each begins where
    // the previous ends. Empty tensors may sit at any boundary.
    std::vector<std::size_t> order(tensors_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const Tensor &x = tensors_[a], &y = tensors_[b];
      return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
    });
    std::uint64_t at = 0;
    const Tensor* prev = nullptr;
    for (std::size_t i : order) {
      const Tensor& t = tensors_[i];
      if (t.begin < at)
        fail("tensor '", t.name, "': data_offsets [", t.begin, ", ", t.end, "] overlap tensor '", prev->name, "' [",
             prev->begin, ", ", prev->end, "]");
      if (t.begin > at)
        fail("tensor '", t.name, "': data_offsets [", t.begin, ", ", t.end, "] leave a gap of ", t.begin - at,
             " bytes ", prev ? "after tensor '" + prev->name + "'" : std::string("at the start"));
      at = t.end;
      prev = &t;
    }
    if (at != data_size) fail("data section has ", data_size - at, " trailing bytes after the last tensor");
  }

  Tensor parse_entry(const std::string& name, const json::Value& e, std::uint64_t data_size) {
    const std::string where = "tensor '" + name + "': ";
    if (!e.is_object()) fail(where, "entry is a JSON ", kind(e), ", not an object");
    for (const auto& [k, v] : e.members())
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(where, "unexpected field '", k, "'");
    for (const char* k : {"dtype", "shape", "data_offsets"})
      if (!e.find(k)) fail(where, "missing field '", k, "'");

    Tensor t;
    t.name = name;
    const json::Value& dt = e.at("dtype");
    if (!dt.is_string()) fail(where, "dtype is not a string");
    const auto parsed = dtype_from_name(dt.as_string());
    if (!parsed) fail(where, "unsupported dtype '", dt.as_string(), "'");
    t.dtype = *parsed;

    const json::Value& sh = e.at("shape");
    if (!sh.is_array()) fail(where, "shape is not an array");
    for (const auto& d : sh.items()) {
      if (!d.is_integer() || d.as_int() < 0)
        fail(where, "shape must hold non-negative integers, got ", d.is_number() ? d.dump() : kind(d));
      t.shape.push_back(d.as_int());
    }
    const auto numel = detail::checked_numel(t.shape, dtype_size(t.dtype));
    if (!numel) fail(where, "shape ", shape_string(t.shape), " overflows");
    t.numel = static_cast<std::size_t>(*numel);

    const json::Value& off = e.at("data_offsets");
    if (!(off.is_array() && off.items().size() == 2 && off.items()[0].is_integer() && off.items()[1].is_integer() &&
          off.items()[0].as_int() >= 0 && off.items()[1].as_int() >= 0))
      fail(where, "data_offsets must be two non-negative integers");
    t.begin = static_cast<std::uint64_t>(off.items()[0].as_int());
    t.end = static_cast<std::uint64_t>(off.items()[1].as_int());
    if (t.begin > t.end) fail(where, "data_offsets [", t.begin, ", ", t.end, "] end before they begin");
    const std::uint64_t nbytes = static_cast<std::uint64_t>(*numel) * dtype_size(t.dtype);
    if (t.end - t.begin != nbytes)
      fail(where, "data_offsets [", t.begin, ", ", t.end, "] span ", t.end - t.begin, " bytes, but ",
           std::string(dtype_name(t.dtype)), " ", shape_string(t.shape), " needs ", nbytes);
    if (t.end > data_size)
      fail(where, "data_offsets [", t.begin, ", ", t.end, "] exceed the data section (", data_size, " bytes)");
    return t;
  }

  std::shared_ptr<const void> owner_;  // what holds bytes_
  std::string_view bytes_;
  std::string label_;
  std::uint64_t data_start_ = 0;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<Tensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace st
}  // namespace v0
}  // namespace lrt
