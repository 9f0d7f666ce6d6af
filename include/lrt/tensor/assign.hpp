// lrt/tensor/assign.hpp: evaluation of an expression into a destination (view, tensor, scatter).
// Checks element type, rank and device at compile time and shapes at run time, detects
// aliasing, then hands one evaluator to Executor<D>: a single pass, no temporaries. Aliasing
// rule: a destination may appear in its own expression when read with the very same layout
// (`a = a * b + a` is elementwise-safe); any other overlap (a transposed or shifted view of
// the destination, a gather from it) is evaluated through one temporary first.
#pragma once

#include "expr.hpp"
#include "gather.hpp"

namespace lrt {
inline namespace v0 {

namespace detail {

template <int R, int Re>
bool broadcasts_to(const Shape<Re>& e, const Shape<R>& dst) {
  for (int k = 0; k < Re; ++k) {
    const index_t x = e[k], y = dst[k + (R - Re)];
    if (x != y && x != 1) return false;
  }
  return true;
}

template <class Dst, class E>
constexpr void check_assign_types() {
  using T = typename Dst::value_type;
  static_assert(!std::is_const_v<typename Dst::element_type>, "cannot assign to a view of const elements");
  static_assert(Dst::rank >= E::rank, "rank mismatch: the expression has a higher rank than the destination");
  static_assert(std::is_same_v<typename E::value_type, T>,
                "assigning an expression of another element type: convert it with "
                "lrt::cast<T>(expr)");
  static_assert(common_device<typename Dst::device_type, typename E::device_type>::ok,
                "mixing devices: the expression lives on another device than its destination; "
                "copy it with lrt::to<Device>(t) first");
}

/// True when evaluating e element by element into dst could read an element already written.
template <class DT, int R, class D, class E>
bool unsafe_alias(const TensorView<DT, R, D>& dst, bool dst_indexed, const E& e) {
  const auto drange = byte_range(dst);
  const char *dlo = drange.first, *dhi = drange.second;  // plain variables: lambdas may capture them
  if (dlo == dhi) return false;
  bool unsafe = false;
  e.visit_leaves([&](const auto& leaf, bool indexed) {
    const auto range = byte_range(leaf);
    const char *lo = range.first, *hi = range.second;
    if (lo == hi || !(lo < dhi && dlo < hi)) return;
    using L = std::remove_cvref_t<decltype(leaf)>;
    bool same = false;
    if constexpr (L::rank == R && sizeof(typename L::value_type) == sizeof(DT)) {
      same = !indexed && !dst_indexed &&
             static_cast<const void*>(leaf.data()) == static_cast<const void*>(dst.data()) &&
             leaf.shape() == dst.shape() && leaf.strides() == dst.strides();
    }
    if (!same) unsafe = true;
  });
  return unsafe;
}

}  // namespace detail

template <class T, int R, Device D, Expression E>
void assign(const TensorView<T, R, D>& dst, const E& e, const char* op) {
  detail::check_assign_types<TensorView<T, R, D>, E>();
  check(detail::broadcasts_to(e.shape(), dst.shape()), op, "shape mismatch: destination ", dst.shape(),
        " vs expression ", e.shape());
  if (dst.numel() == 0) return;
  if (detail::unsafe_alias(dst, false, e)) {
    Tensor<T, R, D> tmp(dst.shape(), uninitialized);
    assign(tmp.view(), e, op);
    assign(dst, tmp.view(), op);
    return;
  }
  const bool linear = dst.is_contiguous() && e.linear_ok(dst.shape());
  Executor<D>::run(dst.shape(), dst.dst_evaluator(), e.evaluator(dst.shape()), linear);
}

template <class T, int R, Device D>
template <Expression E>
const IndexedView<T, R, D>& IndexedView<T, R, D>::operator=(const E& e) const {
  detail::check_assign_types<IndexedView, E>();
  check(idx_->unique(), "scatter", "index list repeats an index: scatter would be ambiguous");
  check(detail::broadcasts_to(e.shape(), shape_), "scatter", "shape mismatch: destination ", shape_, " vs expression ",
        e.shape());
  if (shape_.numel() == 0) return *this;
  if (detail::unsafe_alias(base_, true, e)) {
    Tensor<value_type, R, D> tmp(shape_, uninitialized);
    assign(tmp.view(), e, "scatter");
    return *this = tmp.view();
  }
  Executor<D>::run(shape_, dst_evaluator(), e.evaluator(shape_), false);
  return *this;
}

template <class T, int R, Device D>
void TensorView<T, R, D>::fill(value_type x) const {
  assign(*this, ScalarExpr<value_type>(x), "fill");
}

#define LRT_COMPOUND(opeq, opfn)                                                                                   \
  template <class T, int R, Device D>                                                                              \
  template <class E>                                                                                               \
  Tensor<T, R, D>& Tensor<T, R, D>::opeq(const E& e) {                                                             \
    auto v = view();                                                                                               \
    assign(v, opfn(v, e));                                                                                         \
    return *this;                                                                                                  \
  }                                                                                                                \
  template <class T, int R, Device D, class E>                                                                     \
  requires(Expression<E> || Scalar<E>) const TensorView<T, R, D>& opeq(const TensorView<T, R, D>& v, const E& e) { \
    assign(v, opfn(v, e));                                                                                         \
    return v;                                                                                                      \
  }
#define LRT_OPFN_ADD(a, b) (a + b)
#define LRT_OPFN_SUB(a, b) (a - b)
#define LRT_OPFN_MUL(a, b) (a * b)
#define LRT_OPFN_DIV(a, b) (a / b)
LRT_COMPOUND(operator+=, LRT_OPFN_ADD)
LRT_COMPOUND(operator-=, LRT_OPFN_SUB)
LRT_COMPOUND(operator*=, LRT_OPFN_MUL)
LRT_COMPOUND(operator/=, LRT_OPFN_DIV)
#undef LRT_COMPOUND
#undef LRT_OPFN_ADD
#undef LRT_OPFN_SUB
#undef LRT_OPFN_MUL
#undef LRT_OPFN_DIV

}  // namespace v0
}  // namespace lrt
