// lrt/tokenizer/bpe.hpp: the byte-level BPE core: a rank table (token bytes <-> rank) and the
// encoding of one pre-tokenized piece with tiktoken's semantics (its byte_pair_merge).
//   lrt::tok::RankTable table(tokens_by_rank);        // tokens_by_rank[r] = the bytes of rank r
//   lrt::tok::BpeScratch scratch;                     // reused across pieces: no allocation per piece
//   std::vector<lrt::tok::token_t> out;
//   lrt::tok::encode_piece(table, "hello", out, scratch);   // appends the piece's ranks
// Rules (tiktoken's):
//   - a piece that is itself a token encodes to that token;
//   - otherwise start from its single bytes and repeatedly merge the adjacent pair whose
//     concatenation has the lowest rank (ties: the leftmost pair) until no adjacent
//     concatenation is a token. Pieces up to kSmallPiece bytes use tiktoken's array scan
//     (O(n * merges), fast for short n); longer ones (a run of 10,000 spaces) a min-heap over a
//     linked list with lazy deletion (O(n log n)), which picks the same pair at every step.
// The table is an open-addressing hash table (linear probing, load <= 1/2) over one byte arena;
// a slot holds the rank and 32 bits of the hash, so a probe rarely touches the arena.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {

/// A token id: a rank (ordinary token) or a special's id.
using token_t = std::uint32_t;

namespace detail {
inline std::uint64_t load64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load32(const char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t mix64(std::uint64_t x) noexcept {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
/// A fast hash of a byte string, tuned for short keys (tokens are mostly 1..16 bytes).
/// Only used in memory (never stored), so it may depend on the platform's byte order.
inline std::uint64_t hash_bytes(const char* p, std::size_t n) noexcept {
  std::uint64_t v;
  if (n >= 8) {
    std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    std::size_t i = 0;
    for (; i + 8 < n; i += 8) h = mix64(h ^ load64(p + i)) + 0x9e3779b97f4a7c15ULL;
    v = h ^ load64(p + n - 8);  // the last 8 bytes (overlapping the loop's when n % 8 != 0)
  } else if (n >= 4) {
    v = (std::uint64_t{load32(p)} << 32) | load32(p + n - 4);
  } else if (n > 0) {
    const auto b = [&](std::size_t i) { return std::uint64_t{static_cast<unsigned char>(p[i])}; };
    v = (b(0) << 16) | (b(n >> 1) << 8) | b(n - 1);
  } else {
    v = 0;
  }
  return mix64(v ^ (std::uint64_t{n} * 0xff51afd7ed558ccdULL));
}
}  // namespace detail

/// Token bytes -> rank and rank -> bytes, for ranks 0..size()-1.
class RankTable {
 public:
  static constexpr std::uint32_t npos = 0xffffffffu;

  RankTable() = default;
  /// tokens_by_rank[r] = the bytes of rank r: non-empty and distinct (lrt::Error otherwise).
  explicit RankTable(const std::vector<std::string>& tokens_by_rank) {
    const std::size_t n = tokens_by_rank.size();
    check(n < npos, "tokenizer", "too many tokens: ", n);
    std::size_t total = 0;
    for (const auto& t : tokens_by_rank) total += t.size();
    check(total < npos, "tokenizer", "the tokens hold too many bytes: ", total);
    arena_.reserve(total);
    offsets_.reserve(n + 1);
    offsets_.push_back(0);
    for (const auto& t : tokens_by_rank) {
      arena_ += t;
      offsets_.push_back(static_cast<std::uint32_t>(arena_.size()));
    }
    std::size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Slot{npos, 0});
    mask_ = cap - 1;
    std::fill(std::begin(byte_rank_), std::end(byte_rank_), npos);
    for (std::size_t r = 0; r < n; ++r) {
      const std::string& t = tokens_by_rank[r];
      check(!t.empty(), "tokenizer", "rank ", r, " is an empty token");
      const std::uint64_t h = detail::hash_bytes(t.data(), t.size());
      const auto tag = static_cast<std::uint32_t>(h >> 32);
      std::size_t i = h & mask_;
      for (;; i = (i + 1) & mask_) {
        Slot& s = slots_[i];
        if (s.rank == npos) {
          s = Slot{static_cast<std::uint32_t>(r), tag};
          break;
        }
        check(!(s.tag == tag && bytes(s.rank) == t), "tokenizer", "ranks ", s.rank, " and ", r, " are the same token (",
              t.size(), " bytes)");
      }
      if (t.size() == 1) byte_rank_[static_cast<unsigned char>(t[0])] = static_cast<std::uint32_t>(r);
    }
  }

  /// The rank of the bytes [p, p + n), or npos.
  std::uint32_t find(const char* p, std::size_t n) const noexcept {
    if (n == 1) return byte_rank_[static_cast<unsigned char>(p[0])];
    if (slots_.empty()) return npos;
    const std::uint64_t h = detail::hash_bytes(p, n);
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot s = slots_[i];
      if (s.rank == npos) return npos;
      if (s.tag == tag) {
        const std::uint32_t b = offsets_[s.rank], e = offsets_[s.rank + 1];
        if (e - b == n && std::memcmp(arena_.data() + b, p, n) == 0) return s.rank;
      }
    }
  }
  std::uint32_t find(std::string_view s) const noexcept { return find(s.data(), s.size()); }
  /// The rank of the single byte b, or npos.
  std::uint32_t byte_rank(unsigned char b) const noexcept { return byte_rank_[b]; }
  /// The bytes of rank r (r < size()).
  std::string_view bytes(std::uint32_t r) const noexcept {
    return std::string_view(arena_.data() + offsets_[r], offsets_[r + 1] - offsets_[r]);
  }
  std::size_t size() const noexcept { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  /// True when every single byte is a token (so that every byte string can be encoded).
  bool has_all_bytes() const noexcept {
    return std::find(std::begin(byte_rank_), std::end(byte_rank_), npos) == std::end(byte_rank_);
  }

 private:
  struct Slot {
    std::uint32_t rank;  // npos: empty
    std::uint32_t tag;   // the hash's high 32 bits
  };
  std::string arena_;
  std::vector<std::uint32_t> offsets_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::uint32_t byte_rank_[256];
};

/// Reusable buffers of the long-piece path (one per thread).
struct BpeScratch {
  std::vector<std::uint32_t> next, prev, tok, pair;
  std::vector<std::uint64_t> heap;
};

/// Pieces up to this many bytes use the array scan, longer ones the heap.
inline constexpr std::size_t kSmallPiece = 128;

namespace detail {
/// tiktoken's byte_pair_merge on a short piece (2 <= n <= kSmallPiece), no allocation.
inline void merge_small(const RankTable& t, const char* p, std::size_t n, std::vector<token_t>& out) {
  constexpr std::uint32_t npos = RankTable::npos;
  std::uint32_t start[kSmallPiece + 1], tok[kSmallPiece], pair[kSmallPiece];
  // m tokens: token i is [start[i], start[i+1]); pair[i] = the rank of tokens i and i+1 joined.
  std::size_t m = n;
  for (std::size_t i = 0; i < n; ++i) {
    start[i] = static_cast<std::uint32_t>(i);
    tok[i] = t.byte_rank(static_cast<unsigned char>(p[i]));
  }
  start[n] = static_cast<std::uint32_t>(n);
  for (std::size_t i = 0; i + 1 < n; ++i) pair[i] = t.find(p + i, 2);
  for (;;) {
    std::uint32_t best = npos;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < m; ++i)
      if (pair[i] < best) best = pair[i], at = i;
    if (best == npos) break;
    // token at absorbs token at+1
    tok[at] = best;
    for (std::size_t i = at + 1; i + 1 < m; ++i) tok[i] = tok[i + 1], pair[i] = pair[i + 1];
    for (std::size_t i = at + 1; i < m; ++i) start[i] = start[i + 1];
    --m;
    if (at + 1 < m) pair[at] = t.find(p + start[at], start[at + 2] - start[at]);
    if (at > 0) pair[at - 1] = t.find(p + start[at - 1], start[at + 1] - start[at - 1]);
  }
  out.insert(out.end(), tok, tok + m);
}

/// The same merges on a long piece: a min-heap of (pair rank, left position) with lazy deletion.
/// Token k starts at byte k (a token absorbs its right neighbour), so positions are node ids.
inline void merge_long(const RankTable& t, const char* p, std::size_t n, std::vector<token_t>& out, BpeScratch& s) {
  constexpr std::uint32_t npos = RankTable::npos;
  const auto N = static_cast<std::uint32_t>(n);
  s.next.resize(n);
  s.prev.resize(n);
  s.tok.resize(n);
  s.pair.resize(n);
  s.heap.clear();
  std::uint32_t *next = s.next.data(), *prev = s.prev.data(), *tok = s.tok.data(), *pair = s.pair.data();
  for (std::uint32_t i = 0; i < N; ++i) {
    next[i] = i + 1;  // N: none
    prev[i] = i - 1;  // npos for i = 0: none
    tok[i] = t.byte_rank(static_cast<unsigned char>(p[i]));
    pair[i] = i + 1 < N ? t.find(p + i, 2) : npos;
    if (pair[i] != npos) s.heap.push_back((std::uint64_t{pair[i]} << 32) | i);
  }
  const auto cmp = std::greater<std::uint64_t>();
  std::make_heap(s.heap.begin(), s.heap.end(), cmp);
  const auto end_of = [&](std::uint32_t k) { return k < N ? next[k] : N; };
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), cmp);
    const std::uint64_t top = s.heap.back();
    s.heap.pop_back();
    const auto r = static_cast<std::uint32_t>(top >> 32), i = static_cast<std::uint32_t>(top);
    if (pair[i] != r) continue;  // stale: the pair at i has grown (or i was absorbed: pair = npos)
    const std::uint32_t j = next[i];
    tok[i] = r;
    pair[j] = npos;
    next[i] = next[j];
    if (next[j] < N) prev[next[j]] = i;
    pair[i] = next[i] < N ? t.find(p + i, end_of(next[i]) - i) : npos;
    if (pair[i] != npos) {
      s.heap.push_back((std::uint64_t{pair[i]} << 32) | i);
      std::push_heap(s.heap.begin(), s.heap.end(), cmp);
    }
    if (const std::uint32_t q = prev[i]; q != npos) {
      pair[q] = t.find(p + q, next[i] - q);
      if (pair[q] != npos) {
        s.heap.push_back((std::uint64_t{pair[q]} << 32) | q);
        std::push_heap(s.heap.begin(), s.heap.end(), cmp);
      }
    }
  }
  for (std::uint32_t i = 0; i < N; i = next[i]) out.push_back(tok[i]);
}
}  // namespace detail

/// Appends the ranks of one piece (tiktoken's semantics, see the top). Every byte of the piece
/// must be a token (RankTable::has_all_bytes).
inline void encode_piece(const RankTable& t, std::string_view piece, std::vector<token_t>& out, BpeScratch& s) {
  const std::size_t n = piece.size();
  if (n == 0) return;
  if (const std::uint32_t whole = t.find(piece.data(), n); whole != RankTable::npos) {
    out.push_back(whole);
    return;
  }
  if (n <= kSmallPiece)
    detail::merge_small(t, piece.data(), n, out);
  else
    detail::merge_long(t, piece.data(), n, out, s);
}

}  // namespace tok
}  // namespace v0
}  // namespace lrt
