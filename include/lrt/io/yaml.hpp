// lrt/io/yaml.hpp: the part of YAML that configuration files such as DCLM's core.yaml use, read
// into a json::Value: block mappings and block sequences by indentation (a sequence may sit at
// its key's indentation, an item may start a mapping on its own line, `- key: value`, or after a
// bare `-`), flow sequences of scalars (`[0, 5]`), plain, single-quoted and double-quoted scalars
// on one line, and `#` comments. Plain scalars resolve as PyYAML's safe_load does for the forms
// kept here: null (~, null), booleans (true/false, yes/no, on/off in their three spellings),
// decimal integers, decimal floats; anything else is a string.
// Everything else (anchors and aliases, tags, flow mappings, block scalars `|` `>`, multi-line
// scalars, several documents, tabs in indentation, duplicate keys, invalid UTF-8) is an lrt::Error("yaml", ...)
// naming the file and line, never a silently different value.
//
//   const lrt::json::Value v = lrt::yaml::parse(text, "core.yaml");
#pragma once

#include <cctype>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "json.hpp"

namespace lrt {
inline namespace v0 {
namespace yaml {

namespace detail {

/// One significant line: its number (1-based), indentation and text without the indentation and
/// without a trailing comment.
struct Line {
  int number = 0;
  int indent = 0;
  std::string_view text;
};

class Reader {
 public:
  Reader(std::string_view text, std::string_view what) : what_(what) { split(text); }

  json::Value document() {
    if (lines_.empty()) return json::Value();  // an empty file is null, as in PyYAML
    json::Value v = node(lines_[0].indent);
    if (pos_ < lines_.size())
      fail(lines_[pos_], "unexpected indentation (less than the first line's, or an item after the document's end)");
    return v;
  }

 private:
  [[noreturn]] void fail(const Line& l, std::string_view why) const { fail_at(l.number, why); }
  [[noreturn]] void fail_at(int line, std::string_view why) const {
    throw_error("yaml", std::string(what_) + ":" + std::to_string(line) + ": " + std::string(why) +
                            " (lrt reads a subset of YAML: block mappings and sequences, flow lists of scalars, "
                            "one-line scalars)");
  }

  /// Where a comment starts in s (a '#' at the start or after a space, outside quotes), or npos.
  std::size_t comment_start(std::string_view s, int number) const {
    char quote = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (quote == '\'') {
        if (c == '\'') {
          if (i + 1 < s.size() && s[i + 1] == '\'')
            ++i;
          else
            quote = 0;
        }
      } else if (quote == '"') {
        if (c == '\\')
          ++i;
        else if (c == '"')
          quote = 0;
      } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
        return i;
      } else if (c == '\'' || c == '"') {
        std::size_t p = i;  // a quote opens a scalar only where a value starts
        while (p > 0 && s[p - 1] == ' ') --p;
        if (p == 0 || std::string_view("[,:-").find(s[p - 1]) != std::string_view::npos) quote = c;
      }
    }
    if (quote != 0) fail_at(number, "a quoted scalar does not end on its line");
    return std::string_view::npos;
  }

  /// Length of the well-formed UTF-8 sequence at s[i] (Unicode Table 3-7), or 0.
  static std::size_t utf8_len(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
    const unsigned c = b(0);
    if (c < 0x80) return 1;
    const auto cont = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return b(k) >= lo && b(k) <= hi; };
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      const bool ok = c == 0xE0 ? cont(1, 0xA0) : c == 0xED ? cont(1, 0x80, 0x9F) : cont(1);
      return ok && cont(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      const bool ok = c == 0xF0 ? cont(1, 0x90) : c == 0xF4 ? cont(1, 0x80, 0x8F) : cont(1);
      return ok && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
  }

  void split(std::string_view text) {
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
    int at = 1;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t n = utf8_len(text, i);
      if (n == 0) fail_at(at, "invalid UTF-8");
      if (text[i] == '\n') ++at;
      i += n;
    }
    int number = 0;
    while (!text.empty() || number == 0) {
      ++number;
      const std::size_t nl = text.find('\n');
      std::string_view s = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
      if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
      std::size_t ind = 0;
      while (ind < s.size() && s[ind] == ' ') ++ind;
      if (ind < s.size() && s[ind] == '\t') {
        const std::size_t c = s.find_first_not_of(" \t");
        if (c != std::string_view::npos && s[c] != '#') fail_at(number, "a tab in the indentation");
      }
      std::string_view body = s.substr(ind);
      const std::size_t c = comment_start(body, number);
      if (c != std::string_view::npos) body = body.substr(0, c);
      while (!body.empty() && (body.back() == ' ' || body.back() == '\t')) body.remove_suffix(1);
      if (body.empty()) {
        if (nl == std::string_view::npos) break;
        continue;
      }
      if (ind == 0 && (body == "---" || body.substr(0, 4) == "--- " || body == "..."))
        fail_at(number, "document markers (---, ...)");
      lines_.push_back({number, static_cast<int>(ind), body});
      if (nl == std::string_view::npos) break;
    }
  }

  static bool is_item(std::string_view t) { return t == "-" || t.substr(0, 2) == "- "; }

  /// The node whose first line is lines_[pos_], at indentation `indent`.
  json::Value node(int indent) {
    const Line& l = lines_[pos_];
    if (l.indent != indent) fail(l, "unexpected indentation");
    if (depth_ >= json::Parser::max_depth) fail(l, "nesting deeper than 128 levels");
    struct Deeper {  // the depth of the node being read, for the bound above
      int& d;
      explicit Deeper(int& x) : d(++x) {}
      ~Deeper() { --d; }
    } deeper(depth_);
    if (is_item(l.text)) return sequence(indent);
    if (key_end(l.text) != std::string_view::npos) return mapping(indent);
    fail(l, "a value on its own line where a mapping or a sequence was expected");
  }

  /// The end of a mapping key in t (the ':' followed by a space or the line's end), or npos.
  std::size_t key_end(std::string_view t) const {
    if (t.empty() || t[0] == '"' || t[0] == '\'' || t[0] == '[' || t[0] == '{') return std::string_view::npos;
    for (std::size_t i = 0; i < t.size(); ++i)
      if (t[i] == ':' && (i + 1 == t.size() || t[i + 1] == ' ')) return i;
    return std::string_view::npos;
  }

  /// A block sequence at `indent`: lines "- ..." at that indentation.
  json::Value sequence(int indent) {
    json::Value seq = json::Value::array();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent && is_item(lines_[pos_].text)) {
      const Line l = lines_[pos_];
      if (l.text == "-") {  // the item is the block below, indented more
        ++pos_;
        if (pos_ >= lines_.size() || lines_[pos_].indent <= indent) {
          seq.push_back(json::Value());
          continue;
        }
        seq.push_back(node(lines_[pos_].indent));
        continue;
      }
      std::size_t off = 2;
      while (off < l.text.size() && l.text[off] == ' ') ++off;
      const std::string_view rest = l.text.substr(off);
      const int inner = indent + static_cast<int>(off);
      if (is_item(rest)) fail(l, "a sequence nested on one line (- - x)");
      if (key_end(rest) != std::string_view::npos) {
        // "- key: value": a mapping whose keys sit at the column of `key`
        lines_[pos_].indent = inner, lines_[pos_].text = rest;
        seq.push_back(mapping(inner));
      } else {
        ++pos_;
        seq.push_back(scalar_or_flow(rest, l));
      }
    }
    return seq;
  }

  /// A block mapping at `indent`.
  json::Value mapping(int indent) {
    json::Value map = json::Value::object();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent && !is_item(lines_[pos_].text)) {
      const Line l = lines_[pos_];
      const std::size_t k = key_end(l.text);
      if (k == std::string_view::npos) fail(l, "expected 'key: value'");
      const std::string key(l.text.substr(0, k));
      if (key.find_first_of("&*!|>%@`{}[]") == 0) fail(l, "a key starting with a YAML indicator");
      if (map.find(key) != nullptr) fail(l, "duplicate key '" + key + "'");
      std::size_t v = k + 1;
      while (v < l.text.size() && l.text[v] == ' ') ++v;
      const std::string_view rest = l.text.substr(v);
      ++pos_;
      if (!rest.empty()) {
        map[key] = scalar_or_flow(rest, l);
        continue;
      }
      // "key:" with the value below: a block indented more, or a sequence at the same indentation
      if (pos_ < lines_.size() &&
          (lines_[pos_].indent > indent || (lines_[pos_].indent == indent && is_item(lines_[pos_].text))))
        map[key] = node(lines_[pos_].indent);
      else
        map[key] = json::Value();
    }
    return map;
  }

  json::Value scalar_or_flow(std::string_view t, const Line& l) const {
    if (t[0] == '[') {
      if (t.back() != ']') fail(l, "a flow sequence must end on its line with ']'");
      json::Value seq = json::Value::array();
      std::string_view in = t.substr(1, t.size() - 2);
      while (!in.empty() && in.front() == ' ') in.remove_prefix(1);
      while (!in.empty() && in.back() == ' ') in.remove_suffix(1);
      if (in.empty()) return seq;
      while (true) {
        std::size_t end = 0;
        if (in[0] == '"' || in[0] == '\'') {
          end = quoted_end(in, l) + 1;
        } else {
          end = in.find(',');
          if (end == std::string_view::npos) end = in.size();
        }
        std::string_view item = in.substr(0, end);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (item.empty()) fail(l, "an empty item in a flow sequence");
        if (item[0] == '[' || item[0] == '{') fail(l, "nested flow collections");
        seq.push_back(scalar(item, l));
        in = in.substr(end);
        while (!in.empty() && in.front() == ' ') in.remove_prefix(1);
        if (in.empty()) break;
        if (in[0] != ',') fail(l, "expected ',' between the items of a flow sequence");
        in.remove_prefix(1);
        while (!in.empty() && in.front() == ' ') in.remove_prefix(1);
        if (in.empty()) break;  // a trailing comma, as YAML allows
      }
      return seq;
    }
    return scalar(t, l);
  }

  /// The index of the closing quote of the quoted scalar at the start of t.
  std::size_t quoted_end(std::string_view t, const Line& l) const {
    const char q = t[0];
    for (std::size_t i = 1; i < t.size(); ++i) {
      if (q == '"' && t[i] == '\\') {
        ++i;
      } else if (t[i] == q) {
        if (q == '\'' && i + 1 < t.size() && t[i + 1] == '\'') {
          ++i;
          continue;
        }
        return i;
      }
    }
    fail(l, "a quoted scalar does not end on its line");
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18)), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  json::Value scalar(std::string_view t, const Line& l) const {
    if (t[0] == '"' || t[0] == '\'') {
      const std::size_t e = quoted_end(t, l);
      if (e + 1 != t.size()) fail(l, "characters after a quoted scalar");
      std::string out;
      const std::string_view in = t.substr(1, e - 1);
      for (std::size_t i = 0; i < in.size(); ++i) {
        const char c = in[i];
        if (t[0] == '\'') {
          out += c;
          if (c == '\'') ++i;  // '' is one quote
          continue;
        }
        if (c != '\\') {
          out += c;
          continue;
        }
        const char x = in[++i];
        switch (x) {
          case '0':
            out += '\0';
            break;
          case 'a':
            out += '\a';
            break;
          case 'b':
            out += '\b';
            break;
          case 't':
          case '\t':
            out += '\t';
            break;
          case 'n':
            out += '\n';
            break;
          case 'v':
            out += '\v';
            break;
          case 'f':
            out += '\f';
            break;
          case 'r':
            out += '\r';
            break;
          case 'e':
            out += '\x1b';
            break;
          case ' ':
            out += ' ';
            break;
          case '"':
            out += '"';
            break;
          case '/':
            out += '/';
            break;
          case '\\':
            out += '\\';
            break;
          case 'N':
            append_utf8(out, 0x85);
            break;
          case '_':
            append_utf8(out, 0xA0);
            break;
          case 'L':
            append_utf8(out, 0x2028);
            break;
          case 'P':
            append_utf8(out, 0x2029);
            break;
          case 'x':
          case 'u':
          case 'U': {
            const std::size_t n = x == 'x' ? 2 : x == 'u' ? 4 : 8;
            std::uint32_t cp = 0;
            const std::string_view hex = in.substr(i + 1, n);
            const auto r = std::from_chars(hex.data(), hex.data() + hex.size(), cp, 16);
            if (hex.size() != n || r.ptr != hex.data() + hex.size() || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
              fail(l, std::string("a bad \\") + x + " escape in a double-quoted scalar");
            append_utf8(out, cp);
            i += n;
            break;
          }
          default:
            fail(l, std::string("an unknown escape \\") + x + " in a double-quoted scalar");
        }
      }
      return json::Value(std::move(out));
    }
    const char c0 = t[0];
    if (std::string_view("&*!|>%@`{").find(c0) != std::string_view::npos)
      fail(l, std::string("a value starting with '") + c0 + "' (anchors, aliases, tags, block scalars, flow mappings)");
    if (t.find(": ") != std::string_view::npos || t.back() == ':') fail(l, "a mapping inside a plain value");
    if (t == "~" || t == "null" || t == "Null" || t == "NULL") return json::Value();
    for (std::string_view b : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})
      if (t == b) return json::Value(true);
    for (std::string_view b : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})
      if (t == b) return json::Value(false);
    std::string_view digits = t;
    if (digits[0] == '-' || digits[0] == '+') digits.remove_prefix(1);
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
      if (digits.size() > 1 && digits[0] == '0') fail(l, "an integer with a leading zero (YAML 1.1 reads it as octal)");
      std::int64_t v = 0;
      const std::string_view num = t[0] == '+' ? t.substr(1) : t;
      const auto r = std::from_chars(num.data(), num.data() + num.size(), v);
      if (r.ec != std::errc() || r.ptr != num.data() + num.size()) fail(l, "an integer out of range");
      return json::Value(v);
    }
    // decimal floats as YAML 1.1 writes them: digits, a point, digits, an optional exponent
    if (!digits.empty() && (std::isdigit(static_cast<unsigned char>(digits[0])) || digits[0] == '.') &&
        digits.find('.') != std::string_view::npos &&
        digits.find_first_not_of("0123456789.eE+-") == std::string_view::npos) {
      double v = 0;
      const std::string_view num = t[0] == '+' ? t.substr(1) : t;
      const auto r = std::from_chars(num.data(), num.data() + num.size(), v);
      if (r.ec == std::errc() && r.ptr == num.data() + num.size()) return json::Value(v);
    }
    return json::Value(std::string(t));
  }

  std::string_view what_;
  std::vector<Line> lines_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace detail

/// The YAML document `text` (the subset above) as a json::Value; `what` names it in errors.
inline json::Value parse(std::string_view text, std::string_view what = "yaml") {
  return detail::Reader(text, what).document();
}

}  // namespace yaml
}  // namespace v0
}  // namespace lrt
