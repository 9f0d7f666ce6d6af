// lrt/backend/cuda/profile.cuh: device time of lrt's CUDA work, per operation.
//
//   lrt::cuda::Profiler prof;              // records from here on
//   step();                                // any lrt work on the GPU
//   for (const auto& r : prof.stop())      // waits for the device; slowest operation first
//     std::printf("%-40s %6lld calls %8.3f ms %7.1f TFLOP/s\n", r.name.c_str(), r.calls, r.ms,
//                 r.flops / (r.ms * 1e9));
//
// While a Profiler is active, every kernel launch of the backend (cuda::detail::launch, named by
// its "what" text), every cuBLAS GEMM (named "gemm <precision> MxNxK", with "Bx" in front when
// batched, and counted with its 2*B*M*N*K FLOPs) and every device memset/copy is bracketed by two
// CUDA events on lrt's stream. stop() synchronises once and sums the elapsed times per name.
// The host never waits while recording, so the timings are those of the real schedule; a row's
// time runs from the moment the stream reached the first event to the end of the operation, so
// it includes any gap in which the device idled waiting for the host to launch it (span_ms()
// minus the sum of the rows is the rest: host waits and the events themselves, ~1-2 us each).
// Work recorded into a CUDA graph (StepGraph) is not profiled (events in a capture would become
// graph nodes). One Profiler at a time per process; not meant for production runs.
//
// No fmt, no Eigen; only the runtime API (the tests' CUDA emulator provides the event calls).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../core/error.hpp"
#include "check.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda {

/// One operation's totals in a profile.
struct ProfileRow {
  std::string name;        ///< the kernel's launch text, "gemm bf16 8192x768x768", "memset", ...
  std::int64_t calls = 0;  ///< how often it ran
  double ms = 0;           ///< device milliseconds, summed over the calls
  double flops = 0;        ///< floating-point operations (GEMMs only; 0 for the rest)
};

namespace detail {

/// The process's recording state: an event pool (events are created once and reused) and the
/// marks of the active profile.
class ProfileState {
 public:
  static ProfileState& instance() {
    static ProfileState* s = new ProfileState();  // leaked on purpose, like the allocator
    return *s;
  }
  bool active() const noexcept { return active_.load(std::memory_order_relaxed); }

  void start() {
    const std::lock_guard<std::mutex> lock(mu_);
    check(!active_, "cuda profiler", "a Profiler is already recording (one at a time per process)");
    active_ = true;
    marks_.clear();
  }

  cudaEvent_t take_event() {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!pool_.empty()) {
      cudaEvent_t e = pool_.back();
      pool_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    LRT_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  void give_back(cudaEvent_t e) {
    const std::lock_guard<std::mutex> lock(mu_);
    pool_.push_back(e);
  }
  void add(std::string name, double flops, cudaEvent_t a, cudaEvent_t b) {
    const std::lock_guard<std::mutex> lock(mu_);
    marks_.push_back(Mark{std::move(name), flops, a, b});
  }

  /// Ends the recording: waits for the last event, sums per name. span is the device time from
  /// the first mark's start to the last mark's end (0 without marks).
  std::vector<ProfileRow> stop(double& span) {
    std::vector<Mark> marks;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      check(active_, "cuda profiler", "stop() without an active recording");
      active_ = false;
      marks.swap(marks_);
    }
    span = 0;
    std::vector<ProfileRow> rows;
    if (marks.empty()) return rows;
    struct Recycle {  // the events go back to the pool whatever happens below
      ProfileState& s;
      std::vector<Mark>& m;
      ~Recycle() {
        for (auto& x : m) s.give_back(x.a), s.give_back(x.b);
      }
    } recycle{*this, marks};
    LRT_CUDA_CHECK(cudaEventSynchronize(marks.back().b));
    std::unordered_map<std::string, std::size_t> at;
    for (const auto& m : marks) {
      float ms = 0;
      LRT_CUDA_CHECK(cudaEventElapsedTime(&ms, m.a, m.b));
      auto [it, fresh] = at.try_emplace(m.name, rows.size());
      if (fresh) rows.push_back(ProfileRow{m.name, 0, 0, 0});
      ProfileRow& r = rows[it->second];
      ++r.calls;
      r.ms += ms;
      r.flops += m.flops;
    }
    float s = 0;
    LRT_CUDA_CHECK(cudaEventElapsedTime(&s, marks.front().a, marks.back().b));
    span = s;
    std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& x, const ProfileRow& y) { return x.ms > y.ms; });
    return rows;
  }

 private:
  struct Mark {
    std::string name;
    double flops;
    cudaEvent_t a, b;
  };
  std::mutex mu_;
  std::atomic<bool> active_{false};
  std::vector<Mark> marks_;
  std::vector<cudaEvent_t> pool_;
};

/// Brackets one operation on stream s while a Profiler records (and s is not capturing a graph):
/// the constructor records the start event, done(name, flops) the end. An operation that throws
/// before done() records nothing (its event goes back to the pool).
class ProfileMark {
 public:
  explicit ProfileMark(cudaStream_t s) : s_(s) {
    auto& st = ProfileState::instance();
    if (!st.active()) [[likely]]
      return;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    LRT_CUDA_CHECK(cudaStreamIsCapturing(s, &cap));
    if (cap != cudaStreamCaptureStatusNone) return;
    a_ = st.take_event();
    const cudaError_t e = cudaEventRecord(a_, s);
    if (e != cudaSuccess) {
      st.give_back(a_);
      a_ = nullptr;
      check_cuda(e, "cudaEventRecord (profiler)");
    }
  }
  ProfileMark(const ProfileMark&) = delete;
  ProfileMark& operator=(const ProfileMark&) = delete;
  ~ProfileMark() {
    if (a_) ProfileState::instance().give_back(a_);
  }
  /// Whether this operation is being recorded (callers build expensive names only then).
  bool recording() const noexcept { return a_ != nullptr; }
  /// The operation has been queued: records the end event under `name` (free when not recording).
  void done(std::string_view name, double flops = 0) {
    if (!a_) return;
    auto& st = ProfileState::instance();
    cudaEvent_t b = st.take_event();
    const cudaError_t e = cudaEventRecord(b, s_);
    if (e != cudaSuccess) {
      st.give_back(b);
      check_cuda(e, "cudaEventRecord (profiler)");
    }
    st.add(std::string(name), flops, a_, b);
    a_ = nullptr;
  }

 private:
  cudaStream_t s_;
  cudaEvent_t a_ = nullptr;
};

}  // namespace detail

/// Records the device time of lrt's CUDA work per operation from construction to stop() (see the
/// top of this file). Destroying an active Profiler stops it and drops its records.
class Profiler {
 public:
  Profiler() { detail::ProfileState::instance().start(); }
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  ~Profiler() {
    if (!stopped_) {
      try {
        double s = 0;
        (void)detail::ProfileState::instance().stop(s);
      } catch (...) {  // a failed device: nothing to report from a destructor
      }
    }
  }
  /// Ends the recording (waits for the device once) and returns one row per operation name,
  /// the most time first.
  std::vector<ProfileRow> stop() {
    check(!stopped_, "cuda profiler", "stop() called twice");
    stopped_ = true;
    return detail::ProfileState::instance().stop(span_ms_);
  }
  /// Device milliseconds from the first recorded operation's start to the last one's end.
  double span_ms() const noexcept { return span_ms_; }

 private:
  bool stopped_ = false;
  double span_ms_ = 0;
};

}  // namespace cuda
}  // namespace v0
}  // namespace lrt
