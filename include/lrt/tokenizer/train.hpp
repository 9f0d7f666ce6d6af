// lrt/tokenizer/train.hpp: trains a byte-level BPE tokenizer (tiktoken-style ranks) on a corpus.
//   lrt::tok::BpeTrainOptions o;
//   o.vocab_size = 4096;                                  // ranks + specials
//   lrt::tok::Tokenizer tk = lrt::tok::train_bpe(docs, o);  // docs: std::span<const std::string_view>
// Rules:
//   - every document is split with the pattern (in parallel); the unique pieces are counted and
//     put in byte order, so that nothing after depends on the thread count;
//   - ranks 0..255 are the single bytes (rank b = byte b); then classic BPE: repeatedly merge,
//     in every piece, the adjacent pair of tokens that occurs most often (weighted by the
//     piece's count; occurrences within a piece counted left to right without overlap, as the
//     merge replaces them); ties go to the smaller (left rank, right rank) pair. The merged token
//     gets the next rank (256, 257, ... in merge order); if its bytes are already a token (two
//     merges can spell the same bytes), pieces use that token and no rank is added;
//   - pair counts are kept incrementally (only the pieces that hold the merged pair are
//     revisited) with a max-heap of (count, pair) and lazy deletion;
//   - merges go on until ranks + specials = vocab_size, or stop early (fewer ranks) when no
//     adjacent pair is left in any piece (even a pair that occurs once is merged);
//   - the specials get ids after the ranks, in the order given; bos = the first special;
//   - errors (lrt::Error, op "tokenizer"): vocab_size < 256 + specials, an empty or repeated
//     special, no special (bos needs one), a corpus without bytes, a bad pattern.
// Deterministic: the same corpus and options give a byte-identical serialize() for any threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "patterns.hpp"
#include "regex.hpp"
#include "tokenizer.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {

struct BpeTrainOptions {
  token_t vocab_size = 4096;         // ranks + specials
  std::string pattern = "nanochat";  // a built-in name or a regex
  std::vector<std::string> specials = {"<|bos|>"};
  int threads = 0;                                            // 0: lrt::num_threads()
  std::function<void(token_t done, token_t total)> progress;  // after each merge: (ranks + specials, vocab_size)
};

namespace detail {
/// A (count, pair) heap entry; the top is the largest count, then the smallest pair.
struct PairEntry {
  std::int64_t count;
  std::uint64_t pair;  // left << 32 | right
  bool operator<(const PairEntry& o) const noexcept { return count != o.count ? count < o.count : pair > o.pair; }
};
inline std::uint64_t pair_key(std::uint32_t a, std::uint32_t b) noexcept { return (std::uint64_t{a} << 32) | b; }
}  // namespace detail

/// Trains a tokenizer on docs; see the top.
inline Tokenizer train_bpe(std::span<const std::string_view> docs, const BpeTrainOptions& o) {
  check(!o.specials.empty(), "tokenizer", "train_bpe needs at least one special (the first is bos)");
  for (std::size_t i = 0; i < o.specials.size(); ++i) {
    check(!o.specials[i].empty(), "tokenizer", "special ", i, " is empty");
    for (std::size_t j = 0; j < i; ++j)
      check(o.specials[j] != o.specials[i], "tokenizer", "special '", o.specials[i], "' twice");
  }
  check(o.vocab_size >= 256 + o.specials.size(), "tokenizer", "vocab_size ", o.vocab_size, " < 256 bytes + ",
        o.specials.size(), " specials");
  check(o.vocab_size < 0x7fffffffu, "tokenizer", "vocab_size ", o.vocab_size, " is too large");
  const Regex re = Regex::compile(pattern_source(o.pattern));

  // 1. Unique pieces and their counts, in byte order.
  using Counts = std::unordered_map<std::string_view, std::int64_t>;
  std::vector<Counts> partial;
  std::mutex m;
  std::size_t total_bytes = 0;
  detail::parallel_chunks(static_cast<index_t>(docs.size()), o.threads, [&](index_t b, index_t e) {
    Counts c;
    std::size_t bytes = 0;
    for (index_t i = b; i < e; ++i) {
      const std::string_view d = docs[static_cast<std::size_t>(i)];
      bytes += d.size();
      re.split(d, [&](std::size_t pb, std::size_t pe) { ++c[d.substr(pb, pe - pb)]; });
    }
    std::lock_guard<std::mutex> lk(m);
    partial.push_back(std::move(c));
    total_bytes += bytes;
  });
  check(total_bytes > 0, "tokenizer", "train_bpe: the corpus has no bytes");
  Counts all = std::move(partial[0]);
  for (std::size_t i = 1; i < partial.size(); ++i)
    for (const auto& [k, v] : partial[i]) all[k] += v;
  partial.clear();
  std::vector<std::pair<std::string_view, std::int64_t>> pieces(all.begin(), all.end());
  all = Counts();
  std::sort(pieces.begin(), pieces.end());

  // 2. Words (pieces of >= 2 bytes) as symbol runs in one arena.
  std::vector<std::uint32_t> syms, off, len;
  std::vector<std::int64_t> wcount;
  for (const auto& [p, c] : pieces) {
    if (p.size() < 2) continue;
    off.push_back(static_cast<std::uint32_t>(syms.size()));
    len.push_back(static_cast<std::uint32_t>(p.size()));
    wcount.push_back(c);
    for (unsigned char ch : p) syms.push_back(ch);
  }
  pieces.clear();
  pieces.shrink_to_fit();

  std::vector<std::string> tokens(256);
  std::unordered_map<std::string, token_t> token_of;
  for (int b = 0; b < 256; ++b) {
    tokens[static_cast<std::size_t>(b)] = std::string(1, static_cast<char>(b));
    token_of.emplace(tokens[static_cast<std::size_t>(b)], static_cast<token_t>(b));
  }
  const std::size_t target = o.vocab_size - o.specials.size();

  std::unordered_map<std::uint64_t, std::int64_t> count;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> where;
  for (std::uint32_t w = 0; w < off.size(); ++w) {
    const std::uint32_t* s = syms.data() + off[w];
    for (std::uint32_t i = 0; i + 1 < len[w]; ++i) {
      const std::uint64_t k = detail::pair_key(s[i], s[i + 1]);
      count[k] += wcount[w];
      std::vector<std::uint32_t>& ws = where[k];
      if (ws.empty() || ws.back() != w) ws.push_back(w);
    }
  }
  std::vector<detail::PairEntry> heap;
  heap.reserve(count.size());
  for (const auto& [k, c] : count) heap.push_back({c, k});
  std::make_heap(heap.begin(), heap.end());

  // 3. Merges.
  std::vector<std::pair<std::uint64_t, int>> local;  // a word's pair changes
  std::vector<std::uint64_t> grown;                  // pairs whose count grew in this merge
  std::vector<std::uint32_t> scratch;
  while (tokens.size() < target && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const detail::PairEntry top = heap.back();
    heap.pop_back();
    const auto it = count.find(top.pair);
    const std::int64_t actual = it == count.end() ? 0 : it->second;
    if (actual != top.count) {
      if (actual > 0) {
        heap.push_back({actual, top.pair});
        std::push_heap(heap.begin(), heap.end());
      }
      continue;
    }
    const auto a = static_cast<std::uint32_t>(top.pair >> 32), b = static_cast<std::uint32_t>(top.pair);
    std::string merged = tokens[a] + tokens[b];
    token_t c;
    if (const auto t = token_of.find(merged); t != token_of.end()) {
      c = t->second;
    } else {
      c = static_cast<token_t>(tokens.size());
      token_of.emplace(merged, c);
      tokens.push_back(std::move(merged));
    }
    std::vector<std::uint32_t> ws = std::move(where[top.pair]);
    where.erase(top.pair);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    grown.clear();
    for (const std::uint32_t w : ws) {
      std::uint32_t* s = syms.data() + off[w];
      const std::uint32_t L = len[w];
      bool has = false;
      for (std::uint32_t i = 0; i + 1 < L && !has; ++i) has = s[i] == a && s[i + 1] == b;
      if (!has) continue;  // a stale entry
      local.clear();
      for (std::uint32_t i = 0; i + 1 < L; ++i) local.emplace_back(detail::pair_key(s[i], s[i + 1]), -1);
      std::uint32_t n = 0;
      for (std::uint32_t i = 0; i < L;) {
        if (i + 1 < L && s[i] == a && s[i + 1] == b) {
          s[n++] = c;
          i += 2;
        } else {
          s[n++] = s[i++];
        }
      }
      len[w] = n;
      for (std::uint32_t i = 0; i + 1 < n; ++i) local.emplace_back(detail::pair_key(s[i], s[i + 1]), +1);
      std::sort(local.begin(), local.end());
      for (std::size_t i = 0; i < local.size();) {
        std::size_t j = i;
        int d = 0;
        for (; j < local.size() && local[j].first == local[i].first; ++j) d += local[j].second;
        if (d != 0) {
          const std::uint64_t k = local[i].first;
          std::int64_t& cnt = count[k];
          cnt += d * wcount[w];
          if (d > 0) {
            grown.push_back(k);
            std::vector<std::uint32_t>& wl = where[k];
            if (wl.empty() || wl.back() != w) wl.push_back(w);
          } else if (cnt == 0) {
            count.erase(k);
          }
        }
        i = j;
      }
    }
    count.erase(top.pair);
    std::sort(grown.begin(), grown.end());
    grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
    for (const std::uint64_t k : grown)
      if (const auto g = count.find(k); g != count.end() && g->second > 0) {
        heap.push_back({g->second, k});
        std::push_heap(heap.begin(), heap.end());
      }
    if (o.progress) o.progress(static_cast<token_t>(tokens.size() + o.specials.size()), o.vocab_size);
  }

  const auto n = static_cast<token_t>(tokens.size());
  std::vector<Special> specials;
  for (std::size_t i = 0; i < o.specials.size(); ++i) specials.push_back({o.specials[i], n + static_cast<token_t>(i)});
  return Tokenizer(std::move(tokens), o.pattern, std::move(specials), n);
}

}  // namespace tok
}  // namespace v0
}  // namespace lrt
