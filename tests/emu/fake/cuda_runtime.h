// tests/emu/fake/cuda_runtime.h: a CPU emulation of the parts of the CUDA runtime that lrt's
// CUDA backend uses, so that its kernels (include/lrt/backend/cuda/*.cuh, unmodified) can be
// compiled by a host compiler and run without nvcc or a GPU. Test-only: put tests/emu/fake first
// on the include path, so that <cuda_runtime.h> and <cublas_v2.h> resolve to these files.
//
// How a launch runs (lrt_cuda_emu::launch, called by lrt::cuda::detail::launch when
// LRT_CUDA_EMULATOR is defined):
// - The arguments are converted to the kernel's parameter types once, on the host, as in a
//   <<<...>>> launch; every pointer argument must be null or point into memory from cudaMalloc.
// - The configuration is checked like the runtime does (at most 1024 threads, grid limits, 48 KiB
//   of dynamic shared memory); a bad one sets cudaErrorInvalidConfiguration and runs nothing.
// - Blocks run one after the other, in a shuffled order. Inside a block every CUDA thread is a
//   fiber (its own stack with a guard page; switched by a few instructions on x86-64, by ucontext
//   elsewhere) on the calling OS thread; a fiber runs until
//   it reaches __syncthreads(), a warp-synchronous operation (__shfl_*_sync, __syncwarp) or its
//   end. A round resumes every runnable fiber once, in a shuffled order (so code that relies on an
//   order between threads that no barrier enforces sees different orders); then a warp whose 32
//   lanes all wait at a warp operation completes it (all lanes exchange values at once), and the
//   block's barrier opens when every thread waits at it. A barrier that some threads can never
//   reach (some exited, or wait elsewhere), a warp operation in a partial warp or with a mask other
//   than all lanes, and operations that the lanes disagree on are reported and abort the program.
// - __shared__ variables are function statics: one copy, reused by the blocks in turn (never
//   cleared between blocks).
// - threadIdx, blockIdx, blockDim and gridDim are read-only globals set before each resume.
// Device memory is host memory (malloc), registered: cudaMemcpy* and cudaMemset* check that each
// side lies inside (or wholly outside) one allocation as their kind says, new allocations are
// filled with 0xff bytes (NaN), and lrt_cuda_emu::memory_limit can make cudaMalloc fail. Pinned
// host memory (cudaHostAlloc) is host memory registered like device memory (so that kernels may
// take its cudaHostGetDevicePointer, which is the same address, as for cudaHostAllocMapped on a
// GPU) but not counted in device_bytes(); cudaPointerGetAttributes says cudaMemoryTypeHost. Streams
// are synchronous: every call is done when it returns. Under AddressSanitizer the fiber switches
// are annotated (__sanitizer_start/finish_switch_fiber).
#pragma once

#define LRT_CUDA_EMULATOR 1

#include <math.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdarg>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define LRT_CUDA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LRT_CUDA_EMU_ASAN 1
#endif
#endif
#if defined(LRT_CUDA_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// ---------------------------------------------------------------------------------------------
// Types and constants (the runtime's numeric values)

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
};

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};

struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};

// Stream capture (CUDA graphs): while a stream captures, kernel launches, cuBLAS calls, memsets
// and device-to-device copies on it are recorded instead of run; a graph launch runs them in
// order. A synchronisation or a copy to or from the host while capturing is refused with
// cudaErrorStreamCaptureUnsupported and invalidates the capture (as on a GPU).
struct CUstream_st {
  unsigned flags;
  std::vector<std::function<void()>>* capture = nullptr;  // the sequence being recorded
  bool capture_invalid = false;
};
typedef struct CUstream_st* cudaStream_t;

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
struct CUgraph_st {
  std::vector<std::function<void()>> nodes;
};
typedef struct CUgraph_st* cudaGraph_t;
struct CUgraphExec_st {
  std::vector<std::function<void()>> nodes;
};
typedef struct CUgraphExec_st* cudaGraphExec_t;

// Events: a record stamps the host clock when the stream reaches it (at once, since emulated
// work runs synchronously; inside a capture, when the graph replays it).
struct CUevent_st {
  std::chrono::steady_clock::time_point at{};
  bool recorded = false;
};
typedef struct CUevent_st* cudaEvent_t;

#define cudaStreamDefault 0x00u
#define cudaStreamNonBlocking 0x01u

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __shared__ static

// ---------------------------------------------------------------------------------------------
// The emulator

namespace lrt_cuda_emu {

/// Multiprocessors the emulated device reports (lrt sizes grid-stride grids from it: at most 32
/// blocks per multiprocessor, so small values make the kernels loop). Set it before the first launch.
inline int multiprocessors = 1;
/// Bytes cudaMalloc may hold at once (0: no limit): lets a test run out of device memory.
inline std::size_t memory_limit = 0;
/// The emulated device's memory: a larger single request fails with cudaErrorMemoryAllocation
/// whatever memory_limit says (as on a GPU, and without asking the host for terabytes).
inline constexpr std::size_t device_memory = std::size_t{1} << 40;

/// What the emulator has done so far.
struct Stats {
  std::uint64_t launches = 0;     // kernels run
  std::uint64_t blocks = 0;       // blocks run
  std::uint64_t threads = 0;      // CUDA threads (fibers) run
  std::uint64_t switches = 0;     // fiber resumes
  std::uint64_t bad_configs = 0;  // launches refused with cudaErrorInvalidConfiguration
  std::uint64_t captured = 0;     // launches, cuBLAS calls and copies recorded into graphs
  std::uint64_t graph_launches = 0;
};
inline Stats stats;

[[noreturn]] inline void fatal(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs("lrt CUDA emulator: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::fflush(stderr);
  std::abort();
}

namespace detail {

inline cudaError_t last_error = cudaSuccess;
/// Records e as the last error (as the runtime does for failed calls) and returns it.
inline cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

// ---- device memory ----

/// The live cudaMalloc blocks (leaked on purpose: lrt's allocator may free after static
/// destruction).
class Memory {
 public:
  static Memory& get() {
    static Memory* m = new Memory();
    return *m;
  }

  cudaError_t allocate(void** p, std::size_t n) {
    std::lock_guard<std::mutex> lk(m_);
    *p = nullptr;
    if (n == 0) return cudaSuccess;
    if (n > device_memory) return cudaErrorMemoryAllocation;
    if (memory_limit != 0 && (n > memory_limit || bytes_ > memory_limit - n)) return cudaErrorMemoryAllocation;
    void* q = std::malloc(n);
    if (!q) return cudaErrorMemoryAllocation;
    std::memset(q, 0xff, n);  // uninitialised device memory: NaN, not zeros
    blocks_.emplace(reinterpret_cast<std::uintptr_t>(q), n);
    bytes_ += n;
    *p = q;
    return cudaSuccess;
  }

  cudaError_t release(void* p) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> lk(m_);
    const auto it = blocks_.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == blocks_.end() || pinned_.count(it->first)) return cudaErrorInvalidDevicePointer;
    bytes_ -= it->second;
    blocks_.erase(it);
    std::free(p);
    return cudaSuccess;
  }

  /// Pinned host memory: registered (kernels may take it) but not counted as device bytes.
  cudaError_t allocate_pinned(void** p, std::size_t n) {
    std::lock_guard<std::mutex> lk(m_);
    *p = nullptr;
    if (n == 0) n = 1;
    void* q = std::malloc(n);
    if (!q) return cudaErrorMemoryAllocation;
    std::memset(q, 0xff, n);
    blocks_.emplace(reinterpret_cast<std::uintptr_t>(q), n);
    pinned_.insert(reinterpret_cast<std::uintptr_t>(q));
    *p = q;
    return cudaSuccess;
  }
  cudaError_t release_pinned(void* p) {
    if (!p) return cudaSuccess;
    std::lock_guard<std::mutex> lk(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (!pinned_.count(a)) return cudaErrorInvalidValue;
    pinned_.erase(a);
    blocks_.erase(a);
    std::free(p);
    return cudaSuccess;
  }
  /// Whether p is the start of a pinned block (or lies inside one).
  bool pinned(const void* p) {
    std::lock_guard<std::mutex> lk(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return false;
    --it;
    return a < it->first + it->second && pinned_.count(it->first) != 0;
  }

  /// 1 if [p, p + n) lies inside one device allocation, 0 if it overlaps none, -1 otherwise.
  int where(const void* p, std::size_t n) {
    std::lock_guard<std::mutex> lk(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p), e = a + (n ? n : 1);
    auto it = blocks_.upper_bound(a);
    if (it != blocks_.begin()) {
      const auto prev = std::prev(it);
      if (a < prev->first + prev->second) return e <= prev->first + prev->second ? 1 : -1;
    }
    return it != blocks_.end() && it->first < e ? -1 : 0;
  }

  /// Whether p points into a device allocation or just past its end.
  bool points_into(const void* p) {
    std::lock_guard<std::mutex> lk(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return false;
    --it;
    return a <= it->first + it->second;
  }

  std::size_t bytes() {
    std::lock_guard<std::mutex> lk(m_);
    return bytes_;
  }

 private:
  std::mutex m_;
  std::map<std::uintptr_t, std::size_t> blocks_;
  std::set<std::uintptr_t> pinned_;  // blocks_ entries from cudaHostAlloc
  std::size_t bytes_ = 0;
};

inline std::set<cudaStream_t>& streams() {
  static auto* s = new std::set<cudaStream_t>();
  return *s;
}
inline bool valid_stream(cudaStream_t s) { return s == nullptr || streams().count(s) != 0; }

// ---- fibers ----

// Context switches: switch_context(&from, to) saves the running context into `from` and resumes
// `to`; start_context(c, stack, size, f) makes a context that runs f() on the stack.
#if defined(__x86_64__) && !defined(LRT_CUDA_EMU_UCONTEXT)
/// The callee-saved registers, MXCSR and the x87 control word go on the stack of the context
/// being left, its stack pointer into *from; then the same in reverse from `to`.
struct Context {
  void* sp = nullptr;
};
__attribute__((naked, noinline)) inline void switch_stacks(void** /*from*/, void* /*to*/) {
  asm("pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "subq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret\n");
}
inline void switch_context(Context& from, const Context& to) { switch_stacks(&from.sp, to.sp); }
/// The first switch to c "returns" into f with the stack aligned as after a call; f must never
/// return.
inline void start_context(Context& c, char* stack, std::size_t size, void (*f)()) {
  auto top = reinterpret_cast<std::uintptr_t>(stack + size) & ~std::uintptr_t{15};
  auto* w = reinterpret_cast<std::uint64_t*>(top);
  w[-1] = 0;                                    // f's (never used) return address
  w[-2] = reinterpret_cast<std::uintptr_t>(f);  // where the switch returns to
  for (int k = 3; k <= 8; ++k) w[-k] = 0;       // rbp, rbx, r12 .. r15
  std::uint32_t fp[2] = {0, 0};
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(fp[0]), "=m"(fp[1]));
  std::memcpy(&w[-9], fp, sizeof fp);  // the caller's floating-point modes
  c.sp = &w[-9];
}
#else
struct Context {
  ucontext_t uc;
};
inline void switch_context(Context& from, const Context& to) {
  if (swapcontext(&from.uc, &to.uc) != 0) fatal("swapcontext failed");
}
inline void start_context(Context& c, char* stack, std::size_t size, void (*f)()) {
  if (getcontext(&c.uc) != 0) fatal("getcontext failed");
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, f, 0);
}
#endif

enum class Wait : unsigned char { run, sync, warp, done };
enum class WarpOp : unsigned char { shfl_idx, shfl_up, shfl_down, shfl_xor, syncwarp };

struct Fiber {
  Context ctx;
  char* stack = nullptr;  // lowest usable byte
  Wait wait = Wait::run;
  WarpOp op = WarpOp::syncwarp;
  unsigned mask = 0;
  int arg = 0, width = 0;
  std::size_t size = 0;
  unsigned char in[8] = {}, out[8] = {};
  void* fake_stack = nullptr;  // ASan's, while switched out
};

inline uint3 thread_idx{0, 0, 0}, block_idx{0, 0, 0};
inline dim3 block_dim{1, 1, 1}, grid_dim{1, 1, 1};

struct Engine {
  static constexpr std::size_t stack_bytes = std::size_t{256} << 10;
  std::size_t guard_bytes = 0;
  std::vector<char*> stacks;  // mmap'd: guard page(s), then stack_bytes
  std::vector<Fiber> fibers;
  std::vector<unsigned> order;
  Context sched{};
  unsigned current = 0;
  bool in_launch = false;
  void (*body)(void*) = nullptr;
  void* body_arg = nullptr;
  std::uint64_t rng = 0x9e3779b97f4a7c15ull;
  const void* main_bottom = nullptr;  // the scheduler's stack, for ASan
  std::size_t main_size = 0;
  void* sched_fake_stack = nullptr;
  std::mutex launch_mutex;

  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  template <class V>
  void shuffle(V& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[next() % i]);
  }
  char* stack(unsigned t) {
    if (guard_bytes == 0) guard_bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    while (stacks.size() <= t) {
      void* m = mmap(nullptr, guard_bytes + stack_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED) fatal("cannot map a fiber stack");
      if (mprotect(m, guard_bytes, PROT_NONE) != 0) fatal("cannot protect a fiber stack");
      stacks.push_back(static_cast<char*>(m));
    }
    return stacks[t] + guard_bytes;
  }
};

inline Engine& engine() {
  static Engine* e = new Engine();
  return *e;
}

inline void fiber_main() {
  Engine& e = engine();
#if defined(LRT_CUDA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &e.main_bottom, &e.main_size);
#endif
  e.body(e.body_arg);
  e.fibers[e.current].wait = Wait::done;
#if defined(LRT_CUDA_EMU_ASAN)
  __sanitizer_start_switch_fiber(nullptr, e.main_bottom, e.main_size);  // this fiber ends
#endif
  Context dead;
  switch_context(dead, e.sched);
  fatal("a finished fiber was resumed");
}

/// Called by a fiber: waits (switches back to the scheduler) until w is satisfied.
inline void yield(Wait w) {
  Engine& e = engine();
  if (!e.in_launch) fatal("a synchronising device function was called outside a kernel");
  Fiber& f = e.fibers[e.current];
  f.wait = w;
#if defined(LRT_CUDA_EMU_ASAN)
  __sanitizer_start_switch_fiber(&f.fake_stack, e.main_bottom, e.main_size);
#endif
  switch_context(f.ctx, e.sched);
#if defined(LRT_CUDA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(f.fake_stack, &e.main_bottom, &e.main_size);
#endif
}

inline void resume(Engine& e, unsigned t) {
  Fiber& f = e.fibers[t];
  e.current = t;
  thread_idx = uint3{t % block_dim.x, (t / block_dim.x) % block_dim.y, t / (block_dim.x * block_dim.y)};
  f.wait = Wait::run;
  ++stats.switches;
#if defined(LRT_CUDA_EMU_ASAN)
  __sanitizer_start_switch_fiber(&e.sched_fake_stack, f.stack, Engine::stack_bytes);
#endif
  switch_context(e.sched, f.ctx);
#if defined(LRT_CUDA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(e.sched_fake_stack, nullptr, nullptr);
#endif
}

inline const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::shfl_idx:
      return "__shfl_sync";
    case WarpOp::shfl_up:
      return "__shfl_up_sync";
    case WarpOp::shfl_down:
      return "__shfl_down_sync";
    case WarpOp::shfl_xor:
      return "__shfl_xor_sync";
    case WarpOp::syncwarp:
      return "__syncwarp";
  }
  return "?";
}

/// Completes the warp operation that lanes [w0, w0 + 32) all wait at.
inline void complete_warp_op(Engine& e, unsigned w0) {
  const Fiber& f0 = e.fibers[w0];
  for (unsigned l = 0; l < 32; ++l) {
    const Fiber& f = e.fibers[w0 + l];
    if (f.op != f0.op || f.mask != f0.mask || f.width != f0.width || f.size != f0.size)
      fatal(
          "block (%u, %u, %u), warp %u: lane 0 calls %s (mask %#x, width %d) while lane %u calls "
          "%s (mask %#x, width %d)",
          block_idx.x, block_idx.y, block_idx.z, w0 / 32, op_name(f0.op), f0.mask, f0.width, l, op_name(f.op), f.mask,
          f.width);
  }
  if (f0.mask != 0xffffffffu)
    fatal("block (%u, %u, %u), warp %u: %s with mask %#x: the emulator supports full warps only", block_idx.x,
          block_idx.y, block_idx.z, w0 / 32, op_name(f0.op), f0.mask);
  const int w = f0.width;
  if (f0.op != WarpOp::syncwarp && (w < 1 || w > 32 || (w & (w - 1)) != 0))
    fatal("%s with width %d (must be a power of two <= 32)", op_name(f0.op), w);
  for (unsigned l = 0; l < 32; ++l) {
    Fiber& f = e.fibers[w0 + l];
    const int lane = static_cast<int>(l), seg = lane / (w ? w : 1) * w;
    int src = lane;
    switch (f.op) {
      case WarpOp::shfl_idx:
        src = seg + ((f.arg % w) + w) % w;
        break;
      case WarpOp::shfl_up:
        src = lane - seg >= f.arg ? lane - f.arg : lane;
        break;
      case WarpOp::shfl_down:
        src = lane - seg + f.arg < w ? lane + f.arg : lane;
        break;
      case WarpOp::shfl_xor: {
        const int s = lane ^ f.arg;
        src = s >= 0 && s < 32 && s / w <= lane / w ? s : lane;  // later groups: own value
        break;
      }
      case WarpOp::syncwarp:
        break;
    }
    std::memcpy(f.out, e.fibers[w0 + static_cast<unsigned>(src)].in, f.size);
    f.wait = Wait::run;
  }
}

/// Runs one block of nt threads to completion.
inline void run_block(Engine& e, unsigned nt) {
  e.fibers.resize(nt);
  e.order.resize(nt);
  for (unsigned t = 0; t < nt; ++t) {
    Fiber& f = e.fibers[t];
    f.stack = e.stack(t);
#if defined(LRT_CUDA_EMU_ASAN)
    __asan_unpoison_memory_region(f.stack, Engine::stack_bytes);
#endif
    start_context(f.ctx, f.stack, Engine::stack_bytes, fiber_main);
    f.wait = Wait::run;
    e.order[t] = t;
  }
  e.shuffle(e.order);
  stats.threads += nt;
  for (unsigned round = 0;; ++round) {
    if (round % 2 == 0) {
      for (unsigned t : e.order)
        if (e.fibers[t].wait == Wait::run) resume(e, t);
    } else {
      for (unsigned k = nt; k-- > 0;)
        if (e.fibers[e.order[k]].wait == Wait::run) resume(e, e.order[k]);
    }
    unsigned done = 0, sync = 0, warp = 0;
    for (const Fiber& f : e.fibers) {
      done += f.wait == Wait::done;
      sync += f.wait == Wait::sync;
      warp += f.wait == Wait::warp;
    }
    if (done == nt) return;
    bool progress = false;
    if (warp > 0) {
      for (unsigned w0 = 0; w0 < nt; w0 += 32) {
        unsigned waiting = 0;
        for (unsigned l = w0; l < nt && l < w0 + 32; ++l) waiting += e.fibers[l].wait == Wait::warp;
        if (waiting == 0) continue;
        if (nt - w0 < 32)
          fatal(
              "block (%u, %u, %u): a warp operation in the partial warp %u (a block of %u "
              "threads)",
              block_idx.x, block_idx.y, block_idx.z, w0 / 32, nt);
        if (waiting == 32) {
          complete_warp_op(e, w0);
          progress = true;
        }
      }
    }
    if (sync > 0 && sync + done == nt) {
      if (done > 0)
        fatal(
            "block (%u, %u, %u): %u of %u threads wait at __syncthreads() but the others have "
            "exited",
            block_idx.x, block_idx.y, block_idx.z, sync, nt);
      for (Fiber& f : e.fibers) f.wait = Wait::run;
      progress = true;
    }
    if (!progress)
      fatal(
          "block (%u, %u, %u) is stuck: of %u threads, %u have exited, %u wait at "
          "__syncthreads() and %u at warp operations whose warps are not all there",
          block_idx.x, block_idx.y, block_idx.z, nt, done, sync, warp);
  }
}

/// Runs body(arg) as every thread of the grid.
inline void run_grid(dim3 grid, dim3 block, void (*body)(void*), void* arg) {
  Engine& e = engine();
  std::lock_guard<std::mutex> lk(e.launch_mutex);
  if (e.in_launch) fatal("a kernel launch from inside a kernel");
  e.in_launch = true;
  e.body = body;
  e.body_arg = arg;
  block_dim = block;
  grid_dim = grid;
  const unsigned nt = block.x * block.y * block.z;
  const std::uint64_t nb = std::uint64_t{grid.x} * grid.y * grid.z;
  std::vector<std::uint64_t> blocks(nb);
  for (std::uint64_t b = 0; b < nb; ++b) blocks[b] = b;
  e.shuffle(blocks);
  for (const std::uint64_t b : blocks) {
    block_idx = uint3{static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                      static_cast<unsigned>(b / grid.x / grid.y)};
    run_block(e, nt);
    ++stats.blocks;
  }
  ++stats.launches;
  e.in_launch = false;
}

template <class T>
void check_pointer_arg(std::size_t k, const T& v) {
  if constexpr (std::is_pointer_v<T>) {
    if (v != nullptr && !Memory::get().points_into(v))
      fatal("kernel argument %zu (%p) is not a device pointer", k, static_cast<const void*>(v));
  }
}

template <class Tuple, std::size_t... I>
void check_pointer_args(const Tuple& t, std::index_sequence<I...>) {
  (check_pointer_arg(I, std::get<I>(t)), ...);
}

template <class... P>
struct Call {
  void (*kernel)(P...);
  std::tuple<P...> params;
  static void run(void* self) {
    auto* c = static_cast<Call*>(self);
    std::apply(c->kernel, c->params);  // each thread gets its own copies of the arguments
  }
};

template <class T>
void warp_op(WarpOp op, unsigned mask, T& v, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp shuffles take values of at most 8 bytes");
  Engine& e = engine();
  if (!e.in_launch) fatal("%s outside a kernel", op_name(op));
  Fiber& f = e.fibers[e.current];
  f.op = op;
  f.mask = mask;
  f.arg = arg;
  f.width = width;
  f.size = sizeof(T);
  std::memcpy(f.in, &v, sizeof(T));
  yield(Wait::warp);
  std::memcpy(&v, e.fibers[e.current].out, sizeof(T));
}

}  // namespace detail

/// kernel<<<grid, block, shmem, stream>>>(args...) on the CPU (see the top of this file).
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t shmem, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel launched with the wrong number of arguments");
  const std::uint64_t nt = std::uint64_t{block.x} * block.y * block.z;
  if (nt == 0 || nt > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.x > 2147483647u || grid.y > 65535u || grid.z > 65535u || shmem > 48 * 1024) {
    ++stats.bad_configs;
    detail::fail(cudaErrorInvalidConfiguration);
    return;
  }
  if (!detail::valid_stream(stream)) {
    detail::fail(cudaErrorInvalidResourceHandle);
    return;
  }
  detail::Call<P...> call{kernel, std::tuple<P...>(std::forward<A>(args)...)};
  detail::check_pointer_args(call.params, std::index_sequence_for<P...>{});
  if (stream && stream->capture) {  // recorded: run (and its pointers checked again) at each replay
    stream->capture->push_back([call, grid, block]() mutable {
      detail::check_pointer_args(call.params, std::index_sequence_for<P...>{});
      detail::run_grid(grid, block, &detail::Call<P...>::run, &call);
    });
    ++stats.captured;
    return;
  }
  detail::run_grid(grid, block, &detail::Call<P...>::run, &call);
}

/// Bytes currently held by cudaMalloc.
inline std::size_t device_bytes() { return detail::Memory::get().bytes(); }

}  // namespace lrt_cuda_emu

// ---------------------------------------------------------------------------------------------
// Built-in variables and device functions

inline const uint3& threadIdx = lrt_cuda_emu::detail::thread_idx;
inline const uint3& blockIdx = lrt_cuda_emu::detail::block_idx;
inline const dim3& blockDim = lrt_cuda_emu::detail::block_dim;
inline const dim3& gridDim = lrt_cuda_emu::detail::grid_dim;
inline constexpr int warpSize = 32;

inline void __syncthreads() { lrt_cuda_emu::detail::yield(lrt_cuda_emu::detail::Wait::sync); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  int dummy = 0;
  lrt_cuda_emu::detail::warp_op(lrt_cuda_emu::detail::WarpOp::syncwarp, mask, dummy, 0, 32);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  lrt_cuda_emu::detail::warp_op(lrt_cuda_emu::detail::WarpOp::shfl_idx, mask, v, src, width);
  return v;
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  lrt_cuda_emu::detail::warp_op(lrt_cuda_emu::detail::WarpOp::shfl_up, mask, v, static_cast<int>(delta), width);
  return v;
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  lrt_cuda_emu::detail::warp_op(lrt_cuda_emu::detail::WarpOp::shfl_down, mask, v, static_cast<int>(delta), width);
  return v;
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  lrt_cuda_emu::detail::warp_op(lrt_cuda_emu::detail::WarpOp::shfl_xor, mask, v, lane_mask, width);
  return v;
}

inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}
inline double __longlong_as_double(long long i) {
  double d;
  std::memcpy(&d, &i, sizeof d);
  return d;
}
inline long long __double_as_longlong(double d) {
  long long i;
  std::memcpy(&i, &d, sizeof i);
  return i;
}

// Round-to-nearest arithmetic: plain IEEE operations (compile with -ffp-contract=off so that
// the host compiler does not fuse them either).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return ::sqrtf(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return ::sqrt(a); }

// ---------------------------------------------------------------------------------------------
// Runtime API

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection:
      return "invalid copy direction for memcpy";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
  }
  return "unrecognized error code";
}
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = lrt_cuda_emu::detail::last_error;
  lrt_cuda_emu::detail::last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return lrt_cuda_emu::detail::last_error; }

inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int device) {
  if (device != 0) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *v = 1024;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *v = 32;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *v = lrt_cuda_emu::multiprocessors;
      return cudaSuccess;
  }
  return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
}
struct cudaDeviceProp {
  char name[256];
  int multiProcessorCount;
  std::size_t totalGlobalMem;
};
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!p) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  if (device != 0) return lrt_cuda_emu::detail::fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "%s", "lrt CUDA emulator (CPU)");
  p->multiProcessorCount = lrt_cuda_emu::multiprocessors;
  p->totalGlobalMem = lrt_cuda_emu::device_memory;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : lrt_cuda_emu::detail::fail(cudaErrorInvalidDevice);
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  *s = new CUstream_st{flags};  // kept in streams(): never freed unless destroyed
  lrt_cuda_emu::detail::streams().insert(*s);
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr || lrt_cuda_emu::detail::streams().erase(s) == 0)
    return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  delete s;
  return cudaSuccess;
}
inline cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned* flags) {
  if (!lrt_cuda_emu::detail::valid_stream(s)) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  *flags = s ? s->flags : cudaStreamDefault;
  return cudaSuccess;
}
namespace lrt_cuda_emu {
/// Times the host waited for the device: cudaStreamSynchronize calls and copies to the host
/// (which wait for the stream on a GPU). Tests use them to show that a code path never waits.
inline std::uint64_t stream_syncs = 0;
inline std::uint64_t device_to_host_copies = 0;
}  // namespace lrt_cuda_emu

namespace lrt_cuda_emu::detail {
/// A call that must not happen while s captures: invalidates the capture, returns the error.
inline cudaError_t refuse_in_capture(cudaStream_t s) {
  if (s && s->capture) {
    s->capture_invalid = true;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  return cudaSuccess;
}
/// Runs f now, or records it when s captures.
template <class F>
void run_or_record(cudaStream_t s, F&& f) {
  if (s && s->capture) {
    s->capture->push_back(std::forward<F>(f));
    ++stats.captured;
  } else {
    f();
  }
}
}  // namespace lrt_cuda_emu::detail

inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (!lrt_cuda_emu::detail::valid_stream(s)) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = lrt_cuda_emu::detail::refuse_in_capture(s); e != cudaSuccess) return e;
  ++lrt_cuda_emu::stream_syncs;
  return cudaSuccess;
}
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
  if (s == nullptr || !lrt_cuda_emu::detail::valid_stream(s))  // the legacy stream cannot capture
    return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  if (s->capture || mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed)
    return lrt_cuda_emu::detail::fail(cudaErrorIllegalState);
  s->capture = new std::vector<std::function<void()>>();
  s->capture_invalid = false;
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  if (s == nullptr || !lrt_cuda_emu::detail::valid_stream(s) || !s->capture)
    return lrt_cuda_emu::detail::fail(cudaErrorIllegalState);
  std::unique_ptr<std::vector<std::function<void()>>> nodes(s->capture);
  s->capture = nullptr;
  *g = nullptr;
  if (s->capture_invalid) return lrt_cuda_emu::detail::fail(cudaErrorStreamCaptureInvalidated);
  *g = new CUgraph_st{std::move(*nodes)};
  return cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* st) {
  if (!lrt_cuda_emu::detail::valid_stream(s)) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  *st = !(s && s->capture)   ? cudaStreamCaptureStatusNone
        : s->capture_invalid ? cudaStreamCaptureStatusInvalidated
                             : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* x, cudaGraph_t g, unsigned long long = 0) {
  if (!g) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  *x = new CUgraphExec_st{g->nodes};
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
  if (!x) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  if (!lrt_cuda_emu::detail::valid_stream(s)) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  if (s && s->capture) return lrt_cuda_emu::detail::fail(cudaErrorStreamCaptureUnsupported);
  for (auto& f : x->nodes) f();
  ++lrt_cuda_emu::stats.graph_launches;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
  delete x;
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}

inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (!e) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  *e = new CUevent_st{};
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (!e) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr) {
  if (!e || !lrt_cuda_emu::detail::valid_stream(s)) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  lrt_cuda_emu::detail::run_or_record(s, [e] {
    e->at = std::chrono::steady_clock::now();
    e->recorded = true;
  });
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (!e) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  ++lrt_cuda_emu::stream_syncs;
  return cudaSuccess;
}
/// Milliseconds from a to b; both must have been recorded (cudaErrorInvalidResourceHandle else,
/// as the driver answers for an event never recorded).
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if (!ms || !a || !b || !a->recorded || !b->recorded)
    return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}

inline cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  const cudaError_t e = lrt_cuda_emu::detail::Memory::get().allocate(p, bytes);
  return e == cudaSuccess ? e : lrt_cuda_emu::detail::fail(e);
}
template <class T>
cudaError_t cudaMalloc(T** p, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
inline cudaError_t cudaFree(void* p) {
  const cudaError_t e = lrt_cuda_emu::detail::Memory::get().release(p);
  return e == cudaSuccess ? e : lrt_cuda_emu::detail::fail(e);
}
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  if (p != nullptr && lrt_cuda_emu::detail::Memory::get().pinned(p)) {
    a->type = cudaMemoryTypeHost;
    a->device = 0;
    a->devicePointer = a->hostPointer = const_cast<void*>(p);
    return cudaSuccess;
  }
  const bool dev = p != nullptr && lrt_cuda_emu::detail::Memory::get().where(p, 1) == 1;
  a->type = dev ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
  a->device = dev ? 0 : -2;
  a->devicePointer = dev ? const_cast<void*>(p) : nullptr;
  a->hostPointer = dev ? nullptr : const_cast<void*>(p);
  return cudaSuccess;
}

#define cudaHostAllocDefault 0x00u
#define cudaHostAllocPortable 0x01u
#define cudaHostAllocMapped 0x02u
#define cudaHostAllocWriteCombined 0x04u
/// Pinned host memory (see the top of this file): the device pointer of a block is its address.
inline cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned flags) {
  if (!p || flags > 0x07u) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  const cudaError_t e = lrt_cuda_emu::detail::Memory::get().allocate_pinned(p, bytes);
  return e == cudaSuccess ? e : lrt_cuda_emu::detail::fail(e);
}
inline cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned flags) {
  if (!d || flags != 0 || !lrt_cuda_emu::detail::Memory::get().pinned(h))
    return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  *d = h;
  return cudaSuccess;
}
inline cudaError_t cudaFreeHost(void* p) {
  const cudaError_t e = lrt_cuda_emu::detail::Memory::get().release_pinned(p);
  return e == cudaSuccess ? e : lrt_cuda_emu::detail::fail(e);
}

namespace lrt_cuda_emu::detail {

/// Whether [p, p + n) is wholly device memory (want_device) or wholly host memory.
inline bool region_is(const void* p, std::size_t n, bool want_device) {
  if (n == 0) return true;
  if (p == nullptr) return false;
  return Memory::get().where(p, n) == (want_device ? 1 : 0);
}

inline cudaError_t check_copy(void* dst, std::size_t dn, const void* src, std::size_t sn, cudaMemcpyKind kind,
                              cudaStream_t s) {
  if (!valid_stream(s)) return fail(cudaErrorInvalidResourceHandle);
  bool dd = false, sd = false;
  switch (kind) {
    case cudaMemcpyHostToHost:
      break;
    case cudaMemcpyHostToDevice:
      dd = true;
      break;
    case cudaMemcpyDeviceToHost:
      sd = true;
      break;
    case cudaMemcpyDeviceToDevice:
      dd = sd = true;
      break;
    case cudaMemcpyDefault:
      dd = Memory::get().where(dst, dn ? dn : 1) == 1;
      sd = Memory::get().where(src, sn ? sn : 1) == 1;
      break;
    default:
      return fail(cudaErrorInvalidMemcpyDirection);
  }
  if (!region_is(dst, dn, dd) || !region_is(src, sn, sd)) return fail(cudaErrorInvalidValue);
  const auto d = reinterpret_cast<std::uintptr_t>(dst), r = reinterpret_cast<std::uintptr_t>(src);
  if (dn && sn && d < r + sn && r < d + dn) return fail(cudaErrorInvalidValue);  // overlap
  if (sd && !dd) ++device_to_host_copies;
  return cudaSuccess;
}

}  // namespace lrt_cuda_emu::detail

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind,
                                   cudaStream_t s = nullptr) {
  if (s && s->capture && kind != cudaMemcpyDeviceToDevice)  // host memory: not capturable here
    return lrt_cuda_emu::detail::refuse_in_capture(s);
  const cudaError_t e = lrt_cuda_emu::detail::check_copy(dst, n, src, n, kind, s);
  if (e != cudaSuccess) return e;
  if (n) lrt_cuda_emu::detail::run_or_record(s, [=] { std::memcpy(dst, src, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, n, kind, nullptr);
}
inline cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
                                     std::size_t width, std::size_t height, cudaMemcpyKind kind,
                                     cudaStream_t s = nullptr) {
  if (dpitch < width || spitch < width) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  const std::size_t dn = height ? (height - 1) * dpitch + width : 0;
  const std::size_t sn = height ? (height - 1) * spitch + width : 0;
  if (s && s->capture) return lrt_cuda_emu::detail::refuse_in_capture(s);
  const cudaError_t e = lrt_cuda_emu::detail::check_copy(dst, dn, src, sn, kind, s);
  if (e != cudaSuccess) return e;
  for (std::size_t r = 0; r < height && width > 0; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int v, std::size_t n, cudaStream_t s = nullptr) {
  if (!lrt_cuda_emu::detail::valid_stream(s)) return lrt_cuda_emu::detail::fail(cudaErrorInvalidResourceHandle);
  if (!lrt_cuda_emu::detail::region_is(p, n, true)) return lrt_cuda_emu::detail::fail(cudaErrorInvalidValue);
  if (n) lrt_cuda_emu::detail::run_or_record(s, [=] { std::memset(p, v, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, std::size_t n) { return cudaMemsetAsync(p, v, n, nullptr); }
