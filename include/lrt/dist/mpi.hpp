// lrt/dist/mpi.hpp: dist::MpiGroup, the ranks of an `mpirun -np N` job over MPI_COMM_WORLD, in
// host memory (CPU ranks). Needs <mpi.h> (Debian: libopenmpi-dev) and linking MPI::MPI_CXX; the
// umbrella header does not include it.
//
// The collectives are non-blocking MPI calls (MPI_Ialltoallv, MPI_Iallgatherv) polled with MPI_Test
// and short sleeps, so that a rank waiting for a slower one gives its core away (2 ranks on 2
// vCPUs), and against a deadline (timeout_seconds, default 300, LRT_DIST_TIMEOUT overrides): when
// it passes, the rank prints which call timed out and aborts the job with MPI_Abort. A rank that
// is killed ends the job sooner: OpenMPI's launcher notices the death and stops the others.
// The reduction is the contract of dist::Group: each rank receives the N chunks meant for it
// (an all-to-all, an exact copy) and adds them itself in rank order.
#pragma once

// The C API only: MPI's deprecated C++ bindings (mpicxx.h) warn under -Wextra.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "group.hpp"

namespace lrt {
inline namespace v0 {
namespace dist {

/// true when this process was started by an MPI launcher (mpirun / mpiexec / srun set these).
inline bool launched_by_mpi() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

class MpiGroup final : public Group {
 public:
  /// Initialises MPI (if nobody has) for the life of this object; MPI_Finalize at destruction.
  MpiGroup() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      check(MPI_Init(nullptr, nullptr) == MPI_SUCCESS, "mpi", "MPI_Init failed");
      owns_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (const char* t = std::getenv("LRT_DIST_TIMEOUT"); t != nullptr && *t != '\0') {
      char* end = nullptr;
      const double v = std::strtod(t, &end);
      check(end != t && *end == '\0' && v > 0, "mpi", "LRT_DIST_TIMEOUT='", t, "': need a number of seconds > 0");
      timeout_ = v;
    }
  }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;
  ~MpiGroup() override {
    if (owns_) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  const char* name() const noexcept override { return "mpi"; }
  bool host_memory() const noexcept override { return true; }
  double timeout_seconds() const noexcept { return timeout_; }
  void set_timeout_seconds(double s) {
    check(s > 0, "mpi", "timeout must be > 0 seconds, got ", s);
    timeout_ = s;
  }

  void reduce_scatter(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) override {
    check_counts(counts, "reduce_scatter", what);
    const std::size_t n = static_cast<std::size_t>(size_);
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    index_t off = 0;
    for (std::size_t r = 0; r < n; ++r) {
      sc[r] = to_int(counts[r], what);
      sd[r] = to_int(off, what);
      off += counts[r];
      rc[r] = to_int(counts[static_cast<std::size_t>(rank_)], what);
      rd[r] = to_int(static_cast<index_t>(r) * counts[static_cast<std::size_t>(rank_)], what);
    }
    const index_t mine = counts[static_cast<std::size_t>(rank_)];
    if (static_cast<index_t>(chunks_.size()) < mine * size_) chunks_.resize(static_cast<std::size_t>(mine * size_));
    MPI_Request req;
    call(MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_FLOAT, chunks_.data(), rc.data(), rd.data(), MPI_FLOAT,
                        MPI_COMM_WORLD, &req),
         "MPI_Ialltoallv", what);
    wait(req, what);
    if (mine == 0) return;
    std::memcpy(recv, chunks_.data(), sizeof(float) * static_cast<std::size_t>(mine));
    for (int r = 1; r < size_; ++r) detail::add_host(recv, chunks_.data() + static_cast<std::size_t>(r) * mine, mine);
  }

  void all_gather(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) override {
    check_counts(counts, "all_gather", what);
    std::vector<int> rc(static_cast<std::size_t>(size_)), rd(static_cast<std::size_t>(size_));
    index_t off = 0;
    for (int r = 0; r < size_; ++r) {
      rc[static_cast<std::size_t>(r)] = to_int(counts[static_cast<std::size_t>(r)], what);
      rd[static_cast<std::size_t>(r)] = to_int(off, what);
      off += counts[static_cast<std::size_t>(r)];
    }
    MPI_Request req;
    call(MPI_Iallgatherv(send, rc[static_cast<std::size_t>(rank_)], MPI_FLOAT, recv, rc.data(), rd.data(), MPI_FLOAT,
                         MPI_COMM_WORLD, &req),
         "MPI_Iallgatherv", what);
    wait(req, what);
  }

  void add(float* dst, const float* src, index_t n) override { detail::add_host(dst, src, n); }

  std::vector<std::string> exchange(const std::string& mine, const char* what) override {
    const int len = to_int(static_cast<index_t>(mine.size()), what);
    std::vector<int> lens(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    MPI_Request req;
    call(MPI_Iallgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &req), "MPI_Iallgather", what);
    wait(req, what);
    index_t total = 0;
    for (int r = 0; r < size_; ++r) {
      displs[static_cast<std::size_t>(r)] = to_int(total, what);
      total += lens[static_cast<std::size_t>(r)];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    call(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD,
                         &req),
         "MPI_Iallgatherv", what);
    wait(req, what);
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r)
      out.push_back(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
    return out;
  }

  void abort(int code) noexcept override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }

 private:
  int to_int(index_t v, const char* what) const {
    check(v >= 0 && v <= INT_MAX, "mpi", what, ": ", v, " elements, more than one MPI call can count (", INT_MAX, ")");
    return static_cast<int>(v);
  }
  void call(int rc, const char* fn, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    ::lrt::throw_error("mpi", std::string(what) + ": " + fn + " failed on rank " + std::to_string(rank_) + ": " +
                                  std::string(msg, static_cast<std::size_t>(len)));
  }
  /// Polls `req` until it completes; past the deadline, says so and ends the job.
  void wait(MPI_Request& req, const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    int done = 0;
    for (int spins = 0;; ++spins) {
      call(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test", what);
      if (done) return;
      // A few quick polls (the other ranks are usually close), then sleeps that yield the core.
      if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(spins > 2000 ? 2000 : 50));
      if ((spins & 255) == 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_) {
        std::fprintf(stderr,
                     "lrt: rank %d of %d (pid %d): %s has waited %.0f s for the other ranks (LRT_DIST_TIMEOUT): a "
                     "rank died, hung or is far slower; ending the job\n",
                     rank_, size_, static_cast<int>(::getpid()), what, timeout_);
        abort(3);
      }
    }
  }

  int rank_ = 0, size_ = 1;
  bool owns_ = false;
  double timeout_ = 300;
  std::vector<float> chunks_;  // the N chunks received by reduce_scatter
};

}  // namespace dist
}  // namespace v0
}  // namespace lrt
