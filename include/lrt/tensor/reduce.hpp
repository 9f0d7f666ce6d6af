// lrt/tensor/reduce.hpp: reductions over one axis or over all elements: sum, mean, max, min,
// argmax, argmin. Reductions force evaluation (an expression argument is evaluated once into a
// temporary). Float sums are pairwise (error O(eps log n)) and do not depend on the thread
// count. max/min propagate NaN; argmax/argmin return the first extremal index (a NaN counts
// as extremal). Backends provide Reducer<D>.
#pragma once

#include "assign.hpp"

namespace lrt {
inline namespace v0 {

/// The reductions a backend implements.
enum class ReduceOp { Sum, Max, Min, ArgMax, ArgMin };

/// Reduction kernels of a device. Specialised by each backend.
template <class D>
struct Reducer {
  static_assert(detail::always_false<D>,
                "no reduction kernels for this device: include its backend header "
                "(<lrt/cuda.hpp> for lrt::cuda::Device)");
};

namespace detail {
template <class E>
struct is_view_like : std::false_type {};
template <class T, int R, class D>
struct is_view_like<TensorView<T, R, D>> : std::true_type {};
template <class T, int R, class D>
struct is_view_like<Tensor<T, R, D>> : std::true_type {};

template <class E>
using eval_device_t =
    std::conditional_t<std::is_same_v<typename E::device_type, AnyDevice>, cpu::Device, typename E::device_type>;

/// Calls f(view) with a view of e's values, evaluating e into a temporary if needed.
template <class E, class F>
decltype(auto) with_values(const E& e, F&& f) {
  if constexpr (is_view_like<E>::value) {
    return f(TensorView<const typename E::value_type, E::rank, typename E::device_type>(e.view()));
  } else {
    const Tensor<typename E::value_type, E::rank, eval_device_t<E>> tmp(e);
    return f(tmp.view());
  }
}

template <ReduceOp Op, class T>
using reduce_result_t = std::conditional_t<Op == ReduceOp::ArgMax || Op == ReduceOp::ArgMin, index_t, T>;

inline const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::ArgMax:
      return "argmax";
    case ReduceOp::ArgMin:
      return "argmin";
  }
  return "reduce";
}

template <ReduceOp Op, class T, int R, class D>
Tensor<reduce_result_t<Op, T>, R - 1, D> reduce_axis(const TensorView<const T, R, D>& v, int axis) {
  static_assert(R >= 1, "reducing over an axis needs rank >= 1");
  const int a = normalize_axis(axis, R, reduce_name(Op));
  check(Op == ReduceOp::Sum || v.shape()[a] > 0, reduce_name(Op), "reduction over the empty axis ", a, " of shape ",
        v.shape());
  Shape<R - 1> out_shape;
  for (int k = 0, j = 0; k < R; ++k)
    if (k != a) out_shape[j++] = v.shape()[k];
  Tensor<reduce_result_t<Op, T>, R - 1, D> out(out_shape, uninitialized);
  if (out.numel() > 0) Reducer<D>::template reduce_axis<Op>(v, a, out.view());
  return out;
}

template <ReduceOp Op, class T, int R, class D>
reduce_result_t<Op, T> reduce_all(const TensorView<const T, R, D>& v) {
  check(Op == ReduceOp::Sum || v.numel() > 0, reduce_name(Op), "reduction over an empty tensor of shape ", v.shape());
  if (!v.is_contiguous()) {
    const Tensor<T, R, D> c(v);
    return reduce_all<Op>(c.view());
  }
  const TensorView<const T, 1, D> flat(v.data(), Shape<1>{v.numel()});
  const auto r = reduce_axis<Op>(flat, 0);
  if constexpr (D::host_accessible) {
    return *r.data();
  } else {
    return *to<cpu::Device>(r).data();
  }
}
}  // namespace detail

/// Sum of all elements (0 for an empty tensor).
template <Expression E>
typename E::value_type sum(const E& e) {
  return detail::with_values(e, [](auto v) { return detail::reduce_all<ReduceOp::Sum>(v); });
}
/// Sum of all elements as a rank-0 tensor on e's device: no host round trip, so on a GPU it
/// queues work without waiting for it (0 for an empty tensor).
template <Expression E>
auto sum_tensor(const E& e) {
  return detail::with_values(e, [](auto v) {
    using V = decltype(v);
    using T = std::remove_const_t<typename V::value_type>;
    using D = typename V::device_type;
    if (v.numel() == 0) return Tensor<T, 0, D>(Shape<0>{});
    if (v.is_contiguous()) return detail::reduce_axis<ReduceOp::Sum>(v.template reshape<1>(Shape<1>{v.numel()}), 0);
    const Tensor<T, V::rank, D> c(v);
    return detail::reduce_axis<ReduceOp::Sum>(
        TensorView<const T, 1, D>(c.view().template reshape<1>(Shape<1>{c.numel()})), 0);
  });
}
/// Sum over axis (the axis is removed from the shape).
template <Expression E>
auto sum(const E& e, int axis) {
  return detail::with_values(e, [&](auto v) { return detail::reduce_axis<ReduceOp::Sum>(v, axis); });
}
/// Mean of all elements (NaN for an empty tensor).
template <Expression E>
typename E::value_type mean(const E& e) {
  using T = typename E::value_type;
  static_assert(std::is_floating_point_v<T>, "mean() needs a floating-point tensor");
  const index_t n = e.shape().numel();
  return sum(e) / static_cast<T>(n);
}
/// Mean over axis.
template <Expression E>
auto mean(const E& e, int axis) {
  using T = typename E::value_type;
  static_assert(std::is_floating_point_v<T>, "mean() needs a floating-point tensor");
  auto s = sum(e, axis);
  const index_t n = e.shape()[detail::normalize_axis(axis, E::rank, "mean")];
  s *= T(1) / static_cast<T>(n);
  return s;
}

#define LRT_DEFINE_REDUCTION(fn, OP)                                                         \
  template <Expression E>                                                                    \
  auto fn(const E& e) {                                                                      \
    return detail::with_values(e, [](auto v) { return detail::reduce_all<OP>(v); });         \
  }                                                                                          \
  template <Expression E>                                                                    \
  auto fn(const E& e, int axis) {                                                            \
    return detail::with_values(e, [&](auto v) { return detail::reduce_axis<OP>(v, axis); }); \
  }
/// Largest element (over all, or over axis); NaN if any element is NaN; throws when empty.
LRT_DEFINE_REDUCTION(max, ReduceOp::Max)
/// Smallest element (over all, or over axis); NaN if any element is NaN; throws when empty.
LRT_DEFINE_REDUCTION(min, ReduceOp::Min)
/// Index of the first largest element (flat row-major index when over all).
LRT_DEFINE_REDUCTION(argmax, ReduceOp::ArgMax)
/// Index of the first smallest element (flat row-major index when over all).
LRT_DEFINE_REDUCTION(argmin, ReduceOp::ArgMin)
#undef LRT_DEFINE_REDUCTION

}  // namespace v0
}  // namespace lrt
