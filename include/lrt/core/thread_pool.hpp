// lrt/core/thread_pool.hpp: the library's single pool of worker threads.
// Sized once, at first use, by LRT_NUM_THREADS (default: physical cores). Workers sleep on a
// condition variable between jobs (no spinning), parallel_for never allocates, and a
// parallel_for called from inside a worker runs serially: the pool is never nested, and
// lrt makes BLAS single-threaded so that no second pool runs beside it.
// Not here: task graphs, futures, work stealing.
//
// LRT_SINGLE_THREAD (defined for the whole program, as the lrt::embedded target does): no
// threads; ThreadPool is the calling thread alone (size 1, whatever it is asked for), so its
// parallel_for calls f(0, n) there. Every kernel gives the same results either way (their chunks
// never change what a row computes).
#pragma once

#include <utility>

#include "config.hpp"

#if defined(LRT_SINGLE_THREAD)

namespace lrt {
inline namespace v0 {
/// The calling thread alone (LRT_SINGLE_THREAD): the interface of the pool below.
class ThreadPool {
 public:
  explicit ThreadPool(int /*threads*/) noexcept {}
  static ThreadPool& global() noexcept {
    static ThreadPool pool(1);
    return pool;
  }
  int size() const noexcept { return 1; }
  template <class F>
  void parallel_for(index_t n, index_t /*grain*/, F&& f) {
    if (n > 0) f(index_t{0}, n);
  }
};
}  // namespace v0
}  // namespace lrt
#else

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "config.hpp"
#include "error.hpp"

namespace lrt {
inline namespace v0 {

namespace detail {
/// Number of physical cores (distinct (package, core) pairs), or hardware_concurrency.
inline int physical_cores() {
  std::set<std::pair<std::string, std::string>> cores;
  for (unsigned cpu = 0;; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pk(base + "physical_package_id"), co(base + "core_id");
    if (!pk || !co) break;
    std::string p, c;
    pk >> p;
    co >> c;
    cores.emplace(p, c);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  const unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

/// Parses LRT_NUM_THREADS; throws on garbage so a typo is not silently ignored.
inline int threads_from_env() {
  const char* s = std::getenv("LRT_NUM_THREADS");
  if (!s || !*s) return physical_cores();
  char* end = nullptr;
  const long n = std::strtol(s, &end, 10);
  check(end && *end == '\0' && n >= 1 && n <= 1024, "thread_pool",
        "LRT_NUM_THREADS must be an integer in [1, 1024], got '", s, "'");
  return static_cast<int>(n);
}

LRT_API inline thread_local bool in_pool_task = false;
}  // namespace detail

/// A fixed set of workers that run chunks of one parallel_for at a time.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) : size_(std::max(1, threads)) {
    workers_.reserve(static_cast<std::size_t>(size_ - 1));
    for (int i = 1; i < size_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  /// The pool every lrt kernel uses; created at first call from LRT_NUM_THREADS.
  LRT_API static ThreadPool& global() {
    static ThreadPool pool(detail::threads_from_env());
    return pool;
  }

  /// Threads that run a parallel_for, the calling thread included.
  int size() const noexcept { return size_; }

  /// Calls f(begin, end) on disjoint chunks covering [0, n), each at least `grain` long (but
  /// the last). Serial when n is small, the pool has one thread, or we are already inside a task.
  /// Exceptions from f propagate to the caller (the first one wins).
  template <class F>
  void parallel_for(index_t n, index_t grain, F&& f) {
    if (n <= 0) return;
    grain = std::max<index_t>(grain, 1);
    const index_t max_chunks = (n + grain - 1) / grain;
    const index_t chunks = std::min<index_t>(max_chunks, size_);
    if (chunks <= 1 || detail::in_pool_task) {
      f(index_t{0}, n);
      return;
    }
    auto body = [&](index_t c) {
      const index_t b = n * c / chunks, e = n * (c + 1) / chunks;
      f(b, e);
    };
    run(chunks, &body, [](void* obj, index_t c) { (*static_cast<decltype(body)*>(obj))(c); });
  }

 private:
  using Call = void (*)(void*, index_t);

  void run(index_t chunks, void* obj, Call call) {
    std::lock_guard<std::mutex> job_lock(job_m_);  // one job at a time across user threads
    {
      // A worker that woke late for the previous job may still be reading its state.
      std::unique_lock<std::mutex> lk(m_);
      done_.wait(lk, [&] { return active_ == 0; });
      obj_ = obj;
      call_ = call;
      chunks_ = chunks;
      next_.store(0, std::memory_order_relaxed);
      remaining_ = chunks;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [&] { return remaining_ == 0 && active_ == 0; });
#if LRT_EXCEPTIONS
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
#endif
  }

  void work() {
    detail::in_pool_task = true;
    index_t finished = 0;
    for (;;) {
      const index_t c = next_.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks_) break;
#if LRT_EXCEPTIONS
      try {
        call_(obj_, c);
      } catch (...) {
        std::lock_guard<std::mutex> lk(m_);
        if (!error_) error_ = std::current_exception();
      }
#else
      call_(obj_, c);
#endif
      ++finished;
    }
    detail::in_pool_task = false;
    if (finished) {
      std::lock_guard<std::mutex> lk(m_);
      remaining_ -= finished;
      if (remaining_ == 0) done_.notify_all();
    }
  }

  void worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(m_);
        wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        ++active_;
      }
      work();
      std::lock_guard<std::mutex> lk(m_);
      if (--active_ == 0) done_.notify_all();
    }
  }

  int size_;
  std::vector<std::thread> workers_;
  std::mutex job_m_, m_;
  std::condition_variable wake_, done_;
  bool stop_ = false;
  std::uint64_t generation_ = 0;
  void* obj_ = nullptr;
  Call call_ = nullptr;
  index_t chunks_ = 0;
  std::atomic<index_t> next_{0};
  index_t remaining_ = 0;
  int active_ = 0;  // workers inside work()
  std::exception_ptr error_;
};
}  // namespace v0
}  // namespace lrt
#endif  // LRT_SINGLE_THREAD

namespace lrt {
inline namespace v0 {

/// Shorthand for ThreadPool::global().parallel_for.
template <class F>
void parallel_for(index_t n, index_t grain, F&& f) {
  ThreadPool::global().parallel_for(n, grain, std::forward<F>(f));
}

/// Threads of the global pool.
inline int num_threads() { return ThreadPool::global().size(); }

}  // namespace v0
}  // namespace lrt
