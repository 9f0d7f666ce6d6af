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
// - Checks done by kernels (detail::DeferredChecks, e.g. the embedding's ids against the table)
//   record their first failure in pinned, device-mapped host memory; the host raises it as an
//   lrt::Error at its next wait for the device (synchronize(), a copy to the host), without
//   waiting or copying for the check itself.
// Not here (yet): several devices, several streams, async copies.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../../core/device.hpp"
#include "../../core/error.hpp"
#include "check.cuh"
#include "profile.cuh"

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

namespace detail {
/// Sets the process-wide setting held in Slot() for its lifetime, then restores the previous
/// value (MatmulPrecisionScope, AttentionKernelScope).
template <class E, std::atomic<E>& (*Slot)()>
class SettingScope {
 public:
  explicit SettingScope(E v) : old_(Slot().exchange(v)) {}
  ~SettingScope() { Slot().store(old_); }
  SettingScope(const SettingScope&) = delete;
  SettingScope& operator=(const SettingScope&) = delete;

 private:
  E old_;
};
}  // namespace detail

namespace detail {

/// The first failure of a kernel's check, as the kernel writes it (failed last: 0 while none).
struct DeviceCheckSlot {
  long long position, value;
  int what, failed;
};

/// The checks kernels do where the host would otherwise have to copy data back to check it: a
/// kernel given slot() writes the first failure it finds there unless one is pending
/// (device_check_fail); the host raises it at its next wait (raise_pending, from synchronize())
/// as lrt::Error(op, "<name> <value> at position <position> out of range for <target>"). The
/// slot is pinned host memory mapped into the device's address space, so reading it after a wait
/// needs no copy. Never destroyed (leaked on purpose, like the allocator).
class DeferredChecks {
 public:
  static DeferredChecks& instance() {
    static DeferredChecks* d = new DeferredChecks();
    return *d;
  }
  /// The device address of the slot (allocated at first use).
  DeviceCheckSlot* slot() {
    std::lock_guard<std::mutex> lk(m_);
    if (!dev_) {
      void* h = nullptr;
      LRT_CUDA_CHECK(cudaHostAlloc(&h, sizeof(DeviceCheckSlot), cudaHostAllocMapped));
      host_ = static_cast<DeviceCheckSlot*>(h);
      host_->failed = 0;
      void* d = nullptr;
      const cudaError_t e = cudaHostGetDevicePointer(&d, h, 0);
      if (e != cudaSuccess) {
        (void)cudaFreeHost(h);
        host_ = nullptr;
        check_cuda(e, "cudaHostGetDevicePointer (the deferred checks' slot)");
      }
      dev_ = static_cast<DeviceCheckSlot*>(d);
    }
    return dev_;
  }
  /// A number for (op, name, target) that a kernel writes into the slot's `what`.
  int describe(const std::string& op, const std::string& name, const std::string& target) {
    std::lock_guard<std::mutex> lk(m_);
    for (std::size_t i = 0; i < what_.size(); ++i)
      if (what_[i].op == op && what_[i].name == name && what_[i].target == target) return static_cast<int>(i);
    what_.push_back({op, name, target});
    return static_cast<int>(what_.size() - 1);
  }
  /// After a wait for the device: throws the pending failure, if any (and clears it).
  void raise_pending() {
    std::unique_lock<std::mutex> lk(m_);
    if (!host_) return;
    volatile DeviceCheckSlot* h = host_;
    if (h->failed == 0) return;
    const long long pos = h->position, value = h->value;
    const int w = h->what;
    h->failed = 0;
    const What d = w >= 0 && static_cast<std::size_t>(w) < what_.size() ? what_[static_cast<std::size_t>(w)]
                                                                        : What{"cuda", "index", "its bound"};
    lk.unlock();
    ::lrt::throw_error(d.op, d.name + " " + std::to_string(value) + " at position " + std::to_string(pos) +
                                 " out of range for " + d.target);
  }

 private:
  struct What {
    std::string op, name, target;
  };
  DeferredChecks() = default;
  std::mutex m_;
  DeviceCheckSlot* host_ = nullptr;
  DeviceCheckSlot* dev_ = nullptr;
  std::vector<What> what_;
};

/// In a kernel: records a failed check unless one is already pending.
__device__ inline void device_check_fail(DeviceCheckSlot* s, int what, long long position, long long value) {
  if (*static_cast<volatile int*>(&s->failed) != 0) return;
  s->position = position;
  s->value = value;
  s->what = what;
  s->failed = 1;
}

}  // namespace detail

/// Waits for all work queued on lrt's stream; reports asynchronous kernel errors and the failed
/// device-side checks (detail::DeferredChecks) of the work it waited for.
inline void synchronize() {
  LRT_CUDA_CHECK(cudaStreamSynchronize(stream()));
  detail::DeferredChecks::instance().raise_pending();
}

/// Counters of the caching allocator (bytes are rounded block sizes).
struct AllocatorStats {
  std::size_t in_use_bytes = 0;      ///< held by live allocations
  std::size_t cached_bytes = 0;      ///< in the free lists, ready for reuse
  std::size_t peak_reserved = 0;     ///< highest in_use_bytes + cached_bytes so far
  std::uint64_t allocations = 0;     ///< allocate() calls that returned memory
  std::uint64_t cache_hits = 0;      ///< allocations served from a free list
  std::uint64_t device_mallocs = 0;  ///< cudaMalloc calls that succeeded
  std::uint64_t device_frees = 0;    ///< cudaFree calls (empty_cache, OOM retry)
  std::size_t graph_bytes = 0;       ///< held by captured graphs (StepGraph)
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
    if (auto it = capture_free_.find(size); capturing_ && it != capture_free_.end() && !it->second.empty()) {
      p = it->second.back();  // freed earlier in this capture: the graph's own
      it->second.pop_back();
    } else if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
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
      if (capturing_) capture_live_.insert(p);
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
      if (capturing_) {  // a captured graph may use it at every replay: it stays the graph's
        capture_live_.erase(p);
        capture_free_[size].push_back(p);
        stats_.graph_bytes += size;
        return;
      }
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

  /// From now until end_capture, freed blocks are kept for the graph being captured (and reused
  /// by its later allocations) instead of going back to the shared free lists.
  void begin_capture() {
    std::lock_guard<std::mutex> lk(m_);
    check(!capturing_, "cuda graph", "a capture is already in progress");
    capturing_ = true;
    capture_free_.clear();
    capture_live_.clear();
  }
  /// Ends the capture: returns the blocks freed during it (the graph owns them until
  /// release_graph_blocks) and how many blocks allocated during it are still live.
  std::size_t end_capture(std::vector<std::pair<void*, std::size_t>>& owned) {
    std::lock_guard<std::mutex> lk(m_);
    capturing_ = false;
    owned.clear();
    for (auto& [size, blocks] : capture_free_)
      for (void* p : blocks) owned.emplace_back(p, size);
    capture_free_.clear();
    const std::size_t live = capture_live_.size();
    capture_live_.clear();
    return live;
  }
  /// A graph's blocks go back to the shared free lists (work queued later runs after its replays).
  void release_graph_blocks(const std::vector<std::pair<void*, std::size_t>>& owned) noexcept {
    std::lock_guard<std::mutex> lk(m_);
    for (const auto& [p, size] : owned) {
      stats_.graph_bytes -= size;
      try {
        free_[size].push_back(p);
        stats_.cached_bytes += size;
      } catch (...) {
        (void)cudaFree(p);
        ++stats_.device_frees;
      }
    }
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
  bool capturing_ = false;
  std::map<std::size_t, std::vector<void*>> capture_free_;  // freed during the capture
  std::unordered_set<void*> capture_live_;                  // allocated during it, still live
};

}  // namespace detail

/// Returns the allocator's cached (free) blocks to the driver; live tensors are untouched.
inline void empty_cache() { detail::CachingAllocator::instance().release_cached(); }

/// A snapshot of the caching allocator's counters.
inline AllocatorStats allocator_stats() { return detail::CachingAllocator::instance().stats(); }

/// A CUDA graph recorded from lrt's stream: capture(f) runs f with the stream capturing (its
/// kernels, cuBLAS calls and device copies are recorded, not run), launch() replays them. f must
/// not wait for the device (no copy to or from the host, no synchronize: the capture fails with
/// an lrt::Error) and must free every tensor it allocates: the graph keeps those blocks, so the
/// addresses its kernels use stay reserved for it. Values that change between replays must live
/// in device buffers that the caller refills before launch() (with copies outside the capture).
class StepGraph {
 public:
  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph() { reset(); }

  bool ready() const noexcept { return exec_ != nullptr; }

  /// Records f's work into the graph (replacing any earlier one); nothing runs until launch().
  template <class F>
  void capture(F&& f) {
    reset();
    auto& a = detail::CachingAllocator::instance();
    a.begin_capture();
    const cudaError_t begun = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeRelaxed);
    if (begun != cudaSuccess) {
      a.end_capture(blocks_);
      a.release_graph_blocks(blocks_);
      blocks_.clear();
      detail::check_cuda(begun, "cudaStreamBeginCapture");
    }
    try {
      f();
    } catch (...) {
      cudaGraph_t g = nullptr;
      (void)cudaStreamEndCapture(stream(), &g);
      if (g) (void)cudaGraphDestroy(g);
      (void)cudaGetLastError();
      a.end_capture(blocks_);
      reset();
      throw;
    }
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream(), &g);
    const std::size_t live = a.end_capture(blocks_);
    if (ended != cudaSuccess || live != 0) {
      if (g) (void)cudaGraphDestroy(g);
      reset();
      detail::check_cuda(ended,
                         "cudaStreamEndCapture (the captured work waited for the device or copied "
                         "to or from the host)");
      ::lrt::throw_error("cuda graph", std::to_string(live) +
                                           " block(s) allocated during the capture are still "
                                           "live: the captured work must free what it allocates");
    }
    const cudaError_t inst = cudaGraphInstantiate(&exec_, g, 0);
    (void)cudaGraphDestroy(g);
    if (inst != cudaSuccess) {
      exec_ = nullptr;
      reset();
      detail::check_cuda(inst, "cudaGraphInstantiate");
    }
  }

  /// Replays the recorded work on lrt's stream (asynchronously, like any launch).
  void launch() {
    check(exec_ != nullptr, "cuda graph", "launch() before a successful capture()");
    LRT_CUDA_CHECK(cudaGraphLaunch(exec_, stream()));
  }

  /// Drops the graph; its blocks return to the allocator's free lists.
  void reset() noexcept {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
    if (!blocks_.empty()) detail::CachingAllocator::instance().release_graph_blocks(blocks_);
    blocks_.clear();
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
  std::vector<std::pair<void*, std::size_t>> blocks_;
};

}  // namespace cuda

template <>
struct DeviceTraits<cuda::Device> {
  /// The decoder records its steps into one of these (see Decoder::use_graphs).
  using StepGraph = cuda::StepGraph;
  static void* allocate(std::size_t bytes) { return cuda::detail::CachingAllocator::instance().allocate(bytes); }
  static void deallocate(void* p, std::size_t) noexcept { cuda::detail::CachingAllocator::instance().deallocate(p); }
  static void zero(void* p, std::size_t bytes) {
    if (bytes == 0) return;
    cuda::detail::ProfileMark mark(cuda::stream());
    LRT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cuda::stream()));
    mark.done("memset");
  }
  static void copy_from_host(void* dst, const void* src, std::size_t bytes) {
    copy(dst, src, bytes, cudaMemcpyHostToDevice, "host to device");
  }
  static void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    copy(dst, src, bytes, cudaMemcpyDeviceToHost, "device to host");
  }
  static void copy_within(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    cuda::detail::ProfileMark mark(cuda::stream());
    cuda::detail::check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda::stream()),
                             std::string("cudaMemcpyAsync(") + std::to_string(bytes) + " bytes, device to device)");
    mark.done("copy device to device");
  }
  static void synchronize() { cuda::synchronize(); }

 private:
  static void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* dir) {
    if (bytes == 0) return;
    cuda::detail::ProfileMark mark(cuda::stream());
    cuda::detail::check_cuda(cudaMemcpyAsync(dst, src, bytes, kind, cuda::stream()),
                             std::string("cudaMemcpyAsync(") + std::to_string(bytes) + " bytes, " + dir + ")");
    if (mark.recording()) mark.done(std::string("copy ") + dir);
    // From pageable host memory (lrt's host tensors, std::vector) cudaMemcpyAsync has read the
    // source when it returns (the driver stages it), so an upload need not wait for the device;
    // from page-locked or managed memory the copy runs later, and the caller's buffer is waited for.
    if (kind == cudaMemcpyHostToDevice && !page_locked(src)) return;
    cuda::synchronize();
  }
  /// Whether p is host memory the GPU reads asynchronously (page-locked, registered or managed);
  /// when the runtime cannot tell, true (then the copy waits, as it always did).
  static bool page_locked(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error state of this query
      return true;
    }
    return a.type != cudaMemoryTypeUnregistered;
  }
};

}  // namespace v0
}  // namespace lrt
