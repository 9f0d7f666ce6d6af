// lrt/tensor/gather.hpp: index lists and the gather/scatter view along one axis.
// t.gather(axis, idx) reads rows idx[0], idx[1], ... of axis as one expression leaf (no copy);
// assigning to it writes those rows (scatter). The interleaved schedule's position subsets
// (p mod S == i) are IndexList::range(i, T, S).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <span>
#include <vector>

#include "tensor.hpp"

namespace lrt {
inline namespace v0 {

/// A validated list of non-negative indices stored on device D (made once, reused).
template <Device D>
class IndexList {
 public:
  IndexList() = default;
  IndexList(std::span<const index_t> host) { init(host); }
  IndexList(const std::vector<index_t>& host) { init(host); }
  IndexList(std::initializer_list<index_t> il) { init(std::span<const index_t>(il.begin(), il.size())); }
  /// begin, begin+step, ... < end.
  static IndexList range(index_t begin, index_t end, index_t step = 1) {
    check(step >= 1 && begin >= 0, "index_list", "range needs begin >= 0 and step >= 1, got begin ", begin, ", step ",
          step);
    std::vector<index_t> v;
    v.reserve(static_cast<std::size_t>(end > begin ? (end - begin + step - 1) / step : 0));
    for (index_t i = begin; i < end; i += step) v.push_back(i);
    return IndexList(v);
  }

  index_t size() const noexcept { return idx_.numel(); }
  const index_t* data() const noexcept { return idx_.data(); }
  index_t max() const noexcept { return max_; }
  /// True when no index repeats (required for scatter).
  bool unique() const noexcept { return unique_; }
  /// True when every index is larger than the one before (query positions must be).
  bool increasing() const noexcept { return increasing_; }
  const Tensor<index_t, 1, D>& tensor() const noexcept { return idx_; }
  /// The indices in their order, on the host (read without touching the device).
  const std::vector<index_t>& host() const noexcept { return host_; }
  /// Replaces the indices by as many new ones, in place: the device buffer keeps its address
  /// (so that work recorded with it, e.g. a CUDA graph, reads the new indices).
  void assign(std::span<const index_t> host) {
    check(static_cast<index_t>(host.size()) == idx_.numel(), "index_list", "assign needs ", idx_.numel(),
          " indices, got ", host.size());
    set_host(host);
    if (!host.empty()) DeviceTraits<D>::copy_from_host(idx_.data(), host.data(), host.size() * sizeof(index_t));
  }

 private:
  void init(std::span<const index_t> host) {
    set_host(host);
    TensorView<const index_t, 1, cpu::Device> hv(host.data(), Shape<1>{index_t(host.size())});
    idx_ = to<D>(hv);
  }
  /// Checks the indices and sets the host copy and the flags.
  void set_host(std::span<const index_t> host) {
    std::vector<index_t> sorted(host.begin(), host.end());
    for (index_t i : sorted) check(i >= 0, "index_list", "negative index ", i);
    std::sort(sorted.begin(), sorted.end());
    host_.assign(host.begin(), host.end());
    increasing_ =
        std::adjacent_find(host_.begin(), host_.end(), [](index_t a, index_t b) { return b <= a; }) == host_.end();
    unique_ = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    max_ = sorted.empty() ? -1 : sorted.back();
  }
  Tensor<index_t, 1, D> idx_;
  std::vector<index_t> host_;
  index_t max_ = -1;
  bool unique_ = true, increasing_ = true;
};

template <class T, int Ro>
struct IndexedEval {
  T* p;
  Strides<Ro> bs;      // broadcast strides; the gathered axis uses `ax_stride` through idx
  const index_t* idx;  // the index list (device memory of the executing device)
  int ax;              // gathered axis in output coordinates (-1: broadcast away)
  index_t ax_stride;
  bool ax_bcast;  // the gathered axis has extent 1 and is broadcast
  Shape<Ro> out;
  LRT_HD index_t offset(const Index<Ro>& i) const {
    index_t off = 0;
    for (int k = 0; k < Ro; ++k) off += (k == ax) ? idx[ax_bcast ? 0 : i[k]] * ax_stride : i[k] * bs[k];
    return off;
  }
  LRT_HD T& at(const Index<Ro>& i) const { return p[offset(i)]; }
  LRT_HD T& lin(index_t l) const { return p[offset(unravel(l, out))]; }
};

/// Rows of one axis of a view selected by an IndexList: an expression leaf and a destination.
template <class T, int R, Device D>
class IndexedView : public ExprBase<IndexedView<T, R, D>> {
 public:
  using element_type = T;
  using value_type = std::remove_const_t<T>;
  using device_type = D;
  static constexpr int rank = R;

  IndexedView(const TensorView<T, R, D>& base, int axis, const IndexList<D>& idx)
      : base_(base), axis_(detail::normalize_axis(axis, R, "gather")), idx_(&idx) {
    check(idx.max() < base.shape()[axis_], "gather", "index ", idx.max(), " out of bounds for axis ", axis_,
          " of shape ", base.shape());
    shape_ = base.shape();
    shape_[axis_] = idx.size();
  }
  IndexedView(const IndexedView&) = default;
  /// Scatter: writes e into the selected rows (the index list must not repeat an index).
  template <Expression E>
  const IndexedView& operator=(const E& e) const;
  const IndexedView& operator=(const IndexedView& o) const { return this->operator=<IndexedView>(o); }

  const Shape<R>& shape() const noexcept { return shape_; }
  const TensorView<T, R, D>& base() const noexcept { return base_; }
  const IndexList<D>& indices() const noexcept { return *idx_; }
  int axis() const noexcept { return axis_; }

  // --- expression interface ---
  template <int Ro>
  bool linear_ok(const Shape<Ro>&) const {
    return false;
  }
  template <int Ro>
  IndexedEval<const value_type, Ro> evaluator(const Shape<Ro>& out) const {
    return make_eval<const value_type>(out);
  }
  IndexedEval<value_type, R> dst_evaluator() const requires(!std::is_const_v<T>) {
    return make_eval<value_type>(shape_);
  }
  template <class F>
  void visit_leaves(F&& f) const {
    f(base_, true);
  }

 private:
  template <class U, int Ro>
  IndexedEval<U, Ro> make_eval(const Shape<Ro>& out) const {
    IndexedEval<U, Ro> ev;
    ev.p = const_cast<U*>(base_.data());
    ev.bs = detail::broadcast_strides(shape_, base_.strides(), out);
    ev.idx = idx_->data();
    ev.ax = axis_ + (Ro - R);
    ev.ax_stride = base_.strides()[axis_];
    ev.ax_bcast = shape_[axis_] == 1 && out[ev.ax] != 1;
    ev.out = out;
    return ev;
  }
  TensorView<T, R, D> base_;
  int axis_;
  const IndexList<D>* idx_;
  Shape<R> shape_;
};

}  // namespace v0
}  // namespace lrt
