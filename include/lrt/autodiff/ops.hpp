// lrt/autodiff/ops.hpp: differentiable tensor operations. Each op computes its forward with the
// tensor layer and records its backward rule right next to it (the vjp: how grad_out becomes
// gradients of the inputs). Elementwise ops broadcast like the tensor layer; their gradients
// are summed back to each input's shape.
// Shapes in comments: B batch, T time, C channels, N rows (B*T), M/K/N matrix dims.
// Not here: the transformer's fused ops (nn.hpp).
#pragma once

#include "../tensor/gather.hpp"
#include "../tensor/linalg.hpp"
#include "../tensor/random.hpp"
#include "../tensor/reduce.hpp"
#include "graph.hpp"

namespace lrt {
inline namespace v0 {
namespace ad {

namespace detail {
/// Sums g over the axes on which shape s was broadcast (leading axes and size-1 axes).
template <class T, int R, int Ro, class D>
Tensor<T, R, D> sum_to(const TensorView<const T, Ro, D>& g, const Shape<R>& s) {
  static_assert(Ro >= R);
  if constexpr (Ro > R) {
    const Tensor<T, Ro - 1, D> r = lrt::sum(g, 0);
    return sum_to<T, R, Ro - 1, D>(r.view(), s);
  } else if constexpr (R == 0) {  // scalars: nothing was broadcast
    return Tensor<T, R, D>(g);
  } else {
    Tensor<T, R, D> cur(g);
    for (int d = 0; d < R; ++d) {
      if (s[d] == 1 && cur.shape()[d] != 1) {
        Shape<R> keep = cur.shape();
        keep[d] = 1;
        Tensor<T, R, D> next(keep, uninitialized);
        const Tensor<T, R - 1, D> r = lrt::sum(cur, d);
        next.view() = r.view().template reshape<R>(keep);
        cur = std::move(next);
      }
    }
    return cur;
  }
}

/// accumulate() after summing g to v's shape where v was broadcast.
template <class T, int R, int Ro, class D>
void accumulate_broadcast(const Var<T, R, D>& v, const TensorView<const T, Ro, D>& g) {
  if (!v.requires_grad()) return;
  if constexpr (R == Ro) {
    if (g.shape() == v.shape()) {
      accumulate(v, g);
      return;
    }
  }
  accumulate(v, sum_to<T, R, Ro, D>(g, v.shape()));
}

template <int Ra, int Rb>
inline constexpr int max_rank = Ra > Rb ? Ra : Rb;
}  // namespace detail

// ---------------------------------------------------------------- elementwise, two inputs

/// a + b (broadcast).
template <class T, int Ra, int Rb, Device D>
auto add(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  constexpr int Ro = detail::max_rank<Ra, Rb>;
  return record<T, Ro, D>(
      "add", Tensor<T, Ro, D>(a.value() + b.value()),
      [a, b](const Tensor<T, Ro, D>& gy, const Tensor<T, Ro, D>&) {
        detail::accumulate_broadcast(a, gy.view());
        detail::accumulate_broadcast(b, gy.view());
      },
      a, b);
}

/// a - b (broadcast).
template <class T, int Ra, int Rb, Device D>
auto sub(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  constexpr int Ro = detail::max_rank<Ra, Rb>;
  return record<T, Ro, D>(
      "sub", Tensor<T, Ro, D>(a.value() - b.value()),
      [a, b](const Tensor<T, Ro, D>& gy, const Tensor<T, Ro, D>&) {
        detail::accumulate_broadcast(a, gy.view());
        if (b.requires_grad()) {
          const Tensor<T, Ro, D> n = -gy;
          detail::accumulate_broadcast(b, n.view());
        }
      },
      a, b);
}

/// a * b (broadcast).
template <class T, int Ra, int Rb, Device D>
auto mul(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  constexpr int Ro = detail::max_rank<Ra, Rb>;
  return record<T, Ro, D>(
      "mul", Tensor<T, Ro, D>(a.value() * b.value()),
      [a, b](const Tensor<T, Ro, D>& gy, const Tensor<T, Ro, D>&) {
        if (a.requires_grad()) {
          const Tensor<T, Ro, D> ga = gy * b.value();
          detail::accumulate_broadcast(a, ga.view());
        }
        if (b.requires_grad()) {
          const Tensor<T, Ro, D> gb = gy * a.value();
          detail::accumulate_broadcast(b, gb.view());
        }
      },
      a, b);
}

/// a / b (broadcast).
template <class T, int Ra, int Rb, Device D>
auto div(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  constexpr int Ro = detail::max_rank<Ra, Rb>;
  return record<T, Ro, D>(
      "div", Tensor<T, Ro, D>(a.value() / b.value()),
      [a, b](const Tensor<T, Ro, D>& gy, const Tensor<T, Ro, D>& y) {
        if (a.requires_grad()) {
          const Tensor<T, Ro, D> ga = gy / b.value();
          detail::accumulate_broadcast(a, ga.view());
        }
        if (b.requires_grad()) {
          const Tensor<T, Ro, D> gb = -(gy * y) / b.value();
          detail::accumulate_broadcast(b, gb.view());
        }
      },
      a, b);
}

template <class T, int Ra, int Rb, Device D>
auto operator+(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  return add(a, b);
}
template <class T, int Ra, int Rb, Device D>
auto operator-(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  return sub(a, b);
}
template <class T, int Ra, int Rb, Device D>
auto operator*(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  return mul(a, b);
}
template <class T, int Ra, int Rb, Device D>
auto operator/(const Var<T, Ra, D>& a, const Var<T, Rb, D>& b) {
  return div(a, b);
}

// ---------------------------------------------------------------- with a scalar

/// x * s.
template <class T, int R, Device D>
Var<T, R, D> scale(const Var<T, R, D>& x, T s) {
  return record<T, R, D>(
      "scale", Tensor<T, R, D>(x.value() * s),
      [x, s](const Tensor<T, R, D>& gy, const Tensor<T, R, D>&) { accumulate(x, gy * s); }, x);
}
/// x + s.
template <class T, int R, Device D>
Var<T, R, D> add_scalar(const Var<T, R, D>& x, T s) {
  return record<T, R, D>(
      "add_scalar", Tensor<T, R, D>(x.value() + s),
      [x](const Tensor<T, R, D>& gy, const Tensor<T, R, D>&) { accumulate(x, gy); }, x);
}
template <class T, int R, Device D, Scalar S>
Var<T, R, D> operator*(const Var<T, R, D>& x, S s) {
  return scale(x, static_cast<T>(s));
}
template <class T, int R, Device D, Scalar S>
Var<T, R, D> operator*(S s, const Var<T, R, D>& x) {
  return scale(x, static_cast<T>(s));
}
template <class T, int R, Device D, Scalar S>
Var<T, R, D> operator/(const Var<T, R, D>& x, S s) {
  return scale(x, T(1) / static_cast<T>(s));
}
template <class T, int R, Device D, Scalar S>
Var<T, R, D> operator+(const Var<T, R, D>& x, S s) {
  return add_scalar(x, static_cast<T>(s));
}
template <class T, int R, Device D, Scalar S>
Var<T, R, D> operator+(S s, const Var<T, R, D>& x) {
  return add_scalar(x, static_cast<T>(s));
}
template <class T, int R, Device D, Scalar S>
Var<T, R, D> operator-(const Var<T, R, D>& x, S s) {
  return add_scalar(x, -static_cast<T>(s));
}
template <class T, int R, Device D, Scalar S>
Var<T, R, D> operator-(S s, const Var<T, R, D>& x) {
  return add_scalar(scale(x, T(-1)), static_cast<T>(s));
}
template <class T, int R, Device D>
Var<T, R, D> operator-(const Var<T, R, D>& x) {
  return scale(x, T(-1));
}

// ---------------------------------------------------------------- elementwise, one input

#define LRT_AD_UNARY(fn, name, forward, grad_expr)                 \
  template <class T, int R, Device D>                              \
  Var<T, R, D> fn(const Var<T, R, D>& x) {                         \
    const auto& xv = x.value();                                    \
    return record<T, R, D>(                                        \
        name, Tensor<T, R, D>(forward),                            \
        [x](const Tensor<T, R, D>& gy, const Tensor<T, R, D>& y) { \
          const auto& xv = x.value();                              \
          (void)xv;                                                \
          (void)y;                                                 \
          accumulate(x, grad_expr);                                \
        },                                                         \
        x);                                                        \
  }
/// exp(x)
LRT_AD_UNARY(exp, "exp", lrt::exp(xv), gy* y)
/// log(x)
LRT_AD_UNARY(log, "log", lrt::log(xv), gy / xv)
/// tanh(x)
LRT_AD_UNARY(tanh, "tanh", lrt::tanh(xv), gy*(T(1) - lrt::square(y)))
/// sigmoid(x)
LRT_AD_UNARY(sigmoid, "sigmoid", lrt::sigmoid(xv), gy* y*(T(1) - y))
/// 2 * sigmoid(x): the LRT gates (exactly 1 at x = 0).
LRT_AD_UNARY(gate2, "gate2", lrt::sigmoid(xv) * T(2), gy* y*(T(1) - y * T(0.5)))
/// x^2
LRT_AD_UNARY(square, "square", lrt::square(xv), gy* xv* T(2))
/// relu(x)
LRT_AD_UNARY(relu, "relu", lrt::relu(xv), lrt::where(xv > T(0), gy, T(0)))
/// relu(x)^2: the MLP activation.
LRT_AD_UNARY(relu2, "relu2", lrt::square(lrt::relu(xv)), gy* lrt::relu(xv) * T(2))
#undef LRT_AD_UNARY

/// cap * tanh(x / cap): the logit softcap.
template <class T, int R, Device D>
Var<T, R, D> softcap(const Var<T, R, D>& x, T cap) {
  return record<T, R, D>(
      "softcap", Tensor<T, R, D>(lrt::tanh(x.value() / cap) * cap),
      [x, cap](const Tensor<T, R, D>& gy, const Tensor<T, R, D>& y) {
        accumulate(x, gy * (T(1) - lrt::square(y / cap)));
      },
      x);
}

// ---------------------------------------------------------------- reductions

namespace detail {
/// sum(x) * scale as a rank-0 tensor: summed on the host for the CPU, on the device otherwise
/// (no wait for the GPU).
template <class T, int R, class D>
Tensor<T, 0, D> scaled_total(const Tensor<T, R, D>& x, T scale) {
  if constexpr (D::host_accessible) {
    return Tensor<T, 0, D>::full(Shape<0>{}, lrt::sum(x) * scale);
  } else {
    Tensor<T, 0, D> s = lrt::sum_tensor(x);
    if (scale != T(1)) s = s * scale;
    return s;
  }
}
}  // namespace detail

/// Sum of all elements -> scalar.
template <class T, int R, Device D>
Var<T, 0, D> sum(const Var<T, R, D>& x) {
  return record<T, 0, D>(
      "sum", detail::scaled_total(x.value(), T(1)),
      [x](const Tensor<T, 0, D>& gy, const Tensor<T, 0, D>&) { accumulate(x, gy); }, x);
}
/// Mean of all elements -> scalar.
template <class T, int R, Device D>
Var<T, 0, D> mean(const Var<T, R, D>& x) {
  const T inv = T(1) / static_cast<T>(x.shape().numel());
  return record<T, 0, D>(
      "mean", detail::scaled_total(x.value(), inv),
      [x, inv](const Tensor<T, 0, D>& gy, const Tensor<T, 0, D>&) { accumulate(x, gy * inv); }, x);
}
/// Sum over one axis (removed).
template <class T, int R, Device D>
Var<T, R - 1, D> sum(const Var<T, R, D>& x, int axis) {
  const int a = lrt::detail::normalize_axis(axis, R, "sum");
  return record<T, R - 1, D>(
      "sum_axis", lrt::sum(x.value(), a),
      [x, a](const Tensor<T, R - 1, D>& gy, const Tensor<T, R - 1, D>&) { accumulate(x, gy.view().unsqueeze(a)); }, x);
}

// ---------------------------------------------------------------- matrix products

/// a (M, K) x b (K, N) -> (M, N).
template <class T, Device D>
Var<T, 2, D> matmul(const Var<T, 2, D>& a, const Var<T, 2, D>& b) {
  return record<T, 2, D>(
      "matmul", lrt::matmul(a.value(), b.value()),
      [a, b](const Tensor<T, 2, D>& gy, const Tensor<T, 2, D>&) {
        if (auto [ga, beta] = grad_target(a); ga) lrt::gemm(*ga, gy, b.value().t(), T(1), beta);
        if (auto [gb, beta] = grad_target(b); gb) lrt::gemm(*gb, a.value().t(), gy, T(1), beta);
      },
      a, b);
}

/// x W^T for x (N, in) -> (N, out), or x (B, T, in) -> (B, T, out); W (out, in) as stored by
/// every Linear layer.
template <class T, int R, Device D>
Var<T, R, D> linear(const Var<T, R, D>& x, const Var<T, 2, D>& w) {
  static_assert(R == 2 || R == 3, "linear takes x of shape (N, in) or (B, T, in)");
  const Shape<R> xs = x.shape();
  const index_t in = xs[R - 1], out = w.shape()[0];
  check(w.shape()[1] == in, "linear", "input ", xs, " vs weight ", w.shape(), ": inner dims differ");
  const index_t N = xs.numel() / std::max<index_t>(in, 1);
  Shape<R> ys = xs;
  ys[R - 1] = out;
  Tensor<T, R, D> y(ys, uninitialized);
  lrt::gemm(y.view().template reshape<2>(Shape<2>{N, out}), x.value().view().template reshape<2>(Shape<2>{N, in}),
            w.value().t());
  return record<T, R, D>(
      "linear", std::move(y),
      [x, w, N, in, out](const Tensor<T, R, D>& gy, const Tensor<T, R, D>&) {
        const auto g2 = gy.view().template reshape<2>(Shape<2>{N, out});
        if (auto [gx, beta] = grad_target(x); gx)  // (N, out) x (out, in)
          lrt::gemm(gx->view().template reshape<2>(Shape<2>{N, in}), g2, w.value(), T(1), beta);
        if (auto [gw, beta] = grad_target(w); gw)  // (out, N) x (N, in)
          lrt::gemm(*gw, g2.t(), x.value().view().template reshape<2>(Shape<2>{N, in}), T(1), beta);
      },
      x, w);
}

// ---------------------------------------------------------------- shapes and rows

/// The same elements with another shape (a copy).
template <int R2, class T, int R, Device D>
Var<T, R2, D> reshape(const Var<T, R, D>& x, const Shape<R2>& s) {
  return record<T, R2, D>(
      "reshape", Tensor<T, R2, D>(x.value().view().template reshape<R2>(s)),
      [x](const Tensor<T, R2, D>& gy, const Tensor<T, R2, D>&) {
        accumulate(x, gy.view().template reshape<R>(x.shape()));
      },
      x);
}

/// Elements [begin, end) of axis (a copy).
template <class T, int R, Device D>
Var<T, R, D> slice(const Var<T, R, D>& x, int axis, index_t begin, index_t end) {
  const int a = lrt::detail::normalize_axis(axis, R, "slice");
  Tensor<T, R, D> y(x.value().slice(a, begin, end));
  if (begin < 0) begin += x.shape()[a];
  return record<T, R, D>(
      "slice", std::move(y),
      [x, a, begin](const Tensor<T, R, D>& gy, const Tensor<T, R, D>&) {
        if (auto* g = grad_slot(x)) {
          auto dst = g->slice(a, begin, begin + gy.shape()[a]);
          dst = dst + gy;
        }
      },
      x);
}

/// a and b joined along axis (other extents must agree).
template <class T, int R, Device D>
Var<T, R, D> concat(const Var<T, R, D>& a, const Var<T, R, D>& b, int axis) {
  const int ax = lrt::detail::normalize_axis(axis, R, "concat");
  Shape<R> s = a.shape();
  for (int d = 0; d < R; ++d)
    check(d == ax || a.shape()[d] == b.shape()[d], "concat", "shapes ", a.shape(), " and ", b.shape(),
          " differ outside axis ", ax);
  const index_t na = a.shape()[ax];
  s[ax] = na + b.shape()[ax];
  Tensor<T, R, D> y(s, uninitialized);
  y.slice(ax, 0, na) = a.value();
  y.slice(ax, na, s[ax]) = b.value();
  return record<T, R, D>(
      "concat", std::move(y),
      [a, b, ax, na](const Tensor<T, R, D>& gy, const Tensor<T, R, D>&) {
        accumulate(a, gy.slice(ax, 0, na));
        accumulate(b, gy.slice(ax, na, gy.shape()[ax]));
      },
      a, b);
}

/// Rows idx of axis (e.g. positions P of the time axis): x (B, T, C) -> (B, |P|, C).
template <class T, int R, Device D>
Var<T, R, D> gather(const Var<T, R, D>& x, int axis, const IndexList<D>& idx) {
  const int a = lrt::detail::normalize_axis(axis, R, "gather");
  check(idx.unique(), "gather", "the index list repeats an index (its gradient would need a scatter-add)");
  Tensor<T, R, D> y(x.value().gather(a, idx));
  return record<T, R, D>(
      "gather", std::move(y),
      [x, a, idx](const Tensor<T, R, D>& gy, const Tensor<T, R, D>&) {
        if (auto* g = grad_slot(x)) g->gather(a, idx) = g->gather(a, idx) + gy;
      },
      x);
}

/// buf with rows idx of axis replaced by fresh (the write-back of a subset pass):
/// buf (B, T, C), fresh (B, |P|, C) -> (B, T, C). Gradients flow to both.
template <class T, int R, Device D>
Var<T, R, D> scatter(const Var<T, R, D>& buf, int axis, const IndexList<D>& idx, const Var<T, R, D>& fresh) {
  const int a = lrt::detail::normalize_axis(axis, R, "scatter");
  Tensor<T, R, D> y(buf.value());
  y.gather(a, idx) = fresh.value();
  return record<T, R, D>(
      "scatter", std::move(y),
      [buf, fresh, a, idx](const Tensor<T, R, D>& gy, const Tensor<T, R, D>&) {
        if (buf.requires_grad()) {
          Tensor<T, R, D> g(gy);
          g.gather(a, idx) = ScalarExpr<T>(T(0));
          accumulate(buf, std::move(g));
        }
        accumulate(fresh, gy.gather(a, idx));
      },
      buf, fresh);
}

}  // namespace ad
}  // namespace v0
}  // namespace lrt
