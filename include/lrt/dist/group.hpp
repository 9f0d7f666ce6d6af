// lrt/dist/group.hpp: what data-parallel training needs of its ranks, as one virtual interface
// (dist::Group) with a fixed reduction order, and the one-process group (dist::Solo).
//
// A Group is the N processes of one training run (ranks 0..N-1), each holding a full copy of the
// model. The Trainer (train/trainer.hpp, set_group) uses four operations:
//   reduce_scatter  every rank passes one buffer of N consecutive chunks, chunk o (counts[o]
//                   floats) meant for rank o; rank o receives the sum of the N chunks meant for it,
//                   added in rank order, ((c_0 + c_1) + c_2) + ..., each addition an fp32 addition
//                   rounded once. That order is part of the contract: it makes two runs at the same
//                   N identical bit for bit, and N ranks with one micro-batch each identical to one
//                   process that accumulates the same N micro-batches in order.
//   all_gather      rank r contributes counts[r] floats; every rank receives all of them, in rank
//                   order (a copy: exact).
//   add             dst[i] += src[i] (fp32, rounded once): the local accumulation of micro-batches,
//                   in the group's memory.
//   exchange        host bytes of any length from every rank to every rank, in rank order: the
//                   start-up check of configuration, data and code, losses, and optimizer state for
//                   checkpoints.
// The float buffers live in the memory of the group's device: host memory for the CPU groups
// (Solo, MpiGroup in dist/mpi.hpp), GPU memory for a NcclGroup (not written yet); host_memory() says
// which. Every operation is collective: all ranks call it in the same order with the same counts.
// `what` names the call in error messages ("reduce_scatter of the gradients at step 12").
//
// Failure: an implementation must not wait forever for a rank that died. MpiGroup polls its
// non-blocking collectives against a deadline and aborts the job with a message naming the call
// and the silent ranks; OpenMPI's launcher also ends the job when a rank is killed.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/config.hpp"

namespace lrt {
inline namespace v0 {
namespace dist {

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// "solo", "mpi", "nccl": for messages and logs.
  virtual const char* name() const noexcept = 0;
  /// true when the float buffers are host memory (the CPU groups), false for device memory.
  virtual bool host_memory() const noexcept = 0;

  virtual void reduce_scatter(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) = 0;
  virtual void all_gather(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) = 0;
  virtual void add(float* dst, const float* src, index_t n) = 0;
  virtual std::vector<std::string> exchange(const std::string& mine, const char* what) = 0;

  /// Ends every rank of the job after an error on this one (MPI_Abort); the one-process group
  /// returns, and the caller exits as it would have without a group.
  virtual void abort(int code) noexcept = 0;

  bool is_root() const noexcept { return rank() == 0; }

 protected:
  /// The argument checks every implementation shares.
  void check_counts(const std::vector<index_t>& counts, const char* op, const char* what) const {
    check(static_cast<int>(counts.size()) == size(), op, what, ": ", counts.size(), " counts for ", size(), " ranks");
    for (const index_t c : counts) check(c >= 0, op, what, ": a negative count ", c);
  }
};

namespace detail {
inline void add_host(float* dst, const float* src, index_t n) noexcept {
  for (index_t i = 0; i < n; ++i) dst[i] += src[i];
}
}  // namespace detail

/// One process (rank 0 of 1) in host memory: every collective is a copy.
class Solo final : public Group {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  const char* name() const noexcept override { return "solo"; }
  bool host_memory() const noexcept override { return true; }
  void reduce_scatter(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) override {
    check_counts(counts, "reduce_scatter", what);
    if (counts[0] > 0) std::memmove(recv, send, sizeof(float) * static_cast<std::size_t>(counts[0]));
  }
  void all_gather(const float* send, const std::vector<index_t>& counts, float* recv, const char* what) override {
    check_counts(counts, "all_gather", what);
    if (counts[0] > 0) std::memmove(recv, send, sizeof(float) * static_cast<std::size_t>(counts[0]));
  }
  void add(float* dst, const float* src, index_t n) override { detail::add_host(dst, src, n); }
  std::vector<std::string> exchange(const std::string& mine, const char*) override { return {mine}; }
  void abort(int) noexcept override {}
};

/// The start-up check of a group (collective): every rank passes the same named `fields` (its
/// code, configuration, options, data...), and any difference from rank 0 is an lrt::Error on every
/// rank (operation `op`) naming the first field that differs and both values.
inline void check_same_on_every_rank(Group& g, const std::vector<std::pair<std::string, std::string>>& fields,
                                     const char* op) {
  std::string mine;
  for (const auto& [k, v] : fields) mine += k + '\x1f' + v + '\x1e';
  const std::vector<std::string> all = g.exchange(mine, "the start-up check of the ranks");
  auto split = [](const std::string& x) {
    std::vector<std::pair<std::string, std::string>> out;
    std::size_t at = 0;
    while (at < x.size()) {
      const std::size_t us = x.find('\x1f', at), rs = x.find('\x1e', at);
      if (us == std::string::npos || rs == std::string::npos) break;
      out.emplace_back(x.substr(at, us - at), x.substr(us + 1, rs - us - 1));
      at = rs + 1;
    }
    return out;
  };
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const auto a = split(all[0]), b = split(all[r]);
    std::string diff = "they differ";
    for (std::size_t k = 0; k < std::min(a.size(), b.size()); ++k)
      if (a[k] != b[k]) {
        diff =
            a[k].first + ": rank 0 has '" + a[k].second + "', rank " + std::to_string(r) + " has '" + b[k].second + "'";
        break;
      }
    ::lrt::throw_error(op, "rank " + std::to_string(r) + " of " + std::to_string(all.size()) +
                               " does not run what rank 0 runs (" + diff +
                               "): every rank needs the same program, options and data");
  }
}

}  // namespace dist
}  // namespace v0
}  // namespace lrt
