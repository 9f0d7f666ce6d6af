// lrt-train's --out folder and its stop signals: a run never overwrites another run, a run that
// fails before its first checkpoint removes what it created, and SIGINT/SIGTERM stop training
// after the current step (a checkpoint is saved; the program exits 130/143).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <csignal>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <lrt/train/trainer.hpp>

#include "tool_util.hpp"

namespace tool {

// ---------------------------------------------------------------------------------------------
// Stop signals

/// The signal that asked lrt-train to stop (0: none): set by the handler, read by the Trainer at
/// each step (set_stop_source) and by the program between its phases. LRT_API: one per process,
/// where the runtime library (which holds the pairs' sessions) keeps its own inline code local.
LRT_API inline volatile std::sig_atomic_t& stop_signal() {
  static volatile std::sig_atomic_t s = 0;
  return s;
}

namespace detail {
extern "C" inline void on_stop_signal(int sig) {
  if (stop_signal() != 0) {  // the second one: stop at once
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  stop_signal() = sig;
  static const char msg[] =
      "\nlrt-train: stopping after this step to save a checkpoint (the same signal again stops at once)\n";
  [[maybe_unused]] const auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
}
}  // namespace detail

/// SIGINT and SIGTERM set stop_signal() (a second one ends the process as before); a signal the
/// process started with ignored (nohup, a background job of a script) stays ignored.
inline void catch_stop_signals() {
  for (const int s : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = detail::on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(s, &sa, nullptr);
  }
}

inline const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

/// Tests' fault-injection point: where the environment's LRT_TRAIN_FAULT names `moment`, the process
/// is stopped there as a user would stop it. Moments:
///   "first-save"  a step's log line is written, its first checkpoint not: SIGKILL at once (no
///                 handler, no destructor), as a kill or a second stop signal then would
///   "revised"     --time has just shortened the plan: SIGTERM, so the run saves after the step and
///                 prints the command that continues it
inline void fault_point(std::string_view moment) {
  static bool done = false;  // once: a second SIGTERM would stop at once
  const char* e = std::getenv("LRT_TRAIN_FAULT");
  if (e == nullptr || moment != e || done) return;
  done = true;
  ::kill(::getpid(), moment == "revised" ? SIGTERM : SIGKILL);
}

/// Tests' simulated slowdown, the machine getting busier: where the environment has
/// LRT_TRAIN_SLOW=FROM:SECONDS, every step from the FROM-th on (counted from 1 over the run; FROM%:
/// from that percentage of the horizon at the time) takes SECONDS longer. Returns the seconds slept
/// after step `step` (0-based) of `horizon`, which the caller counts in that step's time.
inline double slow_point(std::int64_t step, std::int64_t horizon) {
  const char* e = std::getenv("LRT_TRAIN_SLOW");
  double from = 0, seconds = 0;
  char unit = 0;
  if (e == nullptr) return 0;
  if (std::sscanf(e, "%lf%%:%lf", &from, &seconds) == 2)
    unit = '%';
  else if (std::sscanf(e, "%lf:%lf", &from, &seconds) != 2)
    return 0;
  if (unit == '%') from = from / 100 * static_cast<double>(horizon);
  if (static_cast<double>(step + 1) < from || !(seconds > 0)) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// A stop asked before training started: nothing to save.
struct Interrupted {
  int signal;
};
/// Throws Interrupted when a stop was asked: the checks between lrt-train's phases.
inline void check_stop() {
  if (stop_signal() != 0) throw Interrupted{static_cast<int>(stop_signal())};
}

// ---------------------------------------------------------------------------------------------
// The --out folder

/// Every name lrt-train writes into --out DIR: its logs, then what lrt::Trainer::save writes.
inline constexpr std::string_view run_entries[] = {"log.csv",      "loss.svg",          "memory.csv",
                                                   "summary.json", "tokenizer.lrt",     "latest",
                                                   "checkpoints",  "model.safetensors", "optim.safetensors"};

/// The checkpoint --resume DIR continues from (lrt::find_checkpoint). A run folder whose run stopped
/// before its first complete checkpoint has nothing to resume: a usage error that says to start it
/// again (lrt-train starts afresh in such a folder, OutDir).
inline lrt::CheckpointLocation resume_checkpoint(const std::string& dir) {
  try {
    return lrt::find_checkpoint(dir);
  } catch (const lrt::Error& e) {
    namespace fs = std::filesystem;
    std::error_code ec;
    bool run_files = false;
    if (fs::is_directory(dir, ec))
      for (const std::string_view n : run_entries) run_files = run_files || fs::exists(dir + "/" + std::string(n), ec);
    if (!run_files) throw;
    throw UsageError(
        fmt::format("--resume '{}': nothing to resume: that run stopped before its first complete "
                    "checkpoint ({}). Start it again: the same command without --resume {}",
                    dir, e.what(), dir));
  }
}

/// lrt-train's --out: checked before any work, and cleaned up after a failure.
///  - A folder that holds anything but this run's own files is refused (a usage error saying what
///    is there); this run's own: the run directory that --resume continues from.
///  - --force replaces another run: lrt-train's files there are removed, each named; other files
///    stay where they are.
///  - Until keep() (the first checkpoint is saved), leaving the scope removes what this run
///    created: the folder itself if it made it, else the files it added.
/// Only the rank that writes (rank 0) touches the folder.
class OutDir {
 public:
  OutDir(std::string dir, bool own, bool force, bool writer) : dir_(std::move(dir)), writer_(writer) {
    namespace fs = std::filesystem;
    if (!writer_) return;
    std::error_code ec;
    if (!fs::exists(dir_, ec)) {  // the topmost folder this run creates (--out a/b/c with no a: a)
      fs::path p = fs::path(dir_).lexically_normal();
      if (p.filename().empty()) p = p.parent_path();
      created_ = p;
      for (fs::path up = p.parent_path(); !up.empty() && !fs::exists(up, ec); up = up.parent_path()) created_ = up;
    } else if (!fs::is_directory(dir_, ec)) {
      throw UsageError(fmt::format("--out '{}' is a file, not a folder", dir_));
    } else {
      lock();  // before anything in it is looked at or removed
      if (!own) refuse_or_replace(force);
    }
    lrt::ensure_writable_directory(dir_);
    if (lock_fd_ < 0) lock();
    lrt::detail::remove_stale_save_files(dir_, dir_ + "/checkpoints",
                                         {"log.csv", "loss.svg", "memory.csv", "summary.json", "tokenizer.lrt"});
    for (const std::string_view n : run_entries)
      if (!fs::exists(dir_ + "/" + std::string(n), ec)) added_.emplace_back(n);
  }
  OutDir(const OutDir&) = delete;
  OutDir& operator=(const OutDir&) = delete;
  ~OutDir() {
    if (writer_ && !kept_) remove_created();
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }
  /// A checkpoint is saved: from now on the run's files stay whatever happens.
  void keep() noexcept { kept_ = true; }

 private:
  /// The folder's lock for the run's life (flock on the folder itself: no file of its own, released
  /// by the kernel when the process ends, however it ends): a second lrt-train on the same --out is
  /// refused at once instead of replacing or interleaving the files of the one at work.
  void lock() {
    lock_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock_fd_ < 0) return;  // not readable: ensure_writable_directory says why
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) == 0) return;
    const int err = errno;
    ::close(lock_fd_), lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      throw UsageError(
          fmt::format("--out '{}' is in use: another lrt-train is writing to it (it holds the folder's "
                      "lock); wait for that run to end, or choose another --out",
                      dir_));
  }
  /// The refusal (no --force), or the removal of another run's files (--force).
  void refuse_or_replace(bool force) {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<std::string> ours, others;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      (is_run_entry(n) ? ours : others).push_back(n + (it->is_directory(ec) ? "/" : ""));
    }
    std::sort(ours.begin(), ours.end()), std::sort(others.begin(), others.end());
    if (ours.empty() && others.empty()) return;
    // A run that stopped before its first complete checkpoint (killed during the save, or stopped
    // twice) can only start again: its files are replaced without --force.
    const bool resumable = !ours.empty() && has_checkpoint(dir_);
    if (!force && (resumable || !others.empty())) {
      std::string what;
      if (!ours.empty())
        what = resumable ? "another run of lrt-train (" + describe_run() + ")"
                         : "the files of a run of lrt-train that saved no complete checkpoint";
      if (!others.empty())
        what += fmt::format("{}{} other entr{} ({})", what.empty() ? "" : ", and ", others.size(),
                            others.size() == 1 ? "y" : "ies", list(others));
      throw UsageError(
          fmt::format("--out '{}' holds {}: nothing was changed. {} an empty or new folder, or give "
                      "--force to replace {}",
                      dir_, what,
                      resumable ? fmt::format("Continue that run with --resume {} --out {}, choose", dir_, dir_)
                                : std::string("Choose"),
                      ours.empty() ? "it (lrt-train removes only its own files)" : "its files (other files stay)"));
    }
    if (ours.empty()) return;  // --force over files that are not lrt-train's: they stay
    if (resumable)
      fmt::print("warning: --force: replacing another run in '{}' ({}): removing {}{}\n", dir_, describe_run(),
                 list(ours), others.empty() ? "" : fmt::format("; leaving {}", list(others)));
    else
      fmt::print(
          "note: '{}' holds a run that stopped before its first complete checkpoint: starting afresh "
          "(removing {}{})\n",
          dir_, list(ours), others.empty() ? "" : fmt::format("; leaving {}", list(others)));
    for (std::string n : ours) {
      if (n.back() == '/') n.pop_back();
      std::error_code rc;
      fs::remove_all(dir_ + "/" + n, rc);
      if (rc) lrt::throw_error("--force", "'" + dir_ + "/" + n + "': cannot remove: " + rc.message());
    }
  }
  /// Whether `dir` holds a complete checkpoint that --resume continues from.
  static bool has_checkpoint(const std::string& dir) {
    try {
      (void)lrt::find_checkpoint(dir);
      return true;
    } catch (const lrt::Error&) {
      return false;
    }
  }
  /// "at step 244 (latest: checkpoints/step-000244), 3 checkpoints" or "no checkpoint".
  std::string describe_run() const {
    try {
      const lrt::CheckpointLocation at = lrt::find_checkpoint(dir_);
      const auto steps = lrt::detail::step_dirs(dir_ + "/checkpoints");
      return fmt::format("its checkpoint '{}' at step {}{}", at.dir, at.step,
                         steps.size() > 1 ? fmt::format(", {} checkpoints", steps.size()) : std::string());
    } catch (const lrt::Error&) {
      return "no complete checkpoint";
    }
  }
  static bool is_run_entry(const std::string& n) {
    for (const std::string_view f : run_entries)
      if (n == f || lrt::detail::is_stale_temporary(n, {f})) return true;
    return n.rfind(".lrt-write-probe.", 0) == 0;
  }
  static std::string list(const std::vector<std::string>& names) {
    std::string s;
    for (std::size_t i = 0; i < names.size() && i < 8; ++i) s += (i > 0 ? ", " : "") + names[i];
    if (names.size() > 8) s += fmt::format(", ... ({} in all)", names.size());
    return s;
  }
  void remove_created() noexcept {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!created_.empty()) {
      fs::remove_all(created_, ec);
      return;
    }
    for (const std::string& n : added_) fs::remove_all(dir_ + "/" + n, ec);
    lrt::detail::remove_stale_save_files(dir_, dir_ + "/checkpoints", {});
  }

  std::string dir_;
  bool writer_;
  bool kept_ = false;
  int lock_fd_ = -1;
  std::filesystem::path created_;   // the folder this run created (removed on failure)
  std::vector<std::string> added_;  // the run's files that were not there before it
};

}  // namespace tool
