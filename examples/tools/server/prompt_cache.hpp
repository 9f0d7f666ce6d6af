// lrt-server's prompt cache: the state of every position of the sequences its rows were fed,
// kept after the requests end, so that a new request whose prompt begins with one of them starts
// its row from that prefix and feeds only the rest.
//
// What is kept, and why: a position's state is its key and value in every layer and, for a
// variant with memory, its source state s_p (runtime::Decoding::position_state_size: 2 L D + d
// floats). A row at position n holds nothing else (its cache windows and memory ring are cut
// from the states of positions 0..n-1, with their tokens), so the states of a sequence serve any
// of its prefixes: a conversation's next turn (the whole earlier sequence), and a system prompt
// shared with other conversations (the first tokens of any of them). Snapshots of a row at the
// end of its prompt would serve only the first. The cost of the memory over a plain KV cache is d
// floats per position: 1/(2 L) of the rest with one KV head per query head.
//
// Exactness: the engine feeds prompts one token per step and its rows' products are
// batch-invariant, so a state depends only on the tokens before it; a row joined from the cached
// states continues with the bits a fresh row computes (tests/unit/runtime: tools.runtime_api).
//
// Bounded: entries and the histories being recorded (the rows decoding now) share `budget`
// bytes; room is made by dropping the least recently used entries. A recording that finds no
// room stops (what it holds is still kept). The engine's thread alone calls it; stats() may be
// read from any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include <lrt/runtime/decoding.hpp>

namespace server {

using lrt::index_t;

/// The states of a sequence of positions and their tokens, in chunks of `chunk` positions, so
/// that a growing history never moves what it holds.
class History {
 public:
  static constexpr index_t chunk = 64;

  History() = default;
  explicit History(index_t state_size) : S_(state_size) {}

  index_t size() const noexcept { return static_cast<index_t>(tokens_.size()); }
  bool empty() const noexcept { return tokens_.empty(); }
  index_t state_size() const noexcept { return S_; }
  const std::vector<index_t>& tokens() const noexcept { return tokens_; }
  const float* state(index_t p) const noexcept {
    return chunks_[static_cast<std::size_t>(p / chunk)].get() + (p % chunk) * S_;
  }
  /// Bytes a chunk takes, those n positions take (whole chunks), and those the history holds.
  std::size_t chunk_bytes() const noexcept { return static_cast<std::size_t>(chunk * S_) * sizeof(float); }
  std::size_t bytes_for(index_t n) const noexcept {
    return static_cast<std::size_t>((n + chunk - 1) / chunk) * chunk_bytes();
  }
  std::size_t bytes() const noexcept { return chunks_.size() * chunk_bytes(); }
  /// Whether the next position needs a new chunk.
  bool full() const noexcept { return size() % chunk == 0; }
  /// Room for one more position (with `token`): where its state goes. A new chunk when full().
  float* append(index_t token) {
    if (full()) chunks_.emplace_back(new float[static_cast<std::size_t>(chunk * S_)]);
    tokens_.push_back(token);
    return const_cast<float*>(state(size() - 1));
  }
  /// Forgets the last position (its chunk stays).
  void pop_back() noexcept { tokens_.pop_back(); }
  /// A copy of the first n positions.
  History prefix(index_t n) const {
    History h(S_);
    for (index_t p = 0; p < n; ++p)
      std::memcpy(h.append(tokens_[static_cast<std::size_t>(p)]), state(p),
                  static_cast<std::size_t>(S_) * sizeof(float));
    return h;
  }
  /// Pointers to the states of the first n positions (what Decoding::try_join_state reads).
  void pointers(index_t n, std::vector<const float*>& out) const {
    out.clear();
    for (index_t p = 0; p < n; ++p) out.push_back(state(p));
  }
  /// The positions tokens[0..n) have in common with this history's.
  index_t common(std::span<const index_t> tokens) const noexcept {
    const std::size_t n = std::min(tokens.size(), tokens_.size());
    return static_cast<index_t>(
        std::mismatch(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(n), tokens_.begin()).first -
        tokens.begin());
  }

 private:
  index_t S_ = 0;
  std::vector<index_t> tokens_;
  std::vector<std::unique_ptr<float[]>> chunks_;
};

/// The cache's counters (lrt_prompt_cache_* in /metrics).
struct CacheStats {
  std::uint64_t hits = 0, misses = 0, evictions = 0, cached_tokens = 0;
  std::size_t bytes = 0, entries = 0, budget = 0;
};

class PromptCache {
 public:
  /// Off until configured: `budget` bytes for positions of `state_size` floats (empty).
  void configure(std::size_t budget, index_t state_size) {
    entries_.clear();
    budget_ = budget, S_ = state_size;
    std::lock_guard<std::mutex> lock(m_);
    stats_ = {};
  }

  bool enabled() const noexcept { return budget_ > 0 && S_ > 0; }
  index_t state_size() const noexcept { return S_; }

  /// The entry holding the longest prefix of `prompt` of at most `most` tokens, and its length in
  /// `len` (nullptr and 0 when none holds more than the first token, the BOS every prompt starts
  /// with); counts a hit or a miss.
  const History* lookup(std::span<const index_t> prompt, index_t most, index_t& len) {
    len = 0;
    Entry* best = nullptr;
    for (Entry& e : entries_) {
      const index_t n = std::min(e.h.common(prompt), most);
      if (n > len) len = n, best = &e;
    }
    std::lock_guard<std::mutex> lock(m_);
    if (best == nullptr || len < 2) {
      len = 0;
      ++stats_.misses;
      return nullptr;
    }
    best->used = ++clock_;
    ++stats_.hits;
    stats_.cached_tokens += static_cast<std::uint64_t>(len);
    return &best->h;
  }

  /// An entry that holds all of `tokens` (they are a prefix of its own), or nullptr.
  const History* holder(std::span<const index_t> tokens) const {
    for (const Entry& e : entries_)
      if (e.h.common(tokens) == static_cast<index_t>(tokens.size())) return &e.h;
    return nullptr;
  }
  /// Drops every entry that holds all of `tokens`.
  void erase(std::span<const index_t> tokens) {
    std::size_t freed = 0;
    for (auto it = entries_.begin(); it != entries_.end();)
      if (it->h.common(tokens) == static_cast<index_t>(tokens.size()))
        freed += it->h.bytes(), it = entries_.erase(it);
      else
        ++it;
    std::lock_guard<std::mutex> lock(m_);
    stats_.bytes -= freed, stats_.entries = entries_.size();
  }

  /// Takes the entry `h` out of the cache (its bytes stay taken: they become the caller's, to
  /// give back with insert or release).
  History take(const History* h) {
    const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return &e.h == h; });
    History out = std::move(it->h);
    entries_.erase(it);
    std::lock_guard<std::mutex> lock(m_);
    stats_.entries = entries_.size();
    return out;
  }

  /// Takes `bytes` from the budget for a recording, dropping the least recently used entries
  /// (never `keep`) to make room; false when they do not fit even so (nothing is taken).
  bool reserve(std::size_t bytes, const History* keep = nullptr) {
    if (!enabled()) return false;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(m_);
        if (stats_.bytes + bytes <= budget_) {
          stats_.bytes += bytes;
          return true;
        }
      }
      auto victim = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (&it->h != keep && (victim == entries_.end() || it->used < victim->used)) victim = it;
      if (victim == entries_.end()) return false;
      const std::size_t freed = victim->h.bytes();
      entries_.erase(victim);
      std::lock_guard<std::mutex> lock(m_);
      stats_.bytes -= freed, ++stats_.evictions, stats_.entries = entries_.size();
    }
  }
  /// Gives back what a recording took.
  void release(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(m_);
    stats_.bytes -= std::min(bytes, stats_.bytes);
  }

  /// Keeps a recorded history (its bytes were reserved): the entries it extends are dropped; it is
  /// dropped itself if an entry extends it.
  void insert(History h) {
    if (h.empty()) return;
    std::size_t freed = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
      const index_t common = it->h.common(h.tokens());
      if (common == h.size()) {  // an entry holds it already
        it->used = ++clock_;
        release(h.bytes());
        return;
      }
      if (common == it->h.size()) {  // it extends this entry
        freed += it->h.bytes();
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    entries_.push_back({std::move(h), ++clock_});
    std::lock_guard<std::mutex> lock(m_);
    stats_.bytes -= freed, stats_.entries = entries_.size();
  }

  CacheStats stats() const {
    std::lock_guard<std::mutex> lock(m_);
    CacheStats s = stats_;
    s.budget = budget_;
    return s;
  }

 private:
  struct Entry {
    History h;
    std::uint64_t used = 0;  // the clock when it was last looked up or kept
  };

  std::size_t budget_ = 0;
  index_t S_ = 0;
  std::list<Entry> entries_;  // a list: lookup's pointers stay valid while others are dropped
  std::uint64_t clock_ = 0;
  mutable std::mutex m_;
  CacheStats stats_;  // bytes: the entries' and the recordings'
};

}  // namespace server
