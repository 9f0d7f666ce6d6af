// lrt/dist/zero1.hpp: the exchanges of one data-parallel training step (ZeRO stage 1), for the
// ranks of a dist::Group.
//
// Every rank holds the whole model; each parameter has one owner, which alone updates it and holds
// its optimizer state. Owners are chosen once (plan: largest optimizer cost first, each to the
// least loaded rank, ties to the lower rank), and the gradients are laid out in one packed buffer,
// owner by owner, in roster order. A step is then:
//   add_gradients       after each micro-batch's backward: its gradients are copied (the first
//                       micro-batch) or added (the others) into the packed buffer, so that the sum
//                       is taken in micro-batch order and gives the same bits at any split;
//   agree               the exchange of losses: every rank learns every micro-batch's loss (in the
//                       global micro-batch order), which parameters have a gradient on some rank,
//                       and whether a stop was asked on any rank;
//   reduce_scatter_gradients   each owner receives the sum over ranks (dist::Group's rank order)
//                       of its parameters' gradients, in the parameters' gradient storage;
//   all_gather_values   after the owners' updates, every rank receives every parameter's value.
// With one process the same buffer sums the micro-batches (when there are more than one) and the
// exchanges are copies, so one process with N micro-batches and N ranks with one each give the
// same bits.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "group.hpp"

namespace lrt {
inline namespace v0 {
namespace dist {

/// One parameter as the sharded step sees it.
struct ShardedParam {
  std::string name;
  index_t numel = 0, rows = 1, cols = 1;
  bool matrix = false;                 // updated by Muon (its cost grows with min(rows, cols))
  std::function<float*()> grad_write;  // the gradient's storage, made ready
  std::function<const float*()> grad;  // nullptr when it has none
  std::function<float*()> value;
};

/// What the ranks agreed on in a step's exchange of losses.
struct StepAgreement {
  std::vector<float> losses;  // every micro-batch's loss, in the global micro-batch order
  int stop_signal = 0;        // the largest stop request of any rank (0: none)
};

/// The sharding of one model's parameters over a group, and the step's exchanges, in the memory
/// of device D. `local_add(dst, src, n)`: dst[i] += src[i] in D's memory, for one process without
/// a group (with a group, Group::add).
template <Device D>
class Zero1 {
 public:
  using Add = std::function<void(float*, const float*, index_t)>;

  /// Chooses owners and the packed layout for `params` (the model's roster) over `g` (nullptr:
  /// one process).
  void plan(std::vector<ShardedParam> params, Group* g, Add local_add) {
    p_ = std::move(params);
    g_ = g;
    local_add_ = std::move(local_add);
    const int N = size(), rank = this->rank();
    std::vector<double> cost(p_.size());
    for (std::size_t i = 0; i < p_.size(); ++i) {
      const ShardedParam& sp = p_[i];
      const double s = static_cast<double>(std::min(sp.rows, sp.cols)), n = static_cast<double>(sp.numel);
      // Muon: Polar Express, about 5 x (4 s n + 2 s^3) flops; AdamW: a few passes over n values.
      cost[i] = sp.matrix ? 5.0 * (4.0 * s * n + 2.0 * s * s * s) + 20.0 * n : 20.0 * n;
    }
    std::vector<std::size_t> order(p_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
    std::vector<double> load(static_cast<std::size_t>(N), 0.0);
    owner_.assign(p_.size(), 0);
    for (const std::size_t i : order) {
      std::size_t best = 0;
      for (std::size_t r = 1; r < load.size(); ++r)
        if (load[r] < load[best]) best = r;
      owner_[i] = static_cast<int>(best);
      load[best] += cost[i];
    }
    counts_.assign(static_cast<std::size_t>(N), 0);
    offset_.assign(p_.size(), 0);
    index_t off = 0;
    for (int o = 0; o < N; ++o)
      for (std::size_t i = 0; i < p_.size(); ++i)
        if (owner_[i] == o) {
          offset_[i] = off;
          off += p_[i].numel;
          counts_[static_cast<std::size_t>(o)] += p_[i].numel;
        }
    base_ = 0;
    for (int o = 0; o < rank; ++o) base_ += counts_[static_cast<std::size_t>(o)];
    owned_.assign(p_.size(), 0);
    for (std::size_t i = 0; i < p_.size(); ++i) owned_[i] = owner_[i] == rank ? 1 : 0;
    total_ = off;
    release();  // sized when first needed
  }

  int size() const noexcept { return g_ != nullptr ? g_->size() : 1; }
  int rank() const noexcept { return g_ != nullptr ? g_->rank() : 0; }
  /// The rank that owns each parameter, in roster order.
  const std::vector<int>& owners() const noexcept { return owner_; }
  /// One flag per parameter of the roster: whether this rank owns it.
  const std::vector<char>& owned() const noexcept { return owned_; }

  /// Starts a step of `micro_batches` micro-batches on this rank.
  void begin_step(index_t micro_batches) {
    packed_ = size() > 1 || micro_batches > 1;
    if (packed_) send_.ensure(total_);
    has_.assign(p_.size(), 0);
  }

  /// After a micro-batch's backward: adds its gradients into the packed buffer. Returns true when
  /// it did (the caller then zeroes the model's gradients for the next micro-batch); false when the
  /// step has one micro-batch and one rank, whose gradients stay where backward put them.
  bool add_gradients() {
    if (!packed_) return false;
    for (std::size_t i = 0; i < p_.size(); ++i) {
      const float* src = p_[i].grad();
      if (src == nullptr) continue;
      float* dst = send_.p + offset_[i];
      if (has_[i])
        add(dst, src, p_[i].numel);
      else
        copy(dst, src, p_[i].numel);
      has_[i] = 1;
    }
    return true;
  }

  /// The exchange of losses (collective): `local_losses` in this rank's micro-batch order and this
  /// rank's stop request. Adds the time it waited to `comm_seconds`.
  StepAgreement agree(const std::vector<float>& local_losses, int local_stop, double& comm_seconds) {
    StepAgreement a;
    any_ = has_;
    if (size() == 1) {
      a.losses = local_losses;
      a.stop_signal = local_stop;
      return a;
    }
    std::string mine(reinterpret_cast<const char*>(local_losses.data()), sizeof(float) * local_losses.size());
    mine.append(has_.begin(), has_.end());
    mine.push_back(static_cast<char>(std::clamp(local_stop, 0, 127)));
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::string> all = g_->exchange(mine, "the exchange of losses");
    comm_seconds += seconds_since(t0);
    for (const std::string& x : all) {
      check(x.size() == mine.size(), "train", "a rank sent ", x.size(), " bytes of losses, this one ", mine.size());
      for (std::size_t k = 0; k < local_losses.size(); ++k) {
        float v;
        std::memcpy(&v, x.data() + k * sizeof(float), sizeof(float));
        a.losses.push_back(v);
      }
      for (std::size_t i = 0; i < p_.size(); ++i)
        if (x[local_losses.size() * sizeof(float) + i] != 0) any_[i] = 1;  // some rank has one
      a.stop_signal = std::max(a.stop_signal, static_cast<int>(x.back()));
    }
    for (std::size_t i = 0; i < p_.size(); ++i)  // a parameter this rank has no gradient for
      if (any_[i] && !has_[i])
        DeviceTraits<D>::zero(send_.p + offset_[i], sizeof(float) * static_cast<std::size_t>(p_[i].numel));
    return a;
  }

  /// Each owner receives the summed gradients of its parameters in their gradient storage
  /// (collective; after agree()). `step` names the call in errors.
  void reduce_scatter_gradients(std::int64_t step, double& comm_seconds) {
    if (!packed_) return;
    const int N = size();
    const float* src = send_.p;
    index_t base = 0;
    if (N > 1) {
      recv_.ensure(counts_[static_cast<std::size_t>(rank())]);
      const auto t0 = std::chrono::steady_clock::now();
      const std::string what = "the reduce-scatter of the gradients of step " + std::to_string(step);
      g_->reduce_scatter(send_.p, counts_, recv_.p, what.c_str());
      comm_seconds += seconds_since(t0);
      src = recv_.p;
      base = base_;
    }
    for (std::size_t i = 0; i < p_.size(); ++i)
      if (owned_[i] && any_[i]) copy(p_[i].grad_write(), src + (offset_[i] - base), p_[i].numel);
  }

  /// After the owners' updates: every rank receives every parameter's value (collective).
  void all_gather_values(std::int64_t step, double& comm_seconds) {
    if (size() == 1) return;
    const auto t0 = std::chrono::steady_clock::now();
    gather_.ensure(total_);
    for (std::size_t i = 0; i < p_.size(); ++i)
      if (owned_[i]) copy(recv_.p + (offset_[i] - base_), p_[i].value(), p_[i].numel);
    const std::string what = "the all-gather of the parameters of step " + std::to_string(step);
    g_->all_gather(recv_.p, counts_, gather_.p, what.c_str());
    for (std::size_t i = 0; i < p_.size(); ++i)
      if (!owned_[i]) copy(p_[i].value(), gather_.p + offset_[i], p_[i].numel);
    comm_seconds += seconds_since(t0);
  }

 private:
  class Buffer {  // floats in D's memory
   public:
    Buffer() = default;
    Buffer(Buffer&& o) noexcept : p(std::exchange(o.p, nullptr)), n(std::exchange(o.n, 0)) {}
    Buffer& operator=(Buffer&& o) noexcept {
      if (this != &o) {
        reset();
        p = std::exchange(o.p, nullptr);
        n = std::exchange(o.n, 0);
      }
      return *this;
    }
    ~Buffer() { reset(); }
    void reset() noexcept {
      if (p != nullptr) DeviceTraits<D>::deallocate(p, sizeof(float) * static_cast<std::size_t>(n));
      p = nullptr;
      n = 0;
    }
    /// Room for at least `count` floats (the contents are not kept).
    void ensure(index_t count) {
      count = std::max<index_t>(count, 1);
      if (n >= count) return;
      reset();
      p = static_cast<float*>(DeviceTraits<D>::allocate(sizeof(float) * static_cast<std::size_t>(count)));
      n = count;
    }
    float* p = nullptr;
    index_t n = 0;
  };
  void release() noexcept {
    send_.reset();
    recv_.reset();
    gather_.reset();
  }
  static void copy(float* dst, const float* src, index_t n) {
    if (n > 0) DeviceTraits<D>::copy_within(dst, src, sizeof(float) * static_cast<std::size_t>(n));
  }
  void add(float* dst, const float* src, index_t n) {
    if (g_ != nullptr)
      g_->add(dst, src, n);
    else
      local_add_(dst, src, n);
  }
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  std::vector<ShardedParam> p_;
  Group* g_ = nullptr;
  Add local_add_;
  std::vector<int> owner_;
  std::vector<char> owned_, has_, any_;
  std::vector<index_t> offset_, counts_;
  index_t base_ = 0, total_ = 0;
  bool packed_ = false;
  Buffer send_, recv_, gather_;
};

}  // namespace dist
}  // namespace v0
}  // namespace lrt
