// lrt/tokenizer/regex.hpp: the pre-tokenizer's regex engine: splits text into the pieces that
// tiktoken's split patterns cut (Rust fancy-regex semantics: leftmost-first, Perl-style backtracking).
//   auto re = lrt::tok::Regex::compile(lrt::tok::builtin_pattern("cl100k"));
//   re.split("Hello world", [](std::size_t b, std::size_t e) { /* bytes [b, e) */ });  // "Hello", " world"
// Rules:
// - The text is decoded once per split into units (unicode.hpp): code points, and bytes that are not
//   part of well-formed UTF-8, each its own unit with no category that is not white space (only
//   negated classes, \S, \P{..} and `.` match it). Positions are unit indices; pieces are byte ranges.
// - split reports the matches of find_iter in order; text between two matches (where the pattern
//   matches nothing) is a piece of its own, so the pieces always cover the text. Empty matches are
//   not reported; as in Rust, an empty match moves the search on by one unit, and an empty match right
//   after a match is skipped.
// - Syntax (Rust regex): literals (UTF-8), escapes \n \r \t \f \v \a \e, \xHH \x{H..} \uHHHH \u{H..}
//   \UHHHHHHHH \U{H..}, any escaped ASCII punctuation (\' \\ \. ...); `.` (any unit but \n; with flag
//   s also \n); classes [...] with ranges, negation [^...], and inside them escapes and the class
//   escapes below; \d \D (\p{Nd}), \s \S (White_Space), \w \W ([\p{L}\p{M}\p{Nd}\p{Nl}_], an
//   approximation of Rust's Unicode \w), \p{..} \P{..} \pX \PX with L Lu Ll Lt Lm Lo LC M Mn Mc Me N
//   Nd Nl No White_Space (long names too, loose matching); alternation |; groups ( ) (?: ) (?P<n> )
//   (?<n> ) (no captures are kept); flags (?i) (?m) (?s) (?-i) and (?i: ) scoped; quantifiers ? * +
//   {n} {n,} {n,m}, lazy (??, *?, ...) and possessive (?+ *+ ++ {n,m}+, atomic); atomic groups (?> );
//   look-ahead (?= ) (?! ); anchors ^ $ (text start / end; with flag m, line start / end) \A \z;
//   word boundaries \b \B (by the \w above).
// - Case-insensitive matching (?i) folds ASCII letters (a/A ...), plus the two Unicode simple case
//   folds that reach ASCII letters: U+017F (long s) with s/S and U+212A (Kelvin sign) with k/K. Other
//   letters match as written, and \p{..} classes are not folded (Rust folds both).
// - Unsupported syntax throws lrt::Error (op "regex") naming the pattern and the byte position:
//   back-references (\1, \k<n>, (?P=n)), look-behind, POSIX classes, nested classes and class set
//   operations (&& -- ~~), flags other than i m s u, \Z \G, unknown escapes, unknown \p{..} classes.
// - A match attempt that backtracks more than 100 million times throws lrt::Error (op "regex"), as
//   fancy-regex gives up on catastrophic backtracking (the built-in patterns never come near).
// - Engine: a backtracking VM over the units. A repetition of one class is one instruction that
//   consumes the whole run (a greedy run keeps one backtrack entry and backs off only to positions
//   where the next step can start); an alternation picks its branches from a table of those each
//   first unit (ASCII code point or unit kind) can start. About 60-80 MB/s single-threaded at -O2
//   on English text with cl100k / nanochat.
// - Compiled regexes are immutable; split is const and thread-safe (its scratch is thread_local).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "unicode.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {

namespace detail {

// Unit kinds: the category (0..10), two kinds of "other", invalid bytes and the end of text.
inline constexpr std::uint8_t kKindSpace = 11;              // a White_Space code point (all are category Other)
inline constexpr std::uint8_t kKindOther = 12;              // any other code point of category Other
inline constexpr std::uint8_t kKindInvalid = 13;            // a byte that is not part of well-formed UTF-8
inline constexpr std::uint8_t kKindEnd = 14;                // the sentinel after the last unit
inline constexpr std::uint16_t kAllKinds = (1u << 14) - 1;  // every kind a unit can have
inline constexpr std::uint32_t kEndCp = 0x7FFFFFFF;         // cp of the sentinel
inline constexpr std::uint32_t kInvalidCp = 0x110000;       // cp of an invalid byte b: kInvalidCp + b

inline std::uint8_t unit_kind(char32_t cp) noexcept {
  const Category c = category(cp);
  if (c != Category::Other) return static_cast<std::uint8_t>(c);
  return is_white_space(cp) ? kKindSpace : kKindOther;
}

inline constexpr std::uint16_t kind_bit(Category c) { return std::uint16_t(1u << static_cast<unsigned>(c)); }
inline constexpr std::uint16_t kLetterKinds = 0x1F;                             // Lu Ll Lt Lm Lo
inline constexpr std::uint16_t kMarkKinds = 0xE0;                               // Mn Mc Me
inline constexpr std::uint16_t kNumberKinds = 0x700;                            // Nd Nl No
inline constexpr std::uint16_t kWordKinds = kLetterKinds | kMarkKinds | 0x300;  // L M Nd Nl

/// A compiled character class. ASCII code points are looked up in a bitmap; other units by kind,
/// and, if the class names non-ASCII code points or ranges, in those ranges (then `neg` applies).
struct CharSet {
  std::uint64_t ascii[2] = {0, 0};
  std::uint16_t kinds = 0;      // fast path (no ranges): the kinds it matches, negation applied
  std::uint16_t raw_kinds = 0;  // with ranges: the kinds its items match, before negation
  bool neg = false;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;  // sorted, disjoint, all >= 0x80

  bool match(std::uint32_t cp, std::uint8_t kind) const noexcept {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    if (ranges.empty()) return (kinds >> kind) & 1;
    return match_slow(cp, kind);
  }
  bool match_slow(std::uint32_t cp, std::uint8_t kind) const noexcept {
    if (kind == kKindEnd) return false;
    bool r = (raw_kinds >> kind) & 1;
    if (!r && kind != kKindInvalid) {
      auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                                 [](std::uint32_t v, const auto& rg) { return v < rg.first; });
      r = it != ranges.begin() && cp <= std::prev(it)->second;
    }
    return r != neg;
  }
};

/// Builds a CharSet from items: ranges of code points (folded under (?i)) and sets of kinds.
struct SetBuilder {
  std::uint64_t ascii[2] = {0, 0};
  std::uint16_t kinds = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;

  void add_ascii(std::uint32_t c) { ascii[c >> 6] |= std::uint64_t(1) << (c & 63); }
  void add_cp(std::uint32_t c) { add_range(c, c, false); }
  void add_range(std::uint32_t lo, std::uint32_t hi, bool icase) {
    for (std::uint32_t c = lo; c <= hi && c < 128; ++c) add_ascii(c);
    if (hi >= 128) ranges.emplace_back(std::max<std::uint32_t>(lo, 128), hi);
    if (!icase) return;
    for (std::uint32_t c = lo; c <= hi && c < 128; ++c) {
      if (c >= 'a' && c <= 'z') add_ascii(c - 32);
      if (c >= 'A' && c <= 'Z') add_ascii(c + 32);
      if (c == 's' || c == 'S') ranges.emplace_back(0x17F, 0x17F);
      if (c == 'k' || c == 'K') ranges.emplace_back(0x212A, 0x212A);
    }
    if (lo <= 0x17F && 0x17F <= hi) add_ascii('s'), add_ascii('S');
    if (lo <= 0x212A && 0x212A <= hi) add_ascii('k'), add_ascii('K');
  }
  /// Every unit of the given kinds (the ASCII ones included).
  void add_kinds(std::uint16_t k) {
    kinds |= k;
    for (std::uint32_t c = 0; c < 128; ++c)
      if ((k >> unit_kind(c)) & 1) add_ascii(c);
  }
  /// Adds the complement of a range-free item (\S, \P{L}, \W).
  void add_negated(const SetBuilder& item) {
    ascii[0] |= ~item.ascii[0];
    ascii[1] |= ~item.ascii[1];
    kinds |= std::uint16_t(~item.kinds & kAllKinds);
  }
  CharSet build(bool negate) {
    CharSet s;
    std::sort(ranges.begin(), ranges.end());
    for (const auto& r : ranges) {
      if (!s.ranges.empty() && r.first <= s.ranges.back().second + 1)
        s.ranges.back().second = std::max(s.ranges.back().second, r.second);
      else
        s.ranges.push_back(r);
    }
    s.ascii[0] = negate ? ~ascii[0] : ascii[0];
    s.ascii[1] = negate ? ~ascii[1] : ascii[1];
    s.raw_kinds = kinds;
    s.neg = negate;
    s.kinds = negate ? std::uint16_t(~kinds & kAllKinds) : kinds;
    return s;
  }
};

/// A conservative "which units can start a match" set; nullable ones allow every unit and the end.
struct FirstSet {
  std::uint64_t ascii[2] = {0, 0};
  std::uint16_t kinds = 0;  // bit kKindEnd: may match empty
  bool nullable = false;
  static FirstSet all() {
    FirstSet f;
    f.ascii[0] = f.ascii[1] = ~std::uint64_t(0);
    f.kinds = 0x7FFF;
    f.nullable = true;
    return f;
  }
  void unite(const FirstSet& o) {
    ascii[0] |= o.ascii[0];
    ascii[1] |= o.ascii[1];
    kinds |= o.kinds;
  }
  bool viable(std::uint32_t cp, std::uint8_t kind) const noexcept {
    return cp < 128 ? (ascii[cp >> 6] >> (cp & 63)) & 1 : (kinds >> kind) & 1;
  }
};

/// Kinds that the code points of [lo, hi] (all >= 0x80) may have.
inline std::uint16_t kinds_in_range(std::uint32_t lo, std::uint32_t hi) {
  std::uint16_t k = 0;
  std::size_t i = std::upper_bound(tables::kCategoryStart, tables::kCategoryStart + tables::kCategoryRanges, lo) -
                  tables::kCategoryStart - 1;
  for (; i < tables::kCategoryRanges && tables::kCategoryStart[i] <= hi; ++i) {
    const unsigned c = tables::kCategoryValue[i];
    k |= c == static_cast<unsigned>(Category::Other) ? std::uint16_t((1u << kKindSpace) | (1u << kKindOther))
                                                     : std::uint16_t(1u << c);
  }
  return k;
}

enum class Op : std::uint8_t { Set, Run, Alt, Jmp, Assert, Atomic, Look, Mark, Check, Match };
enum class Greed : std::uint8_t { Greedy, Lazy, Possessive };
enum class AssertKind : std::uint8_t { TextStart, TextEnd, LineStart, LineEnd, WordB, NotWordB };

inline constexpr std::uint32_t kNoFollow = 0xFFFFFFFF;
inline constexpr std::uint8_t kThenMatch = 8;  // Set / Run mode bit: the next instruction is Match

struct Inst {
  Op op;
  std::uint8_t mode;  // Run: Greed; Assert: AssertKind; Look: 1 if negative
  std::uint32_t a = 0, b = 0, c = 0;
  std::uint32_t d = kNoFollow;  // Run (greedy): the follow set (a FirstSet), or kNoFollow
  // Set: a = set. Run: a = set, b = min, c = max. Alt: a = alt table. Jmp: a = target.
  // Atomic / Look: the body follows (ending in Match), a = the instruction after it.
  // Mark / Check: a = slot (the progress check of a loop whose body may match empty).
};

inline constexpr std::uint32_t kInf = 0xFFFFFFFF;

/// An alternation of up to 64 branches, with a table of the branches each unit may start.
struct AltTable {
  std::uint32_t targets[64] = {};
  std::uint64_t by_ascii[128] = {};
  std::uint64_t by_kind[16] = {};
};

struct Node {
  enum Type : std::uint8_t { Empty, Set, Concat, Alt, Repeat, Atomic, Look, Assert } type = Empty;
  std::uint8_t mode = 0;  // Repeat: Greed; Look: 1 if negative; Assert: AssertKind
  std::uint32_t set = 0, min = 0, max = 0;
  std::vector<std::uint32_t> kids;
};

struct Flags {
  bool i = false, m = false, s = false;
};

/// Scratch of one split call: the decoded text and the backtracking stack.
struct Frame {
  std::uint32_t pc;
  std::uint32_t tag;  // kFrameAlt, kFrameGreedy, kFrameLazy, kFrameRestore
  std::uint64_t aux;  // Alt: remaining branches; Run: lowest position / run start; Restore: old value
  std::size_t pos;
};
inline constexpr std::uint32_t kFrameAlt = 0, kFrameGreedy = 1, kFrameLazy = 2, kFrameRestore = 3;

/// The backtracking stack: a vector whose push stays inline (growth is out of line).
struct FrameStack {
  std::vector<Frame> buf;
  std::size_t n = 0;
  std::size_t size() const noexcept { return n; }
  LRT_ALWAYS_INLINE void push_back(const Frame& f) {
    if (n == buf.size()) [[unlikely]]
      grow();
    buf[n++] = f;
  }
  Frame& back() noexcept { return buf[n - 1]; }
  void pop_back() noexcept { --n; }
  void resize(std::size_t m) noexcept { n = m; }  // only to shrink
  void clear() noexcept { n = 0; }
  LRT_COLD void grow() { buf.resize(std::max<std::size_t>(64, buf.size() * 2)); }
};

struct Scratch {
  std::vector<std::uint32_t> cps;
  std::vector<std::uint8_t> kinds;
  FrameStack stack;
  std::vector<std::size_t> marks;
  bool busy = false;
};

inline Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace detail

/// A compiled split pattern (see the header comment for the syntax and the rules).
class Regex {
 public:
  /// Compiles pattern; throws lrt::Error("regex", ...) naming the pattern and position on bad syntax.
  static Regex compile(std::string_view pattern) {
    Regex re;
    re.source_ = std::string(pattern);
    Parser p{re, pattern, 0, 0, {}};
    const std::uint32_t root = p.parse();
    Compiler c{re, p.nodes, {}};
    c.compile_root(root);
    return re;
  }

  const std::string& source() const noexcept { return source_; }

  /// Splits text into consecutive pieces that cover all of its bytes, in order: f(begin, end) (byte
  /// offsets, begin < end) for each. Pieces are the matches of find_iter; text between two matches is
  /// a piece of its own. Empty matches are skipped. Thread-safe.
  template <class F>
  void split(std::string_view text, F&& f) const {
    detail::Scratch local;
    detail::Scratch& tls = detail::thread_scratch();
    detail::Scratch& s = tls.busy ? local : tls;  // f may call split again
    s.busy = true;
    struct Release {
      detail::Scratch& s;
      ~Release() { s.busy = false; }
    } release{s};
    decode(text, s);
    if (s.marks.size() < num_marks_) s.marks.resize(num_marks_);
    const std::size_t n = s.kinds.size() - 1;
    const std::uint32_t* cps = s.cps.data();
    // Byte offset of unit u, advanced monotonically from the last piece's end.
    std::size_t cur_unit = 0, cur_byte = 0;
    auto byte_at = [&](std::size_t u) {
      for (; cur_unit < u; ++cur_unit) {
        const std::uint32_t c = cps[cur_unit];
        cur_byte += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : c < 0x110000 ? 4 : 1;
      }
      return cur_byte;
    };
    std::size_t gap = 0, gap_byte = 0;  // start of the text not yet reported
    std::size_t pos = 0;
    while (pos <= n) {
      std::size_t start = pos, end = kNoMatch;
      for (; start <= n; ++start) {
        if (!first_.viable(cps[start], s.kinds[start])) continue;
        end = run(s, 0, start);
        s.stack.clear();  // the choices a match leaves behind
        if (end != kNoMatch) break;
      }
      if (end == kNoMatch) break;
      if (end == start) {  // empty: not reported; the search moves on by one unit
        pos = start + 1;
        continue;
      }
      if (start > gap) {
        const std::size_t b = byte_at(start);
        f(gap_byte, b);
        gap_byte = b;
      }
      const std::size_t e = byte_at(end);
      f(gap_byte, e);
      gap = end;
      gap_byte = e;
      pos = end;
    }
    if (gap < n) f(gap_byte, byte_at(n));
  }

 private:
  static constexpr std::size_t kNoMatch = ~std::size_t(0);
  static constexpr std::uint64_t kBacktrackLimit = 100'000'000;
  static constexpr std::size_t kMaxInsts = 1u << 20;
  static constexpr std::size_t kMaxAlts = 10000;
  static constexpr int kMaxDepth = 200;

  Regex() = default;

  std::string source_;
  std::vector<detail::Inst> prog_;
  std::vector<detail::CharSet> sets_;
  std::vector<detail::AltTable> alts_;
  std::vector<detail::FirstSet> follows_;
  detail::FirstSet first_;
  std::uint32_t num_marks_ = 0;

  [[noreturn]] static void fail(std::string_view pattern, std::size_t pos, std::string_view what) {
    ::lrt::throw_error("regex", ::lrt::detail::str_cat(what, " at position ", pos, " of pattern '", pattern, "'"));
  }

  // ---------------------------------------------------------------------------------------------
  // Parser: pattern -> tree of Nodes (flags resolved: sets are folded, anchors chosen).
  struct Parser {
    Regex& re;
    std::string_view pat;
    std::size_t i = 0;
    int depth = 0;
    std::vector<detail::Node> nodes;

    [[noreturn]] void error(std::size_t at, std::string_view what) const { fail(pat, at, what); }
    bool eof() const { return i >= pat.size(); }
    char peek(std::size_t k = 0) const { return i + k < pat.size() ? pat[i + k] : '\0'; }
    bool lookat(std::string_view s) const { return pat.substr(i, s.size()) == s; }

    std::uint32_t add(detail::Node n) {
      nodes.push_back(std::move(n));
      return std::uint32_t(nodes.size() - 1);
    }
    std::uint32_t add_set(detail::SetBuilder& b, bool negate) {
      re.sets_.push_back(b.build(negate));
      detail::Node n;
      n.type = detail::Node::Set;
      n.set = std::uint32_t(re.sets_.size() - 1);
      return add(std::move(n));
    }
    std::uint32_t literal(std::uint32_t cp, const detail::Flags& f) {
      detail::SetBuilder b;
      b.add_range(cp, cp, f.i);
      return add_set(b, false);
    }

    std::uint32_t parse() {
      detail::Flags f;
      const std::uint32_t root = parse_alt(f);
      if (!eof()) error(i, "unmatched ')'");
      return root;
    }

    std::uint32_t parse_alt(detail::Flags f) {
      if (++depth > kMaxDepth) error(i, "groups nested too deeply");
      detail::Node alt;
      alt.type = detail::Node::Alt;
      alt.kids.push_back(parse_concat(f));
      while (peek() == '|' && !eof()) {
        ++i;
        alt.kids.push_back(parse_concat(f));
      }
      --depth;
      if (alt.kids.size() == 1) return alt.kids[0];
      return add(std::move(alt));
    }

    std::uint32_t parse_concat(detail::Flags& f) {
      detail::Node cat;
      cat.type = detail::Node::Concat;
      while (!eof() && peek() != '|' && peek() != ')') {
        std::uint32_t atom;
        if (!parse_atom(f, atom)) continue;  // a flag group (?i) changed f
        atom = parse_quantifiers(atom);
        cat.kids.push_back(atom);
      }
      if (cat.kids.size() == 1) return cat.kids[0];
      if (cat.kids.empty()) return add(detail::Node{});
      return add(std::move(cat));
    }

    std::uint32_t parse_uint(std::size_t at) {
      std::uint64_t v = 0;
      const std::size_t from = i;
      while (peek() >= '0' && peek() <= '9' && !eof()) {
        v = v * 10 + std::uint64_t(peek() - '0');
        if (v > 100000) error(at, "repetition count too large (at most 100000)");
        ++i;
      }
      if (i == from) error(at, "invalid repetition {...}");
      return std::uint32_t(v);
    }

    std::uint32_t parse_quantifiers(std::uint32_t atom) {
      bool quantified = false;
      while (!eof()) {
        const std::size_t at = i;
        std::uint32_t mn, mx;
        const char c = peek();
        if (c == '?') {
          mn = 0, mx = 1, ++i;
        } else if (c == '*') {
          mn = 0, mx = detail::kInf, ++i;
        } else if (c == '+') {
          mn = 1, mx = detail::kInf, ++i;
        } else if (c == '{') {
          ++i;
          mn = mx = parse_uint(at);
          if (peek() == ',') {
            ++i;
            mx = peek() == '}' ? detail::kInf : parse_uint(at);
          }
          if (peek() != '}' || eof()) error(at, "invalid repetition {...}");
          ++i;
          if (mx < mn) error(at, "invalid repetition: {n,m} with m < n");
        } else {
          break;
        }
        if (quantified) error(at, "repetition of a repetition (a quantifier follows another)");
        quantified = true;
        std::uint8_t greed = std::uint8_t(detail::Greed::Greedy);
        if (peek() == '?' && !eof())
          greed = std::uint8_t(detail::Greed::Lazy), ++i;
        else if (peek() == '+' && !eof())
          greed = std::uint8_t(detail::Greed::Possessive), ++i;
        detail::Node r;
        r.type = detail::Node::Repeat;
        r.mode = greed;
        r.min = mn;
        r.max = mx;
        r.kids.push_back(atom);
        atom = add(std::move(r));
      }
      return atom;
    }

    std::uint32_t assert_node(detail::AssertKind k) {
      detail::Node n;
      n.type = detail::Node::Assert;
      n.mode = std::uint8_t(k);
      return add(std::move(n));
    }

    // Returns false (and no atom) for a flag group such as (?i).
    bool parse_atom(detail::Flags& f, std::uint32_t& out) {
      const std::size_t at = i;
      const char c = peek();
      if (c == '(') {
        ++i;
        return parse_group(f, at, out);
      }
      if (c == '[') {
        out = parse_class(f);
        return true;
      }
      if (c == '*' || c == '+' || c == '?' || c == '{') error(at, "repetition operator without an expression");
      if (c == '.') {
        ++i;
        detail::SetBuilder b;
        b.add_kinds(detail::kAllKinds);
        if (!f.s) b.ascii[0] &= ~(std::uint64_t(1) << '\n');
        out = add_set(b, false);
        return true;
      }
      if (c == '^') {
        ++i;
        out = assert_node(f.m ? detail::AssertKind::LineStart : detail::AssertKind::TextStart);
        return true;
      }
      if (c == '$') {
        ++i;
        out = assert_node(f.m ? detail::AssertKind::LineEnd : detail::AssertKind::TextEnd);
        return true;
      }
      if (c == '\\') {
        out = parse_escape(f);
        return true;
      }
      out = literal(next_cp(), f);
      return true;
    }

    std::uint32_t next_cp() {
      const auto* p = reinterpret_cast<const unsigned char*>(pat.data()) + i;
      const Utf8Unit u = decode_utf8(p, pat.size() - i);
      if (!u.valid) error(i, "invalid UTF-8 in the pattern");
      i += u.len;
      return u.cp;
    }

    bool parse_group(detail::Flags& f, std::size_t at, std::uint32_t& out) {
      detail::Node wrap;
      bool has_wrap = false;
      detail::Flags inner = f;
      if (peek() == '?') {
        ++i;
        const char c = peek();
        if (c == ':') {
          ++i;
        } else if (c == '=' || c == '!') {
          ++i;
          wrap.type = detail::Node::Look;
          wrap.mode = c == '!';
          has_wrap = true;
        } else if (c == '>') {
          ++i;
          wrap.type = detail::Node::Atomic;
          has_wrap = true;
        } else if (lookat("<=") || lookat("<!")) {
          error(at, "look-behind is not supported");
        } else if (lookat("P=")) {
          error(at, "back-references are not supported");
        } else if (c == '<' || lookat("P<")) {
          i += c == '<' ? 1 : 2;
          const std::size_t name_at = i;
          while (!eof() && peek() != '>') ++i;
          if (eof() || i == name_at) error(at, "invalid group name");
          ++i;
        } else {
          bool on = true, any = false;
          for (;; ++i) {
            const char g = peek();
            if (eof()) error(at, "unclosed group");
            if (g == ':' || g == ')') break;
            any = true;
            if (g == '-') {
              if (!on) error(i, "repeated '-' in flags");
              on = false;
            } else if (g == 'i') {
              inner.i = on;
            } else if (g == 'm') {
              inner.m = on;
            } else if (g == 's') {
              inner.s = on;
            } else if (g == 'u') {
              if (!on) error(i, "flag -u (bytes mode) is not supported");
            } else {
              error(i, ::lrt::detail::str_cat("unsupported flag or group syntax '(?", g, "'"));
            }
          }
          if (!any) error(at, "empty flag group");
          if (peek() == ')') {  // (?i): applies to the rest of the enclosing group
            ++i;
            f = inner;
            return false;
          }
          ++i;  // ':'
        }
      }
      const std::uint32_t body = parse_alt(inner);
      if (eof() || peek() != ')') error(at, "unbalanced parenthesis: '(' is never closed");
      ++i;
      if (!has_wrap) {
        out = body;
        return true;
      }
      wrap.kids.push_back(body);
      out = add(std::move(wrap));
      return true;
    }

    std::uint32_t hex(std::size_t at, int digits) {  // digits -1: {H..}
      std::uint32_t v = 0;
      int count = 0;
      const bool braced = digits < 0;
      if (braced) {
        if (peek() != '{') error(at, "expected '{' after \\x, \\u or \\U");
        ++i;
      }
      while (!eof() && (braced ? peek() != '}' : count < digits)) {
        const char h = peek();
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) error(i, "invalid hexadecimal digit");
        v = v * 16 + std::uint32_t(d);
        if (v > 0x10FFFF) error(at, "code point above U+10FFFF");
        ++count, ++i;
      }
      if (braced) {
        if (eof()) error(at, "unclosed \\x{...}");
        ++i;
      }
      if (count == 0 || (!braced && count < digits)) error(at, "invalid hexadecimal escape");
      if (v >= 0xD800 && v <= 0xDFFF) error(at, "surrogate code point in escape");
      return v;
    }

    // Class escapes (\d \s \w \p and negations) into b; false if the escape at i is not one.
    bool class_escape(detail::SetBuilder& b) {
      const std::size_t at = i;  // at the backslash
      const char c = peek(1);
      detail::SetBuilder item;
      bool negate = false;
      switch (c) {
        case 'd':
        case 'D':
          item.add_kinds(detail::kind_bit(Category::Nd));
          negate = c == 'D';
          i += 2;
          break;
        case 's':
        case 'S':
          item.add_kinds(std::uint16_t(1u << detail::kKindSpace));
          negate = c == 'S';
          i += 2;
          break;
        case 'w':
        case 'W':
          item.add_kinds(detail::kWordKinds);
          item.add_ascii('_');
          negate = c == 'W';
          i += 2;
          break;
        case 'p':
        case 'P': {
          negate = c == 'P';
          i += 2;
          std::string name;
          if (peek() == '{') {
            ++i;
            while (!eof() && peek() != '}') name += peek(), ++i;
            if (eof()) error(at, "unclosed \\p{...}");
            ++i;
          } else {
            if (eof()) error(at, "incomplete \\p escape");
            name = std::string(1, peek());
            ++i;
          }
          const std::uint16_t k = unicode_class(name);
          if (k == 0) error(at, ::lrt::detail::str_cat("unknown or unsupported Unicode class \\p{", name, "}"));
          item.add_kinds(k);
          break;
        }
        default:
          return false;
      }
      if (negate) {
        b.add_negated(item);
      } else {
        b.ascii[0] |= item.ascii[0];
        b.ascii[1] |= item.ascii[1];
        b.kinds |= item.kinds;
      }
      return true;
    }

    static std::uint16_t unicode_class(std::string_view raw) {
      std::string n;  // loose matching: case, spaces, '_' and '-' ignored
      for (char ch : raw)
        if (ch != ' ' && ch != '_' && ch != '-') n += char(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
      for (const char* prefix : {"gc=", "generalcategory="})
        if (n.rfind(prefix, 0) == 0) n.erase(0, std::string_view(prefix).size());
      using detail::kind_bit;
      struct Name {
        const char* a;
        const char* b;
        std::uint16_t k;
      };
      static const Name names[] = {
          {"l", "letter", detail::kLetterKinds},
          {"lu", "uppercaseletter", kind_bit(Category::Lu)},
          {"ll", "lowercaseletter", kind_bit(Category::Ll)},
          {"lt", "titlecaseletter", kind_bit(Category::Lt)},
          {"lm", "modifierletter", kind_bit(Category::Lm)},
          {"lo", "otherletter", kind_bit(Category::Lo)},
          {"lc", "casedletter",
           std::uint16_t(kind_bit(Category::Lu) | kind_bit(Category::Ll) | kind_bit(Category::Lt))},
          {"l&", "casedletter",
           std::uint16_t(kind_bit(Category::Lu) | kind_bit(Category::Ll) | kind_bit(Category::Lt))},
          {"m", "mark", detail::kMarkKinds},
          {"combiningmark", "mark", detail::kMarkKinds},
          {"mn", "nonspacingmark", kind_bit(Category::Mn)},
          {"mc", "spacingmark", kind_bit(Category::Mc)},
          {"me", "enclosingmark", kind_bit(Category::Me)},
          {"n", "number", detail::kNumberKinds},
          {"nd", "decimalnumber", kind_bit(Category::Nd)},
          {"digit", "decimalnumber", kind_bit(Category::Nd)},
          {"nl", "letternumber", kind_bit(Category::Nl)},
          {"no", "othernumber", kind_bit(Category::No)},
          {"whitespace", "wspace", std::uint16_t(1u << detail::kKindSpace)},
          {"space", "wspace", std::uint16_t(1u << detail::kKindSpace)},
      };
      for (const Name& e : names)
        if (n == e.a || n == e.b) return e.k;
      return 0;
    }

    // A single-character escape (at the backslash) -> its code point.
    std::uint32_t char_escape() {
      const std::size_t at = i;
      const char c = peek(1);
      if (i + 1 >= pat.size()) error(at, "trailing backslash");
      i += 2;
      switch (c) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case 'f':
          return '\f';
        case 'v':
          return '\v';
        case 'a':
          return '\a';
        case 'e':
          return 0x1B;
        case 'x':
          return peek() == '{' ? hex(at, -1) : hex(at, 2);
        case 'u':
          return peek() == '{' ? hex(at, -1) : hex(at, 4);
        case 'U':
          return peek() == '{' ? hex(at, -1) : hex(at, 8);
        default:
          break;
      }
      if (c >= '0' && c <= '9') error(at, "back-references (and octal escapes) are not supported");
      if (c == 'k' || c == 'g') error(at, "back-references are not supported");
      const unsigned char uc = static_cast<unsigned char>(c);
      if (uc >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        error(at, ::lrt::detail::str_cat("unknown or unsupported escape '\\", c, "'"));
      return uc;  // escaped ASCII punctuation or space: itself
    }

    std::uint32_t parse_escape(const detail::Flags& f) {
      const std::size_t at = i;
      const char c = peek(1);
      detail::SetBuilder b;
      if (class_escape(b)) return add_set(b, false);
      switch (c) {
        case 'b':
          i += 2;
          return assert_node(detail::AssertKind::WordB);
        case 'B':
          i += 2;
          return assert_node(detail::AssertKind::NotWordB);
        case 'A':
          i += 2;
          return assert_node(detail::AssertKind::TextStart);
        case 'z':
          i += 2;
          return assert_node(detail::AssertKind::TextEnd);
        case 'Z':
        case 'G':
          error(at, ::lrt::detail::str_cat("unsupported escape '\\", c, "'"));
        default:
          break;
      }
      return literal(char_escape(), f);
    }

    std::uint32_t parse_class(const detail::Flags& f) {
      const std::size_t open = i;
      ++i;  // '['
      bool negate = false;
      if (peek() == '^' && !eof()) negate = true, ++i;
      detail::SetBuilder b;
      bool first = true;
      for (;; first = false) {
        if (eof()) error(open, "unclosed character class '['");
        const std::size_t at = i;
        const char c = peek();
        if (c == ']' && !first) {
          ++i;
          break;
        }
        if (c == '[') {
          if (peek(1) == ':') error(at, "POSIX classes [:...:] are not supported");
          error(at, "nested character classes are not supported");
        }
        if ((c == '&' && peek(1) == '&') || (c == '~' && peek(1) == '~') || (c == '-' && peek(1) == '-'))
          error(at, "class set operations (&&, --, ~~) are not supported");
        if (c == '\\' && class_escape(b)) continue;
        const std::uint32_t lo = class_char();
        if (peek() == '-' && peek(1) != ']' && i + 1 < pat.size()) {
          ++i;
          if (peek() == '\\' && (peek(1) == 'd' || peek(1) == 's' || peek(1) == 'w' || peek(1) == 'p' ||
                                 peek(1) == 'D' || peek(1) == 'S' || peek(1) == 'W' || peek(1) == 'P'))
            error(i, "invalid class range (a class escape as its end)");
          const std::uint32_t hi = class_char();
          if (hi < lo) error(at, "invalid class range (end before start)");
          b.add_range(lo, hi, f.i);
        } else {
          b.add_range(lo, lo, f.i);
        }
      }
      return add_set(b, negate);
    }

    std::uint32_t class_char() {
      if (eof()) error(i, "unclosed character class '['");
      if (peek() == '\\') {
        const char c = peek(1);
        if (c == 'b' || c == 'B' || c == 'A' || c == 'z') error(i, "anchor escape inside a character class");
        return char_escape();
      }
      return next_cp();
    }
  };

  // ---------------------------------------------------------------------------------------------
  // Compiler: tree -> program.
  struct Compiler {
    Regex& re;
    const std::vector<detail::Node>& nodes;
    std::vector<detail::FirstSet> firsts;

    const detail::FirstSet& first(std::uint32_t n) { return firsts[n]; }

    void compute_first(std::uint32_t id) {  // kids have smaller ids than their parents
      const detail::Node& n = nodes[id];
      detail::FirstSet fs;
      switch (n.type) {
        case detail::Node::Empty:
        case detail::Node::Look:
        case detail::Node::Assert:
          fs.nullable = true;
          break;
        case detail::Node::Set:
          fs = set_first(re.sets_[n.set]);
          break;
        case detail::Node::Concat:
          fs.nullable = true;
          for (std::uint32_t k : n.kids) {
            fs.unite(firsts[k]);
            if (!firsts[k].nullable) {
              fs.nullable = false;
              break;
            }
          }
          break;
        case detail::Node::Alt:
          for (std::uint32_t k : n.kids) {
            fs.unite(firsts[k]);
            fs.nullable = fs.nullable || firsts[k].nullable;
          }
          break;
        case detail::Node::Repeat:
        case detail::Node::Atomic:
          fs = firsts[n.kids[0]];
          if (n.type == detail::Node::Repeat && n.min == 0) fs.nullable = true;
          break;
      }
      firsts[id] = fs;
    }

    static detail::FirstSet set_first(const detail::CharSet& s) {
      detail::FirstSet fs;
      fs.ascii[0] = s.ascii[0];
      fs.ascii[1] = s.ascii[1];
      if (s.ranges.empty()) {
        fs.kinds = s.kinds;
      } else if (s.neg) {
        fs.kinds = detail::kAllKinds;
      } else {
        fs.kinds = s.raw_kinds;
        for (const auto& r : s.ranges) fs.kinds |= detail::kinds_in_range(r.first, r.second);
      }
      return fs;
    }

    // The first set that decides whether a branch may be taken: a nullable branch may be taken anywhere.
    static detail::FirstSet gate(const detail::FirstSet& fs) { return fs.nullable ? detail::FirstSet::all() : fs; }

    std::uint32_t emit(detail::Op op, std::uint8_t mode = 0, std::uint32_t a = 0, std::uint32_t b = 0,
                       std::uint32_t c = 0) {
      if (re.prog_.size() >= kMaxInsts) fail(re.source_, 0, "pattern too large (compiled program over 1M steps)");
      re.prog_.push_back(detail::Inst{op, mode, a, b, c, detail::kNoFollow});
      return std::uint32_t(re.prog_.size() - 1);
    }
    std::uint32_t pc() const { return std::uint32_t(re.prog_.size()); }

    // An Alt instruction over branches with the given gates; returns its table index.
    std::uint32_t emit_alt(const std::vector<detail::FirstSet>& gates) {
      if (re.alts_.size() >= kMaxAlts)
        fail(re.source_, 0, "pattern too large (over 10000 alternations and repetitions)");
      detail::AltTable t;
      for (std::size_t j = 0; j < gates.size(); ++j) {
        const detail::FirstSet g = gate(gates[j]);
        for (std::uint32_t cp = 0; cp < 128; ++cp)
          if ((g.ascii[cp >> 6] >> (cp & 63)) & 1) t.by_ascii[cp] |= std::uint64_t(1) << j;
        for (unsigned k = 0; k < 16; ++k)
          if ((g.kinds >> k) & 1) t.by_kind[k] |= std::uint64_t(1) << j;
      }
      re.alts_.push_back(std::move(t));
      const std::uint32_t idx = std::uint32_t(re.alts_.size() - 1);
      emit(detail::Op::Alt, 0, idx);
      return idx;
    }

    void compile_root(std::uint32_t root) {
      firsts.resize(nodes.size());
      for (std::uint32_t id = 0; id < nodes.size(); ++id) compute_first(id);
      compile(root);
      emit(detail::Op::Match);
      re.first_ = gate(first(root));
      optimize();
    }

    // Peephole passes: a jump to a Match (through jumps) becomes that Match; a greedy Run learns
    // which units the code after it must start with (its "follow"), so that it keeps only those
    // positions to backtrack to.
    void optimize() {
      auto& prog = re.prog_;
      for (auto& in : prog) {
        if (in.op != detail::Op::Jmp) continue;
        std::uint32_t t = in.a;
        for (int k = 0; k < 64 && prog[t].op == detail::Op::Jmp; ++k) t = prog[t].a;
        in.a = t;
        if (prog[t].op == detail::Op::Match) in.op = detail::Op::Match;
      }
      for (std::uint32_t pc = 0; pc < prog.size(); ++pc) {
        if ((prog[pc].op == detail::Op::Run || prog[pc].op == detail::Op::Set) && prog[pc + 1].op == detail::Op::Match)
          prog[pc].mode |= detail::kThenMatch;
        if (prog[pc].op != detail::Op::Run || (prog[pc].mode & 3) != std::uint8_t(detail::Greed::Greedy)) continue;
        detail::FirstSet f;
        bool known = false;
        std::uint32_t q = pc + 1;
        for (int k = 0; k < 64; ++k) {
          const detail::Inst& in = prog[q];
          if (in.op == detail::Op::Jmp) {
            q = in.a;
            continue;
          }
          if (in.op != detail::Op::Set && in.op != detail::Op::Run) break;
          f.unite(set_first(re.sets_[in.a]));
          if (in.op == detail::Op::Set || in.b >= 1) {
            known = true;
            break;
          }
          ++q;
        }
        if (!known) continue;
        re.follows_.push_back(f);
        prog[pc].d = std::uint32_t(re.follows_.size() - 1);
      }
    }

    void compile_alt(const std::vector<std::uint32_t>& kids, std::size_t from) {
      const std::size_t count = std::min<std::size_t>(kids.size() - from, 64);
      std::vector<detail::FirstSet> gates;
      for (std::size_t j = 0; j < count; ++j) {
        if (j == 63 && from + 64 < kids.size()) {  // the 64th branch holds the rest
          detail::FirstSet rest;
          for (std::size_t k = from + 63; k < kids.size(); ++k) {
            rest.unite(first(kids[k]));
            rest.nullable = rest.nullable || first(kids[k]).nullable;
          }
          gates.push_back(rest);
        } else {
          gates.push_back(first(kids[from + j]));
        }
      }
      const std::uint32_t t = emit_alt(gates);
      std::vector<std::uint32_t> jumps;
      for (std::size_t j = 0; j < count; ++j) {
        re.alts_[t].targets[j] = pc();
        if (j == 63 && from + 64 < kids.size())
          compile_alt(kids, from + 63);
        else
          compile(kids[from + j]);
        if (j + 1 < count) jumps.push_back(emit(detail::Op::Jmp));
      }
      for (std::uint32_t jmp : jumps) re.prog_[jmp].a = pc();
    }

    void compile(std::uint32_t id) {
      const detail::Node& n = nodes[id];
      switch (n.type) {
        case detail::Node::Empty:
          break;
        case detail::Node::Set:
          emit(detail::Op::Set, 0, n.set);
          break;
        case detail::Node::Concat:
          for (std::uint32_t k : n.kids) compile(k);
          break;
        case detail::Node::Alt:
          compile_alt(n.kids, 0);
          break;
        case detail::Node::Assert:
          emit(detail::Op::Assert, n.mode);
          break;
        case detail::Node::Atomic:
        case detail::Node::Look: {
          const std::uint32_t at = emit(n.type == detail::Node::Atomic ? detail::Op::Atomic : detail::Op::Look, n.mode);
          compile(n.kids[0]);
          emit(detail::Op::Match);
          re.prog_[at].a = pc();
          break;
        }
        case detail::Node::Repeat:
          compile_repeat(n);
          break;
      }
    }

    void compile_repeat(const detail::Node& n) {
      const std::uint32_t body = n.kids[0];
      const auto greed = static_cast<detail::Greed>(n.mode);
      if (nodes[body].type == detail::Node::Set) {
        emit(detail::Op::Run, n.mode, nodes[body].set, n.min, n.max);
        return;
      }
      if (greed == detail::Greed::Possessive) {  // (?>X{n,m})
        const std::uint32_t at = emit(detail::Op::Atomic);
        compile_counted(body, n.min, n.max, detail::Greed::Greedy);
        emit(detail::Op::Match);
        re.prog_[at].a = pc();
        return;
      }
      compile_counted(body, n.min, n.max, greed);
    }

    void compile_counted(std::uint32_t body, std::uint32_t mn, std::uint32_t mx, detail::Greed greed) {
      for (std::uint32_t k = 0; k < mn; ++k) compile(body);
      const detail::FirstSet exit_gate = detail::FirstSet::all();
      const bool lazy = greed == detail::Greed::Lazy;
      auto gates = [&] {
        return lazy ? std::vector<detail::FirstSet>{exit_gate, first(body)}
                    : std::vector<detail::FirstSet>{first(body), exit_gate};
      };
      if (mx == detail::kInf) {  // loop: L: Alt(body, exit); body; Jmp L
        const std::uint32_t loop = pc();
        const std::uint32_t t = emit_alt(gates());
        const bool nullable = first(body).nullable;
        const std::uint32_t slot = nullable ? re.num_marks_++ : 0;
        re.alts_[t].targets[lazy ? 1 : 0] = pc();
        if (nullable) emit(detail::Op::Mark, 0, slot);
        compile(body);
        if (nullable) emit(detail::Op::Check, 0, slot);
        emit(detail::Op::Jmp, 0, loop);
        re.alts_[t].targets[lazy ? 0 : 1] = pc();
        return;
      }
      std::vector<std::uint32_t> exits;  // nested optionals (X(X)?)?, all exits to the end
      for (std::uint32_t k = mn; k < mx; ++k) {
        const std::uint32_t t = emit_alt(gates());
        exits.push_back(t);
        re.alts_[t].targets[lazy ? 1 : 0] = pc();
        compile(body);
      }
      for (std::uint32_t t : exits) re.alts_[t].targets[lazy ? 0 : 1] = pc();
    }
  };

  // ---------------------------------------------------------------------------------------------
  // Matcher.
  static void decode(std::string_view text, detail::Scratch& s) {
    const std::size_t nb = text.size();
    s.cps.resize(nb + 1);
    s.kinds.resize(nb + 1);
    std::uint32_t* cps = s.cps.data();
    std::uint8_t* kinds = s.kinds.data();
    static const auto ascii_kinds = [] {
      std::array<std::uint8_t, 128> a{};
      for (std::uint32_t c = 0; c < 128; ++c) a[c] = detail::unit_kind(c);
      return a;
    }();
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    std::size_t u = 0;
    for (std::size_t b = 0; b < nb;) {
      if (b + 8 <= nb) {  // eight ASCII bytes at once (the kind of an ASCII unit is never read)
        std::uint64_t w;
        std::memcpy(&w, p + b, 8);
        if ((w & 0x8080808080808080ull) == 0) {
          for (int k = 0; k < 8; ++k) cps[u + k] = p[b + k];
          std::memset(kinds + u, 0, 8);
          u += 8, b += 8;
          continue;
        }
      }
      const unsigned char c = p[b];
      if (c < 0x80) {
        cps[u] = c;
        kinds[u] = ascii_kinds[c];
        ++u, ++b;
        continue;
      }
      const Utf8Unit d = decode_utf8(p + b, nb - b);
      if (d.valid) {
        cps[u] = d.cp;
        kinds[u] = detail::unit_kind(d.cp);
      } else {
        cps[u] = detail::kInvalidCp + c;
        kinds[u] = detail::kKindInvalid;
      }
      ++u;
      b += d.len;
    }
    cps[u] = detail::kEndCp;
    kinds[u] = detail::kKindEnd;
    s.cps.resize(u + 1);
    s.kinds.resize(u + 1);
  }

  static bool is_word(const detail::Scratch& s, std::size_t pos, std::size_t n) {
    if (pos >= n) return false;
    const std::uint32_t c = s.cps[pos];
    if (c < 128) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    return (detail::kWordKinds >> s.kinds[pos]) & 1;
  }

  // Runs the program from pc at pos until its Match; returns the end position or kNoMatch.
  std::size_t run(detail::Scratch& s, std::uint32_t pc, std::size_t pos) const {
    using detail::Frame;
    using detail::Op;
    // The stack, held in locals (stores to frames cannot alias them); s.stack is synced around calls.
    struct Stack {
      detail::FrameStack& owner;
      Frame* buf;
      std::size_t n;
      std::size_t size() const noexcept { return n; }
      LRT_ALWAYS_INLINE void push_back(const Frame& f) {
        if (n == owner.buf.size()) [[unlikely]] {
          owner.grow();
          buf = owner.buf.data();
        }
        buf[n++] = f;
      }
      Frame& back() noexcept { return buf[n - 1]; }
      void pop_back() noexcept { --n; }
    } st{s.stack, s.stack.buf.data(), s.stack.n};
    const std::size_t base = st.size();
    const std::size_t n = s.kinds.size() - 1;
    const std::uint32_t* cps = s.cps.data();
    const std::uint8_t* kinds = s.kinds.data();
    const detail::Inst* prog = prog_.data();
    const detail::CharSet* sets = sets_.data();
    const detail::AltTable* alts = alts_.data();
    const detail::FirstSet* follows = follows_.data();
    std::uint64_t backtracks = 0;
    for (;;) {
      const detail::Inst& in = prog[pc];
      switch (in.op) {
        case Op::Set:
          if (sets[in.a].match(cps[pos], kinds[pos])) {
            ++pos, ++pc;
            if (in.mode & detail::kThenMatch) goto match;
            continue;
          }
          break;
        case Op::Run: {
          const detail::CharSet& set = sets[in.a];
          const std::size_t start = pos;
          const std::size_t limit = in.c == detail::kInf ? n : std::min<std::size_t>(n, start + in.c);
          const auto greed = static_cast<detail::Greed>(in.mode & 3);
          if (greed == detail::Greed::Lazy) {
            while (pos - start < in.b && pos < limit && set.match(cps[pos], kinds[pos])) ++pos;
            if (pos - start < in.b) break;
            if (pos < limit) st.push_back(Frame{pc, detail::kFrameLazy, start, pos});
            ++pc;
            continue;
          }
          if (in.c == detail::kInf) {
            while (set.match(cps[pos], kinds[pos])) ++pos;  // the sentinel at n never matches
          } else {
            while (pos < limit && set.match(cps[pos], kinds[pos])) ++pos;
          }
          if (pos - start < in.b) break;
          if (greed == detail::Greed::Greedy && pos > start + in.b) {
            std::size_t p = pos - 1;  // the last position to back off to that the follow allows
            const std::size_t lo = start + in.b;
            if (in.d != detail::kNoFollow) {
              const detail::FirstSet& fl = follows[in.d];
              while (p > lo && !fl.viable(cps[p], kinds[p])) --p;
              if (fl.viable(cps[p], kinds[p])) st.push_back(Frame{pc, detail::kFrameGreedy, lo, p});
            } else {
              st.push_back(Frame{pc, detail::kFrameGreedy, lo, p});
            }
          }
          ++pc;
          if (in.mode & detail::kThenMatch) goto match;
          continue;
        }
        case Op::Alt: {
          const detail::AltTable& t = alts[in.a];
          const std::uint32_t c = cps[pos];
          std::uint64_t m = c < 128 ? t.by_ascii[c] : t.by_kind[kinds[pos]];
          if (m == 0) break;
          const unsigned j = unsigned(std::countr_zero(m)) & 63;
          m &= m - 1;
          if (m) st.push_back(Frame{pc, detail::kFrameAlt, m, pos});
          pc = t.targets[j];
          continue;
        }
        case Op::Jmp:
          pc = in.a;
          continue;
        case Op::Assert: {
          bool ok = false;
          switch (static_cast<detail::AssertKind>(in.mode)) {
            case detail::AssertKind::TextStart:
              ok = pos == 0;
              break;
            case detail::AssertKind::TextEnd:
              ok = pos == n;
              break;
            case detail::AssertKind::LineStart:
              ok = pos == 0 || cps[pos - 1] == '\n';
              break;
            case detail::AssertKind::LineEnd:
              ok = pos == n || cps[pos] == '\n';
              break;
            case detail::AssertKind::WordB:
            case detail::AssertKind::NotWordB:
              ok = (is_word(s, pos, n) != (pos > 0 && is_word(s, pos - 1, n))) ==
                   (static_cast<detail::AssertKind>(in.mode) == detail::AssertKind::WordB);
              break;
          }
          if (ok) {
            ++pc;
            continue;
          }
          break;
        }
        case Op::Atomic:
        case Op::Look: {
          s.stack.n = st.n;
          const std::size_t e = run(s, pc + 1, pos);
          st.buf = s.stack.buf.data();  // the stack may have grown; its frames above st.n are dropped
          if (in.op == Op::Atomic) {
            if (e == kNoMatch) break;
            pos = e;
          } else if ((e != kNoMatch) == (in.mode != 0)) {
            break;
          }
          pc = in.a;
          continue;
        }
        case Op::Mark:
          st.push_back(Frame{in.a, detail::kFrameRestore, s.marks[in.a], 0});
          s.marks[in.a] = pos;
          ++pc;
          continue;
        case Op::Check:
          if (s.marks[in.a] == pos) break;
          ++pc;
          continue;
        case Op::Match:
        match:
          s.stack.n = st.n;
          return pos;
      }
      // Failure: resume the most recent choice.
      for (;;) {
        if (st.size() == base) {
          s.stack.n = st.n;
          return kNoMatch;
        }
        if (++backtracks > kBacktrackLimit)
          ::lrt::throw_error("regex", ::lrt::detail::str_cat("backtrack limit exceeded (pattern '", source_, "')"));
        Frame& fr = st.back();
        if (fr.tag == detail::kFrameAlt) {
          const detail::AltTable& t = alts[prog[fr.pc].a];
          const unsigned j = unsigned(std::countr_zero(fr.aux)) & 63;
          pos = fr.pos;
          pc = t.targets[j];
          fr.aux &= fr.aux - 1;
          if (fr.aux == 0) st.pop_back();
          break;
        }
        if (fr.tag == detail::kFrameGreedy) {
          pos = fr.pos;
          pc = fr.pc + 1;
          const std::uint32_t fi = prog[fr.pc].d;
          if (fr.pos == fr.aux) {
            st.pop_back();
            break;
          }
          std::size_t p = fr.pos - 1;
          if (fi != detail::kNoFollow) {
            const detail::FirstSet& fl = follows[fi];
            while (p > fr.aux && !fl.viable(cps[p], kinds[p])) --p;
            if (!fl.viable(cps[p], kinds[p])) {
              st.pop_back();
              break;
            }
          }
          fr.pos = p;
          break;
        }
        if (fr.tag == detail::kFrameLazy) {
          const detail::Inst& rin = prog[fr.pc];
          const std::size_t limit = rin.c == detail::kInf ? n : std::min<std::size_t>(n, fr.aux + rin.c);
          const std::size_t p = fr.pos;
          if (p < limit && sets[rin.a].match(cps[p], kinds[p])) {
            pos = p + 1;
            pc = fr.pc + 1;
            if (pos < limit)
              fr.pos = pos;
            else
              st.pop_back();
            break;
          }
          st.pop_back();
          continue;
        }
        s.marks[fr.pc] = fr.aux;  // restore
        st.pop_back();
      }
    }
  }
};

}  // namespace tok
}  // namespace v0
}  // namespace lrt
