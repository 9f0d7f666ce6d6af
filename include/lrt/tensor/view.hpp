// lrt/tensor/view.hpp: TensorView<T, R, D>, a non-owning strided window on memory of device D,
// and the view operations shared by views and owning tensors (slice, select, transpose,
// permute, reshape, unsqueeze). Views never copy; assigning to a view writes its elements
// (like Eigen::Map). The owner must outlive every view of it.
#pragma once

#include <algorithm>
#include <type_traits>

#include "expr_base.hpp"

namespace lrt {
inline namespace v0 {

template <class T, int R, Device D>
class TensorView;
template <class T, int R, Device D>
class Tensor;
template <Device D>
class IndexList;
template <class T, int R, Device D>
class IndexedView;

/// Evaluates expression e into dst (shapes must match after broadcasting e). Defined in assign.hpp.
template <class T, int R, Device D, Expression E>
void assign(const TensorView<T, R, D>& dst, const E& e, const char* op = "assign");

namespace detail {
/// The view operations, written once for any element constness U.
struct ViewFns {
  template <class U, int R, class D>
  static TensorView<U, R, D> slice(const TensorView<U, R, D>& s, int axis, index_t begin, index_t end, index_t step) {
    const int a = normalize_axis(axis, R, "slice");
    const index_t n = s.shape()[a];
    if (begin < 0) begin += n;
    if (end < 0) end += n;
    check(step >= 1, "slice", "step must be >= 1, got ", step);
    check(0 <= begin && begin <= end && end <= n, "slice", "range [", begin, ", ", end, ") out of bounds for axis ", a,
          " of shape ", to_string(s.shape()));
    Shape<R> sh = s.shape();
    Strides<R> st = s.strides();
    sh[a] = (end - begin + step - 1) / step;
    st[a] = s.strides()[a] * step;
    return TensorView<U, R, D>(s.data() + begin * s.strides()[a], sh, st);
  }
  template <class U, int R, class D>
  static TensorView<U, R - 1, D> select(const TensorView<U, R, D>& s, int axis, index_t i) {
    static_assert(R >= 1, "select needs rank >= 1");
    const int a = normalize_axis(axis, R, "select");
    if (i < 0) i += s.shape()[a];
    check(0 <= i && i < s.shape()[a], "select", "index ", i, " out of bounds for axis ", a, " of shape ", s.shape());
    Shape<R - 1> sh;
    Strides<R - 1> st;
    for (int k = 0, j = 0; k < R; ++k)
      if (k != a) {
        sh[j] = s.shape()[k];
        st[j++] = s.strides()[k];
      }
    return TensorView<U, R - 1, D>(s.data() + i * s.strides()[a], sh, st);
  }
  template <class U, int R, class D>
  static TensorView<U, R, D> permute(const TensorView<U, R, D>& s, const Shape<R>& perm) {
    bool seen[R > 0 ? R : 1] = {};
    Shape<R> sh;
    Strides<R> st;
    for (int k = 0; k < R; ++k) {
      const index_t p = perm[k];
      check(p >= 0 && p < R && !seen[p], "permute", "invalid permutation ", perm, " for rank ", R);
      seen[p] = true;
      sh[k] = s.shape()[p];
      st[k] = s.strides()[p];
    }
    return TensorView<U, R, D>(s.data(), sh, st);
  }
  template <class U, int R, class D>
  static TensorView<U, R, D> transpose(const TensorView<U, R, D>& s, int a, int b) {
    a = normalize_axis(a, R, "transpose");
    b = normalize_axis(b, R, "transpose");
    Shape<R> perm;
    for (int k = 0; k < R; ++k) perm[k] = k;
    std::swap(perm[a], perm[b]);
    return permute(s, perm);
  }
  template <int R2, class U, int R, class D>
  static TensorView<U, R2, D> reshape(const TensorView<U, R, D>& s, const Shape<R2>& shape) {
    check_extents(shape, "reshape");
    check(shape.numel() == s.numel(), "reshape", "cannot reshape ", s.shape(), " (", s.numel(), " elements) to ", shape,
          " (", shape.numel(), " elements)");
    check(s.is_contiguous(), "reshape", "view of shape ", s.shape(), " with strides ", s.strides(),
          " is not contiguous: call contiguous() first");
    return TensorView<U, R2, D>(s.data(), shape, row_major_strides(shape));
  }
  template <class U, int R, class D>
  static TensorView<U, R + 1, D> unsqueeze(const TensorView<U, R, D>& s, int axis) {
    const int a = axis < 0 ? axis + R + 1 : axis;
    check(a >= 0 && a <= R, "unsqueeze", "axis ", axis, " out of range for rank ", R);
    Shape<R + 1> sh;
    Strides<R + 1> st;
    for (int k = 0, j = 0; k <= R; ++k) {
      if (k == a) {
        sh[k] = 1;
        st[k] = (a < R) ? s.shape()[a] * s.strides()[a] : 1;
      } else {
        sh[k] = s.shape()[j];
        st[k] = s.strides()[j++];
      }
    }
    return TensorView<U, R + 1, D>(s.data(), sh, st);
  }
};
}  // namespace detail

/// View operations shared by TensorView and Tensor (Derived provides view() and view() const;
/// a const Tensor yields views of const elements).
template <class Derived, class T, int R, Device D>
class ViewOps {
  decltype(auto) self() { return static_cast<Derived&>(*this).view(); }
  decltype(auto) self() const { return static_cast<const Derived&>(*this).view(); }

 public:
#define LRT_VIEW_FN(name, params, ...)                                    \
  auto name params { return detail::ViewFns::name(self(), __VA_ARGS__); } \
  auto name params const { return detail::ViewFns::name(self(), __VA_ARGS__); }
  /// Elements [begin, end) with step along axis (negative begin/end count from the end).
  LRT_VIEW_FN(slice, (int axis, index_t begin, index_t end, index_t step = 1), axis, begin, end, step)
  /// The sub-tensor at index i of axis (rank R-1; negative i counts from the end).
  LRT_VIEW_FN(select, (int axis, index_t i), axis, i)
  /// Axes reordered: result axis k is input axis perm[k].
  LRT_VIEW_FN(permute, (const Shape<R>& perm), perm)
  /// Axes a and b swapped.
  LRT_VIEW_FN(transpose, (int a, int b), a, b)
  /// A new axis of extent 1 at position axis (0..R).
  LRT_VIEW_FN(unsqueeze, (int axis), axis)
#undef LRT_VIEW_FN
  /// Matrix transpose (rank 2 only).
  auto t() {
    static_assert(R == 2, "t() is the matrix transpose: use transpose(a, b) for rank != 2");
    return this->transpose(0, 1);
  }
  auto t() const {
    static_assert(R == 2, "t() is the matrix transpose: use transpose(a, b) for rank != 2");
    return this->transpose(0, 1);
  }
  /// Same elements with another shape; the view must be contiguous (else call contiguous()).
  template <int R2>
  auto reshape(const Shape<R2>& shape) {
    return detail::ViewFns::reshape<R2>(self(), shape);
  }
  template <int R2>
  auto reshape(const Shape<R2>& shape) const {
    return detail::ViewFns::reshape<R2>(self(), shape);
  }
  /// Rows of axis picked by an index list: readable in expressions and assignable (scatter).
  /// The list must outlive the returned view.
  auto gather(int axis, const IndexList<D>& idx) { return make_indexed(self(), axis, idx); }
  auto gather(int axis, const IndexList<D>& idx) const { return make_indexed(self(), axis, idx); }

 private:
  template <class U>
  static IndexedView<U, R, D> make_indexed(const TensorView<U, R, D>& v, int axis, const IndexList<D>& idx) {
    return IndexedView<U, R, D>(v, axis, idx);
  }
};

/// A non-owning view: pointer, runtime extents and strides (in elements, row-major by default).
template <class T, int R, Device D = cpu::Device>
class TensorView : public ExprBase<TensorView<T, R, D>>, public ViewOps<TensorView<T, R, D>, T, R, D> {
 public:
  using element_type = T;
  using value_type = std::remove_const_t<T>;
  using device_type = D;
  static constexpr int rank = R;

  TensorView() = default;
  TensorView(T* data, const Shape<R>& shape) : TensorView(data, shape, row_major_strides(shape)) {}
  TensorView(T* data, const Shape<R>& shape, const Strides<R>& strides)
      : data_(data), shape_(shape), strides_(strides) {
    detail::check_extents(shape, "view");
  }
  /// A mutable view converts to a read-only one.
  template <class U>
  requires(std::is_const_v<T>&& std::is_same_v<const U, T>) TensorView(const TensorView<U, R, D>& o)
      : TensorView(o.data(), o.shape(), o.strides()) {}

  TensorView(const TensorView&) = default;
  /// Writes o's elements into this view (shapes must match); does not rebind.
  TensorView& operator=(const TensorView& o) {
    assign(*this, o);
    return *this;
  }
  /// Evaluates an expression into this view's elements.
  template <Expression E>
  const TensorView& operator=(const E& e) const {
    assign(*this, e);
    return *this;
  }
  template <Expression E>
  TensorView& operator=(const E& e) {
    assign(*this, e);
    return *this;
  }
  /// Every element set to x.
  void fill(value_type x) const;

  T* data() const noexcept { return data_; }
  const Shape<R>& shape() const noexcept { return shape_; }
  const Strides<R>& strides() const noexcept { return strides_; }
  index_t size(int axis) const { return shape_[detail::normalize_axis(axis, R, "size")]; }
  index_t numel() const noexcept { return shape_.numel(); }
  bool empty() const noexcept { return numel() == 0; }
  /// True when the elements are densely packed in row-major order.
  bool is_contiguous() const noexcept {
    index_t expect = 1;
    for (int k = R - 1; k >= 0; --k) {
      if (shape_[k] != 1 && strides_[k] != expect) return false;
      expect *= shape_[k];
    }
    return true;
  }
  const TensorView& view() const noexcept { return *this; }

  /// Element access (host-accessible devices only); at() also checks bounds.
  template <class... I>
  T& operator()(I... i) const {
    static_assert(sizeof...(I) == R, "operator() needs exactly one index per axis");
    static_assert(D::host_accessible,
                  "element access on a device tensor: copy it to the host with "
                  "lrt::to<lrt::cpu::Device>(t) first");
    const index_t idx[R > 0 ? R : 1] = {static_cast<index_t>(i)...};
    index_t off = 0;
    for (int k = 0; k < R; ++k) off += idx[k] * strides_[k];
    return data_[off];
  }
  template <class... I>
  T& at(I... i) const {
    static_assert(sizeof...(I) == R, "at() needs exactly one index per axis");
    const index_t idx[R > 0 ? R : 1] = {static_cast<index_t>(i)...};
    for (int k = 0; k < R; ++k)
      check(idx[k] >= 0 && idx[k] < shape_[k], "at", "index ", idx[k], " out of bounds for axis ", k, " of shape ",
            shape_);
    return (*this)(i...);
  }

  // --- expression interface ---
  template <int Ro>
  bool linear_ok(const Shape<Ro>& out) const {
    if constexpr (Ro != R) {
      return false;
    } else {
      return shape_ == out && is_contiguous();
    }
  }
  template <int Ro>
  LeafEval<value_type, Ro> evaluator(const Shape<Ro>& out) const {
    return {data_, detail::broadcast_strides(shape_, strides_, out)};
  }
  DstEval<value_type, R> dst_evaluator() const requires(!std::is_const_v<T>) { return {data_, strides_}; }
  template <class F>
  void visit_leaves(F&& f) const {
    f(*this, false);
  }

 private:
  T* data_ = nullptr;
  Shape<R> shape_{};
  Strides<R> strides_{};
};

namespace detail {
/// Lowest and one-past-highest byte a view touches (equal pointers when empty).
template <class T, int R, class D>
std::pair<const char*, const char*> byte_range(const TensorView<T, R, D>& v) {
  if (v.numel() == 0) return {nullptr, nullptr};
  index_t lo = 0, hi = 0;
  for (int k = 0; k < R; ++k) {
    const index_t span = (v.shape()[k] - 1) * v.strides()[k];
    (span < 0 ? lo : hi) += span;
  }
  const char* base = reinterpret_cast<const char*>(v.data());
  return {base + lo * index_t(sizeof(T)), base + (hi + 1) * index_t(sizeof(T))};
}
}  // namespace detail

}  // namespace v0
}  // namespace lrt
