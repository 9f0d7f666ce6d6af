// lrt/autodiff/grad_check.hpp: gradients checked against central finite differences.
// Use double precision: with h ~ 1e-6 the truncation and rounding errors are both ~1e-10.
#pragma once

#include <algorithm>
#include <cmath>

#include "graph.hpp"

namespace lrt {
inline namespace v0 {
namespace ad {

/// Worst disagreement found by grad_check.
struct GradCheckResult {
  double max_abs_error = 0;  // max |analytic - numeric|
  double max_rel_error = 0;  // max |analytic - numeric| / max(|analytic| + |numeric|, floor)
  index_t worst_index = -1;  // flat index of the worst element
  index_t checked = 0;       // elements compared
};

/// Compares p's gradient from backward(loss_fn()) with central differences of loss_fn() in
/// each element of p (every `stride`-th element, to bound the cost). loss_fn builds its graph
/// from scratch and returns a scalar Var; it is called inside a fresh Graph each time.
template <class F, class T, int R, Device D>
GradCheckResult grad_check(F&& loss_fn, Param<T, R, D>& p, double h = 1e-6, index_t stride = 1, double floor = 1e-8) {
  static_assert(D::host_accessible, "grad_check runs on host tensors");
  p.zero_grad();
  {
    Graph g;
    backward(loss_fn());
  }
  const Tensor<T, R, D> analytic = p.grad();
  auto eval = [&] {
    NoGrad ng;
    Graph g;
    return static_cast<double>(*loss_fn().value().data());
  };
  GradCheckResult r;
  T* x = p.value().data();
  for (index_t i = 0; i < p.value().numel(); i += std::max<index_t>(stride, 1)) {
    const T x0 = x[i];
    x[i] = static_cast<T>(x0 + h);
    const double lp = eval();
    x[i] = static_cast<T>(x0 - h);
    const double lm = eval();
    x[i] = x0;
    const double num = (lp - lm) / (2 * h), ana = static_cast<double>(analytic.data()[i]);
    const double abs_err = std::abs(num - ana), rel = abs_err / std::max(std::abs(num) + std::abs(ana), floor);
    if (rel > r.max_rel_error) {
      r.max_rel_error = rel;
      r.worst_index = i;
    }
    r.max_abs_error = std::max(r.max_abs_error, abs_err);
    ++r.checked;
  }
  p.zero_grad();
  return r;
}

}  // namespace ad
}  // namespace v0
}  // namespace lrt
