// lrt/tokenizer/tokenizer.hpp: a byte-level BPE tokenizer with tiktoken's semantics (a split
// pattern, then rank-based merges within each piece), its special tokens, and lrt's tokenizer file.
//   auto tk = lrt::tok::Tokenizer::load("tokenizer.lrt");
//   std::vector<lrt::tok::token_t> ids = tk.encode("Hello, world!");  // tiktoken's encode_ordinary
//   std::string text = tk.decode(ids);
// Rules:
//   - encode: the pattern splits the text into pieces, each piece is encoded by encode_piece
//     (bpe.hpp); special-token text is ordinary text (encode_ordinary). decode is the bytes of the
//     ranks, a special's text for a special; an unknown id is an lrt::Error naming it and where.
//   - ranks 0..n-1 are the ordinary tokens (all 256 single bytes among them); specials have ids
//     >= n, distinct, with distinct non-empty texts; bos is a special's id; vocab_size = max id + 1
//     (an id in a gap between specials is unknown: token_bytes_table holds 0 there).
//   - pattern: a built-in name (patterns.hpp: gpt2, cl100k, o200k, nanochat) or a custom regex,
//     compiled at construction (pattern_name() "custom"); it may not hold a raw line break.
// lrt's tokenizer file (serialize / parse / load / save), text, lines end in "\n":
//   lrt-tokenizer 1
//   pattern-name nanochat                      (a built-in name, or "custom")
//   pattern <the regex verbatim, to the end of the line>   (for a built-in, its exact source)
//   special <id> <base64 of its text>          (zero or more lines, in the tokenizer's order)
//   bos <id>
//   ranks <n>
//   <n lines "base64 rank": tiktoken's rank file, rank_file.hpp>
// parse checks every field and names the file and line in its errors ("[tokenizer] f:3: ...").
// fingerprint: FNV-1a 64 of serialize(), 16 lowercase hex digits (platform independent).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/read_file.hpp"
#include "../core/thread_pool.hpp"
#include "bpe.hpp"
#include "patterns.hpp"
#include "rank_file.hpp"
#include "regex.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {

/// A special token: its text (decoded as is, never produced by encode) and its id.
struct Special {
  std::string text;
  token_t id;
};

namespace detail {
inline bool is_builtin_pattern(std::string_view name) {
  for (std::string_view n : builtin_pattern_names())
    if (n == name) return true;
  return false;
}

/// FNV-1a 64 of bytes.
inline std::uint64_t fnv1a64(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

/// Runs f(begin, end) over [0, n) on `threads` threads (<= 0: lrt's pool).
template <class F>
void parallel_chunks(index_t n, int threads, F&& f) {
  if (threads <= 0) {
    ThreadPool::global().parallel_for(n, 1, f);
  } else if (threads == 1 || n <= 1) {
    f(index_t{0}, n);
  } else {
    ThreadPool pool(static_cast<int>(std::min<index_t>(threads, n)));
    pool.parallel_for(n, 1, f);
  }
}
}  // namespace detail

class Tokenizer {
 public:
  /// tokens_by_rank[r] = bytes of rank r; pattern: a built-in name or a regex; see the top.
  Tokenizer(std::vector<std::string> tokens_by_rank, std::string pattern, std::vector<Special> specials, token_t bos)
      : table_(checked_table(tokens_by_rank)),
        pattern_name_(detail::is_builtin_pattern(pattern) ? pattern : "custom"),
        pattern_(checked_source(pattern)),
        regex_(Regex::compile(pattern_)),
        specials_(std::move(specials)),
        bos_(bos) {
    const auto n = static_cast<token_t>(table_.size());
    vocab_size_ = n;
    for (std::size_t i = 0; i < specials_.size(); ++i) {
      const Special& s = specials_[i];
      check(!s.text.empty(), "tokenizer", "special ", i, " (id ", s.id, ") has empty text");
      check(s.id >= n, "tokenizer", "special '", s.text, "' has id ", s.id, ", which is a rank (ranks: 0..", n - 1,
            ")");
      check(s.id < 0x7fffffffu, "tokenizer", "special '", s.text, "' has too large an id ", s.id);
      for (std::size_t j = 0; j < i; ++j) {
        check(specials_[j].id != s.id, "tokenizer", "specials '", specials_[j].text, "' and '", s.text,
              "' have the same id ", s.id);
        check(specials_[j].text != s.text, "tokenizer", "special '", s.text, "' twice");
      }
      by_id_.emplace_back(s.id, static_cast<std::uint32_t>(i));
      vocab_size_ = std::max<token_t>(vocab_size_, s.id + 1);
    }
    std::sort(by_id_.begin(), by_id_.end());
    check(special_index(bos_) >= 0, "tokenizer", "bos ", bos_, " is not a special's id");
    tokens_ = std::move(tokens_by_rank);
  }

  /// tiktoken's encode_ordinary.
  std::vector<token_t> encode(std::string_view text) const {
    std::vector<token_t> out;
    encode(text, out);
    return out;
  }
  /// Appends the ids of text to out.
  void encode(std::string_view text, std::vector<token_t>& out) const {
    BpeScratch scratch;
    encode_with(text, out, scratch);
  }
  /// Encodes every document, in parallel on `threads` threads (<= 0: lrt's pool); the same
  /// result as one by one.
  std::vector<std::vector<token_t>> encode_documents(std::span<const std::string_view> docs, int threads) const {
    std::vector<std::vector<token_t>> out(docs.size());
    detail::parallel_chunks(static_cast<index_t>(docs.size()), threads, [&](index_t b, index_t e) {
      BpeScratch scratch;
      for (index_t i = b; i < e; ++i) {
        const auto k = static_cast<std::size_t>(i);
        out[k].reserve(docs[k].size() / 3 + 1);
        encode_with(docs[k], out[k], scratch);
      }
    });
    return out;
  }

  /// The bytes of ids; a special gives its text.
  std::string decode(std::span<const token_t> ids) const {
    std::string out;
    std::size_t total = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) total += token_at(ids[i], i).size();
    out.reserve(total);
    for (token_t id : ids) out += token_unchecked(id);
    return out;
  }
  /// The bytes of an ordinary token, the text of a special.
  std::string_view token(token_t id) const {
    if (id < table_.size()) return table_.bytes(id);
    const int s = special_index(id);
    check(s >= 0, "tokenizer", "unknown token id ", id, " (", describe_vocab(), ")");
    return specials_[static_cast<std::size_t>(s)].text;
  }
  /// The bytes of an ordinary token; 0 for a special (for bits per byte).
  index_t token_bytes(token_t id) const {
    if (id < table_.size()) return static_cast<index_t>(table_.bytes(id).size());
    check(special_index(id) >= 0, "tokenizer", "unknown token id ", id, " (", describe_vocab(), ")");
    return 0;
  }
  /// token_bytes of ids 0..vocab_size()-1 (0 for specials and unused ids).
  std::vector<index_t> token_bytes_table() const {
    std::vector<index_t> t(vocab_size_, 0);
    for (std::size_t r = 0; r < table_.size(); ++r)
      t[r] = static_cast<index_t>(table_.bytes(static_cast<std::uint32_t>(r)).size());
    return t;
  }
  token_t vocab_size() const noexcept { return vocab_size_; }
  std::size_t num_ranks() const noexcept { return table_.size(); }
  token_t bos() const noexcept { return bos_; }
  const std::vector<Special>& specials() const noexcept { return specials_; }
  const std::string& pattern_name() const noexcept { return pattern_name_; }
  const std::string& pattern() const noexcept { return pattern_; }
  /// tokens by rank (what the constructor was given).
  const std::vector<std::string>& tokens_by_rank() const noexcept { return tokens_; }
  const RankTable& rank_table() const noexcept { return table_; }

  /// lrt's tokenizer file (see the top).
  std::string serialize() const {
    std::string out = "lrt-tokenizer 1\npattern-name " + pattern_name_ + "\npattern " + pattern_ + "\n";
    for (const Special& s : specials_)
      out += "special " + std::to_string(s.id) + " " + detail::base64_encode(s.text) + "\n";
    out += "bos " + std::to_string(bos_) + "\nranks " + std::to_string(table_.size()) + "\n";
    out += write_ranks(tokens_);
    return out;
  }

  /// Parses lrt's tokenizer file; label names it in errors.
  static Tokenizer parse(std::string_view text, std::string_view label) {
    using detail::where;
    std::size_t pos = 0, no = 0;
    std::string_view line;
    const auto next_line = [&]() -> bool {
      if (pos >= text.size()) return false;
      std::size_t e = text.find('\n', pos);
      const std::size_t nx = e == std::string_view::npos ? text.size() : e + 1;
      if (e == std::string_view::npos) e = text.size();
      line = text.substr(pos, e - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      pos = nx;
      ++no;
      return true;
    };
    // "key value": the line must start with key and one space; returns the value.
    const auto field = [&](std::string_view key) -> std::string_view {
      check(next_line(), "tokenizer", where(label, no + 1), "the file ends before its '", key, "' line");
      check(line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ', "tokenizer",
            where(label, no), "expected '", key, " ...'");
      return line.substr(key.size() + 1);
    };
    const auto number = [&](std::string_view s, std::string_view what) -> token_t {
      std::uint64_t v = 0;
      check(detail::parse_uint(s, 0x7fffffffu, v), "tokenizer", where(label, no), what, " '", s,
            "' is not a decimal integer below 2^31 - 1");
      return static_cast<token_t>(v);
    };
    check(next_line() && line.substr(0, 14) == "lrt-tokenizer ", "tokenizer", where(label, 1),
          "not an lrt tokenizer file (expected 'lrt-tokenizer 1')");
    check(line == "lrt-tokenizer 1", "tokenizer", where(label, 1), "unsupported version '", line.substr(14),
          "' (this lrt reads version 1)");
    const std::string name(field("pattern-name"));
    check(name == "custom" || detail::is_builtin_pattern(name), "tokenizer", where(label, no), "unknown pattern name '",
          name, "' (a built-in name or 'custom')");
    std::string pattern(field("pattern"));
    const std::size_t pattern_line = no;
    if (name != "custom") {
      check(pattern == builtin_pattern(name), "tokenizer", where(label, no), "the pattern differs from built-in '",
            name, "' (a file from another version? name it 'custom' to keep this regex)");
      pattern = name;
    } else {
      check(!detail::is_builtin_pattern(pattern), "tokenizer", where(label, no), "custom pattern '", pattern,
            "' is a built-in name");
#if LRT_EXCEPTIONS
      try {
        (void)Regex::compile(pattern);
      } catch (const Error& e) {
        ::lrt::throw_error("tokenizer", where(label, pattern_line) + "bad custom pattern: " + e.what());
      }
#else
      (void)Regex::compile(pattern);
      (void)pattern_line;
#endif
    }
    std::vector<Special> specials;
    std::vector<std::size_t> special_line;
    std::string tok;
    token_t bos = 0;
    for (;;) {
      check(next_line(), "tokenizer", where(label, no + 1), "the file ends before its 'bos' line");
      if (line.substr(0, 8) == "special ") {
        const std::string_view rest = line.substr(8);
        const std::size_t sp = rest.find(' ');
        check(sp != std::string_view::npos && rest.find(' ', sp + 1) == std::string_view::npos, "tokenizer",
              where(label, no), "expected 'special ID BASE64'");
        const token_t id = number(rest.substr(0, sp), "special id");
        const std::string why = detail::base64_decode(rest.substr(sp + 1), tok);
        check(why.empty(), "tokenizer", where(label, no), "bad base64 special text: ", why);
        check(!tok.empty(), "tokenizer", where(label, no), "empty special text");
        for (std::size_t j = 0; j < specials.size(); ++j) {
          check(specials[j].id != id, "tokenizer", where(label, no), "special id ", id, " again (line ",
                special_line[j], ")");
          check(specials[j].text != tok, "tokenizer", where(label, no), "special text again (line ", special_line[j],
                ")");
        }
        specials.push_back(Special{tok, id});
        special_line.push_back(no);
        continue;
      }
      check(line.substr(0, 4) == "bos ", "tokenizer", where(label, no), "expected 'special ID BASE64' or 'bos ID'");
      bos = number(line.substr(4), "bos");
      break;
    }
    const std::size_t bos_line = no;
    bool bos_found = false;
    for (const Special& s : specials) bos_found |= s.id == bos;
    check(bos_found, "tokenizer", where(label, bos_line), "bos ", bos, " is not a special's id");
    std::uint64_t n = 0;
    const std::string_view count = field("ranks");
    check(detail::parse_uint(count, 0xffffffffu, n) && n > 0, "tokenizer", where(label, no), "ranks '", count,
          "' is not a positive decimal integer");
    std::vector<std::string> tokens = detail::parse_rank_lines(text.substr(pos), label, no + 1, n);
    for (std::size_t j = 0; j < specials.size(); ++j)
      check(specials[j].id >= n, "tokenizer", where(label, special_line[j]), "special id ", specials[j].id,
            " is a rank (ranks: 0..", n - 1, ")");
#if LRT_EXCEPTIONS
    try {
      return Tokenizer(std::move(tokens), std::move(pattern), std::move(specials), bos);
    } catch (const Error& e) {
      ::lrt::throw_error("tokenizer", std::string(label) + ": " + e.what());
    }
#else
    return Tokenizer(std::move(tokens), std::move(pattern), std::move(specials), bos);
#endif
  }
  /// Reads lrt's tokenizer file.
  static Tokenizer load(const std::string& path) { return parse(read_file(path, "tokenizer"), path); }
  /// Writes lrt's tokenizer file to path (through path.tmp and a rename).
  void save(const std::string& path) const {
    const std::string tmp = path + ".tmp", text = serialize();
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      check(static_cast<bool>(f), "tokenizer", "cannot write ", tmp);
      f.write(text.data(), static_cast<std::streamsize>(text.size()));
      f.close();
      check(!f.fail(), "tokenizer", "cannot write ", tmp);
    }
    check(std::rename(tmp.c_str(), path.c_str()) == 0, "tokenizer", "cannot rename ", tmp, " to ", path);
  }
  /// 16 hex digits: FNV-1a 64 of serialize().
  std::string fingerprint() const {
    const std::uint64_t h = detail::fnv1a64(serialize());
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }

 private:
  static RankTable checked_table(const std::vector<std::string>& tokens) {
    RankTable t(tokens);
    check(t.size() > 0, "tokenizer", "no tokens");
    for (int b = 0; b < 256; ++b)
      check(t.byte_rank(static_cast<unsigned char>(b)) != RankTable::npos, "tokenizer", "byte ", b,
            " is not a token (all 256 single bytes must be)");
    return t;
  }
  static std::string checked_source(const std::string& pattern) {
    if (is_pattern_name(pattern)) return std::string(builtin_pattern(pattern));  // unknown names throw
    check(pattern.find_first_of("\r\n") == std::string::npos, "tokenizer",
          "the pattern holds a raw line break (write it as \\n or \\r)");
    return pattern;
  }
  void encode_with(std::string_view text, std::vector<token_t>& out, BpeScratch& scratch) const {
    const char* p = text.data();
    regex_.split(text, [&](std::size_t b, std::size_t e) {
      if (e - b == 1)
        out.push_back(table_.byte_rank(static_cast<unsigned char>(p[b])));
      else
        encode_piece(table_, std::string_view(p + b, e - b), out, scratch);
    });
  }
  int special_index(token_t id) const noexcept {
    const auto it = std::lower_bound(by_id_.begin(), by_id_.end(), std::pair<token_t, std::uint32_t>(id, 0));
    return it != by_id_.end() && it->first == id ? static_cast<int>(it->second) : -1;
  }
  std::string_view token_unchecked(token_t id) const noexcept {
    if (id < table_.size()) return table_.bytes(id);
    return specials_[static_cast<std::size_t>(special_index(id))].text;
  }
  std::string_view token_at(token_t id, std::size_t pos) const {
    if (id < table_.size()) return table_.bytes(id);
    const int s = special_index(id);
    check(s >= 0, "tokenizer", "unknown token id ", id, " at position ", pos, " (", describe_vocab(), ")");
    return specials_[static_cast<std::size_t>(s)].text;
  }
  std::string describe_vocab() const {
    return std::to_string(table_.size()) + " ranks, " + std::to_string(specials_.size()) + " specials, vocab size " +
           std::to_string(vocab_size_);
  }

  RankTable table_;
  std::string pattern_name_, pattern_;
  Regex regex_;
  std::vector<std::string> tokens_;
  std::vector<Special> specials_;
  std::vector<std::pair<token_t, std::uint32_t>> by_id_;  // (id, index in specials_), sorted
  token_t bos_;
  token_t vocab_size_ = 0;
};

}  // namespace tok
}  // namespace v0
}  // namespace lrt
