// lrt/io/json.hpp: a small, strict JSON (RFC 8259) value, parser and writer. Used for configs,
// checkpoints' manifests and safetensors headers: inputs may be damaged or hostile, so the parser
// rejects everything the grammar does not allow (duplicate keys, trailing garbage, invalid UTF-8,
// lone surrogates, control characters in strings) and bounds nesting instead of overflowing the
// stack. Every error is an lrt::Error("json", ...).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace json {

/// A JSON value. Numbers keep their exact int64 value when they are integers in range (written
/// without fraction or exponent in parsed text), and always a double. Objects keep insertion order.
class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Kind::Bool), bool_(b) {}
  Value(double d) : kind_(Kind::Number), num_(d) {}
  Value(float f) : Value(static_cast<double>(f)) {}
  /// Integers (not bool or characters) are stored exactly when they fit int64.
  template <std::integral I>
  requires(!std::same_as<I, bool> && !std::same_as<I, char> && !std::same_as<I, char8_t> &&
           !std::same_as<I, char16_t> && !std::same_as<I, char32_t> && !std::same_as<I, wchar_t>) Value(I i)
      : kind_(Kind::Number), num_(static_cast<double>(i)) {
    if constexpr (std::is_signed_v<I>) {
      int_ = static_cast<std::int64_t>(i);
      is_int_ = true;
    } else if (static_cast<std::uint64_t>(i) <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      int_ = static_cast<std::int64_t>(i);
      is_int_ = true;
    }
  }
  Value(std::string s) : kind_(Kind::String), str_(std::move(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(std::string_view s) : Value(std::string(s)) {}

  static Value array() {
    Value v;
    v.kind_ = Kind::Array;
    return v;
  }
  static Value object() {
    Value v;
    v.kind_ = Kind::Object;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_number() const { return kind_ == Kind::Number; }
  /// A number held exactly as an int64 (an integer literal in range, or built from an integer).
  bool is_integer() const { return kind_ == Kind::Number && is_int_; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const {
    expect(Kind::Bool);
    return bool_;
  }
  double as_number() const {
    expect(Kind::Number);
    return num_;
  }
  /// The exact integer; throws unless the number is integral and within int64.
  std::int64_t as_int() const {
    expect(Kind::Number);
    if (is_int_) return int_;
    // -2^63 <= num_ < 2^63 (2^63 itself is exactly representable as a double; int64 max is not).
    constexpr double lim = 9223372036854775808.0;
    if (std::isfinite(num_) && num_ == std::trunc(num_) && num_ >= -lim && num_ < lim)
      return static_cast<std::int64_t>(num_);
    ::lrt::throw_error("json", "number " + format_double(num_) + " is not an integer in int64 range");
  }
  const std::string& as_string() const {
    expect(Kind::String);
    return str_;
  }

  const std::vector<Value>& items() const {
    expect(Kind::Array);
    return arr_;
  }
  std::vector<Value>& items() {
    expect(Kind::Array);
    return arr_;
  }
  /// Appends to an array (a null value becomes an empty array first).
  void push_back(Value v) {
    if (kind_ == Kind::Null) kind_ = Kind::Array;
    expect(Kind::Array);
    arr_.push_back(std::move(v));
  }

  /// Object members in insertion (or file) order.
  const std::vector<std::pair<std::string, Value>>& members() const {
    expect(Kind::Object);
    return obj_;
  }
  /// The member named key, or nullptr when absent or when this is not an object. Linear search.
  const Value* find(std::string_view key) const {
    if (kind_ != Kind::Object) return nullptr;
    for (const auto& [k, v] : obj_)
      if (k == key) return &v;
    return nullptr;
  }
  const Value& at(std::string_view key) const {
    expect(Kind::Object);
    if (const Value* v = find(key)) return *v;
    ::lrt::throw_error("json", "missing key '" + std::string(key) + "'");
  }
  /// Object member, inserted as null when absent (a null value becomes an empty object first).
  Value& operator[](std::string_view key) {
    if (kind_ == Kind::Null) kind_ = Kind::Object;
    expect(Kind::Object);
    for (auto& [k, v] : obj_)
      if (k == key) return v;
    obj_.emplace_back(std::string(key), Value());
    return obj_.back().second;
  }

  /// Structural equality; object members compare in order. Numbers compare as doubles, and as int64
  /// too when both are exact integers (doubles cannot tell 2^53 from 2^53 + 1).
  friend bool operator==(const Value& a, const Value& b) {
    if (a.kind_ != b.kind_) return false;
    switch (a.kind_) {
      case Kind::Null:
        return true;
      case Kind::Bool:
        return a.bool_ == b.bool_;
      case Kind::Number:
        if (a.is_int_ && b.is_int_) return a.int_ == b.int_;
        return a.num_ == b.num_;
      case Kind::String:
        return a.str_ == b.str_;
      case Kind::Array:
        return a.arr_ == b.arr_;
      case Kind::Object:
        return a.obj_ == b.obj_;
    }
    return false;
  }

  /// Compact JSON text. Integers are written exactly, other numbers in the shortest form that reads
  /// back to the same double; NaN and infinities have no JSON form and throw.
  std::string dump() const {
    std::string out;
    dump_to(out);
    return out;
  }

  static std::string_view kind_name(Kind k) {
    switch (k) {
      case Kind::Null:
        return "null";
      case Kind::Bool:
        return "bool";
      case Kind::Number:
        return "number";
      case Kind::String:
        return "string";
      case Kind::Array:
        return "array";
      case Kind::Object:
        return "object";
    }
    return "?";
  }

 private:
  friend class Parser;

  void expect(Kind k) const {
    if (kind_ != k)
      ::lrt::throw_error("json", "expected " + std::string(kind_name(k)) + ", got " + std::string(kind_name(kind_)));
  }

  static std::string format_double(double d) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
    return std::string(buf, r.ptr);
  }

  static void dump_string(std::string& out, std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    out += '"';
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (c == '"') {
        out += "\\\"";
      } else if (c == '\\') {
        out += "\\\\";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (u < 0x20) {
        out += "\\u00";
        out += hex[u >> 4];
        out += hex[u & 15];
      } else {
        out += c;  // bytes >= 0x80 pass through: the text is UTF-8 if the string is
      }
    }
    out += '"';
  }

  void dump_to(std::string& out) const {
    switch (kind_) {
      case Kind::Null:
        out += "null";
        break;
      case Kind::Bool:
        out += bool_ ? "true" : "false";
        break;
      case Kind::Number:
        if (is_int_) {
          out += std::to_string(int_);
        } else {
          if (!std::isfinite(num_)) ::lrt::throw_error("json", "cannot write a non-finite number");
          out += format_double(num_);
        }
        break;
      case Kind::String:
        dump_string(out, str_);
        break;
      case Kind::Array:
        out += '[';
        for (std::size_t i = 0; i < arr_.size(); ++i) {
          if (i) out += ',';
          arr_[i].dump_to(out);
        }
        out += ']';
        break;
      case Kind::Object:
        out += '{';
        for (std::size_t i = 0; i < obj_.size(); ++i) {
          if (i) out += ',';
          dump_string(out, obj_[i].first);
          out += ':';
          obj_[i].second.dump_to(out);
        }
        out += '}';
        break;
    }
  }

  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool is_int_ = false;
  std::int64_t int_ = 0;
  double num_ = 0;
  std::string str_;
  std::vector<Value> arr_;
  std::vector<std::pair<std::string, Value>> obj_;
};

/// Recursive-descent parser over one text; use json::parse.
class Parser {
 public:
  static constexpr int max_depth = 128;

  Parser(std::string_view text, std::string_view what, const char* op = "json") : s_(text), what_(what), op_(op) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view reason) const { fail_at(reason, pos_); }
  [[noreturn]] void fail_at(std::string_view reason, std::size_t at) const {
    ::lrt::throw_error(op_, std::string(what_) + ": " + std::string(reason) + " at byte " + std::to_string(at));
  }

  bool eof() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  void skip_ws() {
    while (!eof() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect_literal(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) fail("invalid literal");
    pos_ += lit.size();
  }

  Value parse_value(int depth) {
    if (eof()) fail("unexpected end of input");
    switch (peek()) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"':
        return Value(parse_string());
      case 't':
        expect_literal("true");
        return Value(true);
      case 'f':
        expect_literal("false");
        return Value(false);
      case 'n':
        expect_literal("null");
        return Value();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail("unexpected character");
    }
  }

  Value parse_array(int depth) {
    if (depth > max_depth) fail("nesting deeper than 128");
    ++pos_;  // '['
    Value v = Value::array();
    skip_ws();
    if (!eof() && peek() == ']') {
      ++pos_;
      return v;
    }
    for (;;) {
      skip_ws();
      v.arr_.push_back(parse_value(depth));
      skip_ws();
      if (eof()) fail("unterminated array");
      if (peek() == ',') {
        ++pos_;
      } else if (peek() == ']') {
        ++pos_;
        return v;
      } else {
        fail("expected ',' or ']'");
      }
    }
  }

  Value parse_object(int depth) {
    if (depth > max_depth) fail("nesting deeper than 128");
    ++pos_;  // '{'
    Value v = Value::object();
    std::vector<std::size_t> key_pos;  // where each key starts, for the duplicate error
    skip_ws();
    if (!eof() && peek() == '}') {
      ++pos_;
      return v;
    }
    for (;;) {
      skip_ws();
      if (eof()) fail("unterminated object");
      if (peek() != '"') fail("expected a string key");
      key_pos.push_back(pos_);
      std::string key = parse_string();
      skip_ws();
      if (eof() || peek() != ':') fail("expected ':'");
      ++pos_;
      skip_ws();
      Value member = parse_value(depth);
      v.obj_.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (eof()) fail("unterminated object");
      if (peek() == ',') {
        ++pos_;
      } else if (peek() == '}') {
        ++pos_;
        break;
      } else {
        fail("expected ',' or '}'");
      }
    }
    // Duplicate keys: sort member indices by key (O(n log n): headers may hold many tensors).
    const auto& m = v.obj_;
    if (m.size() > 1) {
      std::vector<std::size_t> idx(m.size());
      for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return m[a].first < m[b].first; });
      std::size_t dup = m.size();
      for (std::size_t i = 1; i < idx.size(); ++i)
        if (m[idx[i]].first == m[idx[i - 1]].first) dup = std::min(dup, idx[i]);
      if (dup < m.size()) fail_at("duplicate key '" + m[dup].first + "'", key_pos[dup]);
    }
    return v;
  }

  unsigned hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      u <<= 4;
      if (c >= '0' && c <= '9')
        u |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        u |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        u |= static_cast<unsigned>(c - 'A' + 10);
      else
        fail_at("invalid \\u escape", pos_ - 1);
    }
    return u;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // Length of the well-formed UTF-8 sequence at pos_ (Unicode table 3-7), or 0.
  std::size_t utf8_length() const {
    auto at = [&](std::size_t i) -> unsigned {
      return pos_ + i < s_.size() ? static_cast<unsigned char>(s_[pos_ + i]) : 0u;
    };
    const unsigned c = at(0);
    auto cont = [&](std::size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
      const unsigned b = at(i);
      return b >= lo && b <= hi;
    };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;        // no overlongs
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no surrogates
    if (c >= 0xE1 && c <= 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;  // <= U+10FFFF
    return 0;
  }

  std::string parse_string() {
    const std::size_t start = pos_;
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      if (eof()) fail_at("unterminated string", start);
      const char c = peek();
      const auto u = static_cast<unsigned char>(c);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (u < 0x20) fail("control character in string");
      if (u >= 0x80) {
        const std::size_t n = utf8_length();
        if (n == 0) fail("invalid UTF-8 in string");
        out.append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      const std::size_t esc = pos_;
      ++pos_;
      if (eof()) fail_at("unterminated string", start);
      const char e = s_[pos_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at("lone low surrogate in \\u escape", esc);
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") fail_at("high surrogate without a low one", esc);
            pos_ += 2;
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail_at("high surrogate without a low one", esc);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          put_utf8(out, cp);
          break;
        }
        default:
          fail_at("invalid escape", esc);
      }
    }
  }

  Value parse_number() {
    const std::size_t start = pos_;
    auto digit = [&] { return !eof() && peek() >= '0' && peek() <= '9'; };
    bool integral = true;
    if (peek() == '-') ++pos_;
    if (!digit()) fail("invalid number");
    if (peek() == '0') {
      ++pos_;
      if (digit()) fail_at("leading zero in number", start);
    } else {
      while (digit()) ++pos_;
    }
    if (!eof() && peek() == '.') {
      integral = false;
      ++pos_;
      if (!digit()) fail("expected a digit after '.'");
      while (digit()) ++pos_;
    }
    if (!eof() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!eof() && (peek() == '+' || peek() == '-')) ++pos_;
      if (!digit()) fail("expected a digit in exponent");
      while (digit()) ++pos_;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    Value v;
    v.kind_ = Value::Kind::Number;
    if (integral) {
      std::int64_t i = 0;
      auto r = std::from_chars(b, e, i);
      if (r.ec == std::errc() && r.ptr == e) {
        v.int_ = i;
        v.is_int_ = true;
        v.num_ = static_cast<double>(i);
        return v;
      }
      // Out of int64 range: kept as a double only.
    }
    double d = 0;
    auto r = std::from_chars(b, e, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Underflow reads as (signed) zero; overflow has no double and is an error.
      if (decimal_exponent(std::string_view(b, static_cast<std::size_t>(e - b))) >= 0)
        fail_at("number out of range", start);
      d = *b == '-' ? -0.0 : 0.0;
    } else if (r.ec != std::errc() || r.ptr != e) {
      fail_at("invalid number", start);
    }
    v.num_ = d;
    return v;
  }

  // floor(log10(|x|)) of a nonzero, grammatical number text, saturated (sign is all we need).
  static long long decimal_exponent(std::string_view t) {
    std::size_t i = t[0] == '-' ? 1 : 0;
    long long pos = 0;  // exponent of the first nonzero digit, relative to the units digit
    long long int_digits = 0;
    bool seen_nonzero = false, after_point = false;
    long long frac_zeros = 0;
    for (; i < t.size() && t[i] != 'e' && t[i] != 'E'; ++i) {
      if (t[i] == '.') {
        after_point = true;
        continue;
      }
      if (!after_point) {
        if (seen_nonzero || t[i] != '0') {
          seen_nonzero = true;
          ++int_digits;
        }
      } else if (!seen_nonzero) {
        if (t[i] == '0')
          ++frac_zeros;
        else
          seen_nonzero = true;
      }
    }
    pos = int_digits > 0 ? int_digits - 1 : -(frac_zeros + 1);
    long long exp = 0;
    if (i < t.size()) {
      ++i;
      bool neg = false;
      if (t[i] == '+' || t[i] == '-') neg = t[i++] == '-';
      for (; i < t.size(); ++i) exp = std::min(exp * 10 + (t[i] - '0'), 1LL << 40);
      if (neg) exp = -exp;
    }
    return pos + exp;
  }

  std::string_view s_;
  std::string_view what_;
  const char* op_;
  std::size_t pos_ = 0;
};

/// Parses one JSON text. Errors: lrt::Error(op, "<what>: <reason> at byte N"); op names the
/// operation the text belongs to ("safetensors" for a checkpoint's header: the same words with
/// exceptions and without).
inline Value parse(std::string_view text, std::string_view what = "json", const char* op = "json") {
  return Parser(text, what, op).parse_document();
}

}  // namespace json
}  // namespace v0
}  // namespace lrt
