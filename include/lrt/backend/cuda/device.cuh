// lrt/backend/cuda/device.cuh: GPU memory for lrt::cuda::Device, the library's stream, and the
// device count.
//
// - One non-blocking stream per process (lrt::cuda::stream()), created at first use. Every
//   kernel, copy and cuBLAS call of the backend runs on it, so work is ordered without events.
// - Memory comes from a caching allocator: freed blocks go to a free list keyed by their
//   rounded size and are handed out again to later requests of the same size class. Reuse is
//   safe without synchronising because all work is on the one stream (a block is only reused
//   by work queued after the work that used it). lrt::cuda::empty_cache() returns the cached
//   blocks to the driver; a failing cudaMalloc empties the cache and retries once.
// - The copies to and from the host synchronise the stream before returning, so host code sees
//   plain synchronous semantics (the host buffer of a copy may be freed right after). zero() and
//   device-to-device copies only queue their work: nothing on the host can observe device memory
//   except through a copy to the host, which runs after them on the same stream.
// Not here (yet): several devices, several streams, pinned host memory, async copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "../../core/device.hpp"
#include "../../core/error.hpp"
#include "check.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda {

/// Number of usable CUDA devices; 0 (never an exception) when there is no GPU or no driver.
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/// The stream all lrt CUDA work runs on: created at first call (non-blocking: it does not
/// synchronise with the legacy default stream) and never destroyed.
inline cudaStream_t stream() {
  static const cudaStream_t s = [] {
    cudaStream_t x = nullptr;
    LRT_CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    return x;
  }();
  return s;
}

/// Waits for all work queued on lrt's stream; reports asynchronous kernel errors.
inline void synchronize() { LRT_CUDA_CHECK(cudaStreamSynchronize(stream())); }

/// Counters of the caching allocator (bytes are rounded block sizes).
struct AllocatorStats {
  std::size_t in_use_bytes = 0;     ///< held by live allocations
  std::size_t cached_bytes = 0;     ///< in the free lists, ready for reuse
  std::size_t peak_reserved = 0;    ///< highest in_use_bytes + cached_bytes so far
  std::uint64_t allocations = 0;    ///< allocate() calls that returned memory
  std::uint64_t cache_hits = 0;     ///< allocations served from a free list
  std::uint64_t device_mallocs = 0; ///< cudaMalloc calls that succeeded
  std::uint64_t device_frees = 0;   ///< cudaFree calls (empty_cache, OOM retry)
};

namespace detail {

/// Free lists per size class, guarded by one mutex. Never destroyed (leaked on purpose):
/// tensors with static storage may be freed after the CUDA runtime has shut down.
class CachingAllocator {
 public:
  static CachingAllocator& instance() {
    static CachingAllocator* a = new CachingAllocator();
    return *a;
  }

  /// The size class of a request: multiples of 512 bytes up to 1 MiB, then four classes per
  /// power of two (at most 25% slack).
  static std::size_t round_size(std::size_t bytes) {
    constexpr std::size_t small = 512, large = std::size_t{1} << 20;
    if (bytes <= large) return (bytes + small - 1) / small * small;
    int top = 63;
    while (!((bytes >> top) & 1u)) --top;
    const std::size_t step = std::size_t{1} << (top - 2);
    return (bytes + step - 1) / step * step;
  }

  void* allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    const std::size_t size = round_size(bytes);
    std::lock_guard<std::mutex> lk(m_);
    void* p = nullptr;
    if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= size;
      ++stats_.cache_hits;
    } else {
      cudaError_t e = cudaMalloc(&p, size);
      if (e == cudaErrorMemoryAllocation && stats_.cached_bytes > 0) {
        (void)cudaGetLastError();
        release_cached_locked();
        e = cudaMalloc(&p, size);
      }
      check_cuda(e, "cudaMalloc(" + std::to_string(size) + " bytes)");
      ++stats_.device_mallocs;
    }
    try {
      live_.emplace(p, size);
    } catch (...) {
      free_[size].push_back(p);  // keep the block; rethrow the host allocation failure
      stats_.cached_bytes += size;
      throw;
    }
    stats_.in_use_bytes += size;
    ++stats_.allocations;
    note_peak();
    return p;
  }

  /// Returns a block to its free list (no CUDA call, so it cannot fail or block).
  void deallocate(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lk(m_);
    const auto it = live_.find(p);
    if (it == live_.end()) return;  // not ours: ignore rather than corrupt the lists
    const std::size_t size = it->second;
    live_.erase(it);
    stats_.in_use_bytes -= size;
    try {
      free_[size].push_back(p);
      stats_.cached_bytes += size;
    } catch (...) {
      (void)cudaFree(p);  // no room in the list: hand the block straight back
      ++stats_.device_frees;
    }
  }

  /// Frees every cached block (after the stream has drained).
  void release_cached() {
    std::lock_guard<std::mutex> lk(m_);
    if (stats_.cached_bytes == 0) return;
    release_cached_locked();
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lk(m_);
    return stats_;
  }

 private:
  CachingAllocator() = default;

  void release_cached_locked() {
    LRT_CUDA_CHECK(cudaStreamSynchronize(stream()));  // queued work may still use the blocks
    cudaError_t first = cudaSuccess;
    for (auto& [size, blocks] : free_) {
      for (void* p : blocks) {
        const cudaError_t e = cudaFree(p);
        if (e != cudaSuccess && first == cudaSuccess) first = e;
        ++stats_.device_frees;
        stats_.cached_bytes -= size;
      }
      blocks.clear();
    }
    free_.clear();
    check_cuda(first, "cudaFree (emptying the allocator cache)");
  }

  void note_peak() {
    const std::size_t r = stats_.in_use_bytes + stats_.cached_bytes;
    if (r > stats_.peak_reserved) stats_.peak_reserved = r;
  }

  std::mutex m_;
  std::map<std::size_t, std::vector<void*>> free_;  // size class -> cached blocks
  std::unordered_map<void*, std::size_t> live_;     // live block -> its size class
  AllocatorStats stats_;
};

}  // namespace detail

/// Returns the allocator's cached (free) blocks to the driver; live tensors are untouched.
inline void empty_cache() { detail::CachingAllocator::instance().release_cached(); }

/// A snapshot of the caching allocator's counters.
inline AllocatorStats allocator_stats() { return detail::CachingAllocator::instance().stats(); }

}  // namespace cuda

template <>
struct DeviceTraits<cuda::Device> {
  static void* allocate(std::size_t bytes) {
    return cuda::detail::CachingAllocator::instance().allocate(bytes);
  }
  static void deallocate(void* p, std::size_t) noexcept {
    cuda::detail::CachingAllocator::instance().deallocate(p);
  }
  static void zero(void* p, std::size_t bytes) {
    if (bytes == 0) return;
    LRT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda::stream()));
  }
  static void copy_from_host(void* dst, const void* src, std::size_t bytes) {
    copy(dst, src, bytes, cudaMemcpyHostToDevice, "host to device");
  }
  static void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    copy(dst, src, bytes, cudaMemcpyDeviceToHost, "device to host");
  }
  static void copy_within(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    cuda::detail::check_cuda(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda::stream()),
        std::string("cudaMemcpyAsync(") + std::to_string(bytes) + " bytes, device to device)");
  }

 private:
  static void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                   const char* dir) {
    if (bytes == 0) return;
    cuda::detail::check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, cuda::stream()),
                             std::string("cudaMemcpyAsync(") + std::to_string(bytes) +
                                 " bytes, " + dir + ")");
    cuda::synchronize();
  }
};

}  // namespace v0
}  // namespace lrt
