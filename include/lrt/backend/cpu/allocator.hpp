// lrt/backend/cpu/allocator.hpp: the CPU caching allocator behind every host tensor.
// Freed blocks are kept in per-size-class free lists and handed out again, so a training or
// decoding loop that repeats the same shapes stops calling the system allocator after its first
// iteration. Size classes: 4 per power of two (<= 25% slack), 64-byte aligned. Thread-safe.
// LRT_CPU_CACHE=0 in the environment (read at first use) turns caching off; empty_cache()
// returns cached blocks to the system. memory_stats() feeds peak-memory benchmarks.
#pragma once

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "../../core/config.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu {

/// Counters of the CPU allocator (bytes are size-class bytes).
struct MemoryStats {
  std::size_t in_use = 0;         // bytes held by live tensors
  std::size_t peak_in_use = 0;    // maximum of in_use since the last reset_peak()
  std::size_t cached = 0;         // bytes kept in free lists
  std::size_t system_allocs = 0;  // blocks obtained from the system so far
};

class CachingAllocator {
 public:
  static constexpr std::size_t alignment = 64;

  LRT_API static CachingAllocator& global() {
    static CachingAllocator* a = new CachingAllocator();  // never destroyed: tensors in static
    return *a;                                            // objects may outlive main()
  }

  /// The size class a request of n bytes is served from.
  static std::size_t size_class(std::size_t n) {
    if (n <= 256) return (n + 63) / 64 * 64;
    std::size_t p = 256;
    while (p * 2 < n) p *= 2;  // p < n <= 2p
    const std::size_t step = p / 4;
    return (n + step - 1) / step * step;
  }

  void* allocate(std::size_t bytes) {
    const std::size_t c = size_class(bytes ? bytes : 1);
    {
      std::lock_guard<std::mutex> lk(m_);
      stats_.in_use += c;
      if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
      if (enabled_) {
        auto it = free_.find(c);
        if (it != free_.end() && !it->second.empty()) {
          void* p = it->second.back();
          it->second.pop_back();
          stats_.cached -= c;
          return p;
        }
      }
      ++stats_.system_allocs;
    }
    return ::operator new (c, std::align_val_t{alignment});
  }

  void deallocate(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    const std::size_t c = size_class(bytes ? bytes : 1);
    {
      std::lock_guard<std::mutex> lk(m_);
      stats_.in_use -= c;
      if (enabled_) {
#if LRT_EXCEPTIONS
        try {
          free_[c].push_back(p);
          stats_.cached += c;
          return;
        } catch (...) {  // out of memory for the list itself: give the block back instead
        }
#else
        free_[c].push_back(p);
        stats_.cached += c;
        return;
#endif
      }
    }
    ::operator delete (p, std::align_val_t{alignment});
  }

  /// Gives each size class of the requests unit, 2 unit, ..., count unit bytes `extra` more free
  /// blocks than it holds now (its free blocks are taken first, then `extra` from the system, and
  /// all are returned to the cache), so that later requests of those sizes are served without the
  /// system. The decoder reserves its attention scratch this way.
  void reserve_free_blocks(std::size_t unit, std::size_t count, std::size_t extra) {
    std::vector<void*> held;
    std::size_t prev = 0;
    for (std::size_t i = 1; i <= count; ++i) {
      const std::size_t c = size_class(i * unit);
      if (c == prev) continue;
      prev = c;
      const std::size_t sys0 = stats().system_allocs;
      while (stats().system_allocs - sys0 < extra) held.push_back(allocate(c));
      for (void* p : held) deallocate(p, c);
      held.clear();
    }
  }

  /// Returns every cached block to the system.
  void empty_cache() {
    std::lock_guard<std::mutex> lk(m_);
    for (auto& [c, list] : free_)
      for (void* p : list) ::operator delete (p, std::align_val_t{alignment});
    free_.clear();
    stats_.cached = 0;
  }

  MemoryStats stats() const {
    std::lock_guard<std::mutex> lk(m_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lk(m_);
    stats_.peak_in_use = stats_.in_use;
  }

 private:
  CachingAllocator() {
    const char* s = std::getenv("LRT_CPU_CACHE");
    enabled_ = !(s && s[0] == '0');
  }
  mutable std::mutex m_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  MemoryStats stats_;
  bool enabled_ = true;
};

/// Statistics of the CPU allocator.
inline MemoryStats memory_stats() { return CachingAllocator::global().stats(); }
/// Starts a new peak-memory measurement.
inline void reset_peak_memory() { CachingAllocator::global().reset_peak(); }
/// Returns cached CPU blocks to the system.
inline void empty_cache() { CachingAllocator::global().empty_cache(); }

}  // namespace cpu
}  // namespace v0
}  // namespace lrt
