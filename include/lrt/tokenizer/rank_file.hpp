// lrt/tokenizer/rank_file.hpp: tiktoken's rank file (what its load_tiktoken_bpe reads): one line
// "base64(token) rank" per token, e.g. "IQ== 0".
//   std::vector<std::string> tokens = lrt::tok::read_ranks(text, "cl100k.tiktoken");  // [rank] = bytes
//   std::string text = lrt::tok::write_ranks(tokens);   // ranks in order, "\n" after each line
// Rules of read_ranks (anything else is an lrt::Error, op "tokenizer", "label:LINE: what"):
//   - lines end in "\n" or "\r\n"; the last may lack it; empty lines are skipped (as tiktoken does);
//   - a line is exactly two fields split by one space: standard base64 (A-Z a-z 0-9 + /, length a
//     multiple of 4, "=" padding only at the end, no stray bits) of a non-empty token, and a
//     decimal rank (digits only, < 2^32 - 1);
//   - the ranks are 0..n-1 for n lines, each once (a rank >= n means a gap); tokens are distinct;
//   - all 256 single bytes are tokens (so every byte string can be encoded); the file is not empty.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {

namespace detail {
inline constexpr char kBase64Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with "=" padding.
inline std::string base64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  const auto byte = [&](std::size_t k) { return std::uint32_t{static_cast<unsigned char>(in[k])}; };
  for (; i + 3 <= in.size(); i += 3) {
    const std::uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    for (int s = 18; s >= 0; s -= 6) out += kBase64Alphabet[(v >> s) & 63];
  }
  if (const std::size_t rest = in.size() - i; rest > 0) {
    const std::uint32_t v = (byte(i) << 16) | (rest == 2 ? byte(i + 1) << 8 : 0);
    out += kBase64Alphabet[(v >> 18) & 63];
    out += kBase64Alphabet[(v >> 12) & 63];
    out += rest == 2 ? kBase64Alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

/// Strict standard base64 decoding; returns an empty string when fine, else why not.
inline std::string base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.size() % 4 != 0) return "its length " + std::to_string(in.size()) + " is not a multiple of 4";
  std::size_t pad = 0;
  while (pad < 2 && pad < in.size() && in[in.size() - 1 - pad] == '=') ++pad;
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::uint32_t acc = 0;
  const std::size_t data = in.size() - pad;
  for (std::size_t i = 0; i < data; ++i) {
    const int v = value(in[i]);
    if (v < 0) {
      const unsigned char c = static_cast<unsigned char>(in[i]);
      if (c == '=') return "misplaced '=' padding at character " + std::to_string(i + 1);
      return (c >= 0x21 && c < 0x7f ? "character '" + std::string(1, static_cast<char>(c)) + "'"
                                    : "byte " + std::to_string(c)) +
             " at character " + std::to_string(i + 1) + " is not base64";
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    if (i % 4 == 3) {
      out += static_cast<char>((acc >> 16) & 0xff);
      out += static_cast<char>((acc >> 8) & 0xff);
      out += static_cast<char>(acc & 0xff);
      acc = 0;
    }
  }
  if (pad == 2) {  // 2 characters: 12 bits, 1 byte
    if (acc & 0xf) return "stray bits before the '==' padding";
    out += static_cast<char>((acc >> 4) & 0xff);
  } else if (pad == 1) {  // 3 characters: 18 bits, 2 bytes
    if (acc & 0x3) return "stray bits before the '=' padding";
    out += static_cast<char>((acc >> 10) & 0xff);
    out += static_cast<char>((acc >> 2) & 0xff);
  }
  return {};
}

/// "label:line: " for error messages.
inline std::string where(std::string_view label, std::size_t line) {
  return std::string(label) + ":" + std::to_string(line) + ": ";
}

/// Parses a non-negative decimal below limit (digits only); returns false otherwise.
inline bool parse_uint(std::string_view s, std::uint64_t limit, std::uint64_t& v) {
  if (s.empty() || s.size() > 19) return false;
  v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v < limit;
}

/// Splits text into lines (without "\n" or "\r\n"), numbered from first_line; calls
/// f(line_number, line) for each, empty ones included.
template <class F>
void for_each_line(std::string_view text, std::size_t first_line, F&& f) {
  std::size_t pos = 0, no = first_line;
  while (pos < text.size()) {
    std::size_t e = text.find('\n', pos);
    const std::size_t next = e == std::string_view::npos ? text.size() : e + 1;
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = text.substr(pos, e - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    f(no++, line);
    pos = next;
  }
}

/// The rank lines of text (lines numbered from first_line) -> tokens by rank, with every check
/// of read_ranks. expected: the number of ranks the caller was told (npos: any).
inline std::vector<std::string> parse_rank_lines(std::string_view text, std::string_view label, std::size_t first_line,
                                                 std::size_t expected = std::string_view::npos) {
  std::size_t n = 0, last_line = first_line;
  for_each_line(text, first_line, [&](std::size_t no, std::string_view line) {
    last_line = no;
    if (!line.empty()) ++n;
  });
  if (expected != std::string_view::npos)
    check(n == expected, "tokenizer", where(label, last_line), "expected ", expected, " rank lines, found ", n);
  check(n > 0, "tokenizer", where(label, first_line), "no tokens (empty rank file)");
  std::vector<std::string> tokens(n);
  std::vector<std::size_t> line_of(n, 0);
  std::string tok;
  for_each_line(text, first_line, [&](std::size_t no, std::string_view line) {
    if (line.empty()) return;
    const std::size_t sp = line.find(' ');
    check(sp != std::string_view::npos, "tokenizer", where(label, no), "expected 'base64 rank', found no rank");
    const std::string_view b64 = line.substr(0, sp), num = line.substr(sp + 1);
    check(!b64.empty(), "tokenizer", where(label, no), "empty token field");
    check(num.find_first_of(" \t") == std::string_view::npos, "tokenizer", where(label, no),
          "extra fields after the rank (expected 'base64 rank')");
    const std::string why = base64_decode(b64, tok);
    check(why.empty(), "tokenizer", where(label, no), "bad base64 token: ", why);
    check(!tok.empty(), "tokenizer", where(label, no), "empty token");
    std::uint64_t r = 0;
    check(!num.empty(), "tokenizer", where(label, no), "missing rank");
    check(num[0] != '-', "tokenizer", where(label, no), "negative rank ", num);
    check(parse_uint(num, ~std::uint64_t{0}, r), "tokenizer", where(label, no), "rank '", num,
          "' is not a non-negative decimal integer");
    check(r < 0xffffffffu, "tokenizer", where(label, no), "rank ", num, " is too large");
    check(r < n, "tokenizer", where(label, no), "rank ", r, " but the file holds ", n, " tokens: ranks must be 0..",
          n - 1, " with no gaps");
    check(line_of[r] == 0, "tokenizer", where(label, no), "rank ", r, " again (first at line ", line_of[r], ")");
    line_of[r] = no;
    tokens[r] = tok;
  });
  std::unordered_map<std::string_view, std::size_t> seen;
  seen.reserve(2 * n);
  bool byte_seen[256] = {};
  for (std::size_t r = 0; r < n; ++r) {
    const auto [it, fresh] = seen.emplace(tokens[r], line_of[r]);
    if (!fresh) {
      const std::size_t a = std::min(it->second, line_of[r]), b = std::max(it->second, line_of[r]);
      check(false, "tokenizer", where(label, b), "the token of line ", a, " again");
    }
    if (tokens[r].size() == 1) byte_seen[static_cast<unsigned char>(tokens[r][0])] = true;
  }
  for (int b = 0; b < 256; ++b)
    check(byte_seen[b], "tokenizer", where(label, last_line), "the file ends without a token for byte ", b,
          " (all 256 single bytes must be tokens)");
  return tokens;
}
}  // namespace detail

/// Reads a tiktoken rank file: the result's [r] is the bytes of rank r. label names it in errors.
inline std::vector<std::string> read_ranks(std::string_view text, std::string_view label) {
  return detail::parse_rank_lines(text, label, 1);
}

/// Writes tokens (tokens[r] = bytes of rank r) as a tiktoken rank file, in rank order.
inline std::string write_ranks(const std::vector<std::string>& tokens) {
  std::string out;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    out += detail::base64_encode(tokens[r]);
    out += ' ';
    out += std::to_string(r);
    out += '\n';
  }
  return out;
}

}  // namespace tok
}  // namespace v0
}  // namespace lrt
