// lrt/backend/cpu/nn.hpp: CPU kernels of the transformer's fused ops, forward and backward, on
// row-major views (callers reshape to rows). Used by the autodiff ops and by decoding.
// Shapes: N rows (B*T tokens), C channels, Dh head dim, V vocabulary.
// The shape checks are backend/nn_checks.hpp's (shared with the other devices); the kernels here
// check the ids and targets they read.
// Not here: attention (attention.hpp), matrix products (gemm.hpp).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include <Eigen/Core>

#include "../../tensor/reduce.hpp"
#include "../nn_backend.hpp"
#include "../nn_checks.hpp"
#include "device.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu {

/// RMSNorm epsilon of the spec (lrt::rmsnorm_eps, backend/nn_backend.hpp), under its old name.
inline constexpr double rmsnorm_eps = lrt::rmsnorm_eps;

/// y = x / sqrt(mean(x^2) + eps) per row; rinv[i] = the row's 1/sqrt(...).
/// x, y: (N, C)   rinv: (N)
template <class T>
void rmsnorm_forward(TensorView<const T, 2> x, TensorView<T, 2> y, TensorView<T, 1> rinv, double eps = rmsnorm_eps) {
  const index_t N = x.shape()[0], C = x.shape()[1];
  lrt::detail::check_rmsnorm_forward(x.shape(), y.shape(), rinv.shape());
  parallel_for(N, std::max<index_t>(1, 16384 / std::max<index_t>(C, 1)), [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) {
      const T* xr = &x(i, 0);
      T* yr = &y(i, 0);
      const index_t sx = x.strides()[1], sy = y.strides()[1];
      T ss = 0;
      for (index_t j = 0; j < C; ++j) ss += xr[j * sx] * xr[j * sx];
      const T r = T(1) / std::sqrt(ss / T(C) + T(eps));
      for (index_t j = 0; j < C; ++j) yr[j * sy] = xr[j * sx] * r;
      rinv(i) = r;
    }
  });
}

/// gx = rinv * (gy - y * mean(gy * y)) per row.   y, gy, gx: (N, C)   rinv: (N)
template <class T>
void rmsnorm_backward(TensorView<const T, 2> y, TensorView<const T, 1> rinv, TensorView<const T, 2> gy,
                      TensorView<T, 2> gx) {
  const index_t N = y.shape()[0], C = y.shape()[1];
  lrt::detail::check_rmsnorm_backward(y.shape(), rinv.shape(), gy.shape(), gx.shape());
  parallel_for(N, std::max<index_t>(1, 16384 / std::max<index_t>(C, 1)), [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) {
      T dot = 0;
      for (index_t j = 0; j < C; ++j) dot += gy(i, j) * y(i, j);
      const T m = dot / T(C), r = rinv(i);
      for (index_t j = 0; j < C; ++j) gx(i, j) = r * (gy(i, j) - y(i, j) * m);
    }
  });
}

/// Half-split rotation by -theta (the release's sign): with a = x_j, b = x_{j+Dh/2},
/// y_j = a cos + b sin, y_{j+Dh/2} = -a sin + b cos. inverse = true rotates back (the backward).
/// x, y: (B, T, H, Dh)   cos, sin: (T, Dh/2), row t for time index t of x
template <class T>
void rope_apply(TensorView<const T, 4> x, TensorView<const T, 2> cos, TensorView<const T, 2> sin, TensorView<T, 4> y,
                bool inverse = false) {
  const index_t B = x.shape()[0], Tt = x.shape()[1], H = x.shape()[2], Dh = x.shape()[3], half = Dh / 2;
  lrt::detail::check_rope(x.shape(), cos.shape(), sin.shape(), y.shape());
  const T sg = inverse ? T(-1) : T(1);
  parallel_for(B * Tt, std::max<index_t>(1, 8192 / std::max<index_t>(H * Dh, 1)), [&](index_t b0, index_t e0) {
    for (index_t bt = b0; bt < e0; ++bt) {
      const index_t bb = bt / Tt, t = bt % Tt;
      for (index_t h = 0; h < H; ++h)
        for (index_t j = 0; j < half; ++j) {
          const T a = x(bb, t, h, j), c = x(bb, t, h, j + half);
          const T co = cos(t, j), si = sg * sin(t, j);
          y(bb, t, h, j) = a * co + c * si;
          y(bb, t, h, j + half) = -a * si + c * co;
        }
    }
  });
}

/// RoPE then RMSNorm over each head vector in one pass (the model's QK-norm after RoPE):
/// y = rmsnorm(rope_apply(x)), rinv[(b*T + t)*H + h] = that row's 1/sqrt(mean(rope(x)^2) + eps).
/// The same operations in the same order as rope_apply followed by rmsnorm_forward, so equal to
/// them bit for bit.   x, y: (B, T, H, Dh)   cos, sin: (T, Dh/2)   rinv: (B*T*H)
template <class T>
void rope_rmsnorm_forward(TensorView<const T, 4> x, TensorView<const T, 2> cos, TensorView<const T, 2> sin,
                          TensorView<T, 4> y, TensorView<T, 1> rinv, double eps = rmsnorm_eps) {
  const index_t B = x.shape()[0], Tt = x.shape()[1], H = x.shape()[2], Dh = x.shape()[3], half = Dh / 2;
  lrt::detail::check_rope_rmsnorm_forward(x.shape(), cos.shape(), sin.shape(), y.shape(), rinv.shape());
  parallel_for(B * Tt, std::max<index_t>(1, 8192 / std::max<index_t>(H * Dh, 1)), [&](index_t b0, index_t e0) {
    for (index_t bt = b0; bt < e0; ++bt) {
      const index_t bb = bt / Tt, t = bt % Tt;
      for (index_t h = 0; h < H; ++h) {
        for (index_t j = 0; j < half; ++j) {
          const T a = x(bb, t, h, j), c = x(bb, t, h, j + half);
          const T co = cos(t, j), si = sin(t, j);
          y(bb, t, h, j) = a * co + c * si;
          y(bb, t, h, j + half) = -a * si + c * co;
        }
        T ss = 0;
        for (index_t j = 0; j < Dh; ++j) ss += y(bb, t, h, j) * y(bb, t, h, j);
        const T r = T(1) / std::sqrt(ss / T(Dh) + T(eps));
        for (index_t j = 0; j < Dh; ++j) y(bb, t, h, j) *= r;
        rinv(bt * H + h) = r;
      }
    }
  });
}

/// The backward of rope_rmsnorm_forward: g = rinv * (gy - y * mean(gy * y)) per head vector, then
/// rotated back (rope_apply with inverse = true); gx overwritten (it may be gy itself).
/// y, gy, gx: (B, T, H, Dh)   cos, sin: (T, Dh/2)   rinv: (B*T*H)
template <class T>
void rope_rmsnorm_backward(TensorView<const T, 4> y, TensorView<const T, 1> rinv, TensorView<const T, 4> gy,
                           TensorView<const T, 2> cos, TensorView<const T, 2> sin, TensorView<T, 4> gx) {
  const index_t B = y.shape()[0], Tt = y.shape()[1], H = y.shape()[2], Dh = y.shape()[3], half = Dh / 2;
  lrt::detail::check_rope_rmsnorm_backward(y.shape(), rinv.shape(), gy.shape(), cos.shape(), sin.shape(), gx.shape());
  parallel_for(B * Tt, std::max<index_t>(1, 8192 / std::max<index_t>(H * Dh, 1)), [&](index_t b0, index_t e0) {
    for (index_t bt = b0; bt < e0; ++bt) {
      const index_t bb = bt / Tt, t = bt % Tt;
      for (index_t h = 0; h < H; ++h) {
        T dot = 0;
        for (index_t j = 0; j < Dh; ++j) dot += gy(bb, t, h, j) * y(bb, t, h, j);
        const T m = dot / T(Dh), r = rinv(bt * H + h);
        for (index_t j = 0; j < half; ++j) {
          const T g0 = r * (gy(bb, t, h, j) - y(bb, t, h, j) * m);
          const T g1 = r * (gy(bb, t, h, j + half) - y(bb, t, h, j + half) * m);
          const T co = cos(t, j), si = -sin(t, j);
          gx(bb, t, h, j) = g0 * co + g1 * si;
          gx(bb, t, h, j + half) = -g0 * si + g1 * co;
        }
      }
    }
  });
}

/// Row-wise softmax.   x, y: (N, C)
template <class T>
void softmax_forward(TensorView<const T, 2> x, TensorView<T, 2> y) {
  const index_t N = x.shape()[0], C = x.shape()[1];
  lrt::detail::check_softmax_forward(x.shape(), y.shape());
  parallel_for(N, std::max<index_t>(1, 16384 / std::max<index_t>(C, 1)), [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) {
      T m = -std::numeric_limits<T>::infinity();
      for (index_t j = 0; j < C; ++j) m = std::max(m, x(i, j));
      T s = 0;
      for (index_t j = 0; j < C; ++j) s += (y(i, j) = std::exp(x(i, j) - m));
      const T inv = T(1) / s;
      for (index_t j = 0; j < C; ++j) y(i, j) *= inv;
    }
  });
}

/// gx = y * (gy - sum(gy * y)) per row.   y, gy, gx: (N, C)
template <class T>
void softmax_backward(TensorView<const T, 2> y, TensorView<const T, 2> gy, TensorView<T, 2> gx) {
  const index_t N = y.shape()[0], C = y.shape()[1];
  lrt::detail::check_softmax_backward(y.shape(), gy.shape(), gx.shape());
  parallel_for(N, std::max<index_t>(1, 16384 / std::max<index_t>(C, 1)), [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) {
      T dot = 0;
      for (index_t j = 0; j < C; ++j) dot += gy(i, j) * y(i, j);
      for (index_t j = 0; j < C; ++j) gx(i, j) = y(i, j) * (gy(i, j) - dot);
    }
  });
}

/// Fused softcap + log-softmax + cross-entropy over the first V columns of each row.
/// z = cap * tanh(l / cap) (cap <= 0: z = l); loss[i] = logsumexp(z_i) - z_i[t_i], 0 where the
/// target is ignore_index. lse[i] is saved for the backward.
/// logits: (N, Vp)   targets: (N)   loss, lse: (N)
template <class T>
void softcap_xent_forward(TensorView<const T, 2> logits, TensorView<const index_t, 1> targets, index_t V, T cap,
                          index_t ignore_index, TensorView<T, 1> loss, TensorView<T, 1> lse) {
  const index_t N = logits.shape()[0];
  lrt::detail::check_softcap_xent_forward(logits.shape(), targets.shape(), V, loss.shape(), lse.shape());
  for (index_t i = 0; i < N; ++i) {
    const index_t t = targets(i);
    check(t == ignore_index || (t >= 0 && t < V), "cross_entropy", "target ", t, " at row ", i,
          " out of range for vocab ", V);
  }
  if (logits.strides()[1] == 1) {
    // Contiguous rows: z once per row into a per-chunk buffer, then Eigen's vectorised tanh and
    // exp (libm's scalar tanhf/expf were ~7% of a tiny training step).
    using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
    parallel_for(N, std::max<index_t>(1, 8192 / V), [&](index_t b, index_t e) {
      Arr z(V), ez(V);
      for (index_t i = b; i < e; ++i) {
        const Eigen::Map<const Arr> l(&logits(i, 0), V);
        if (cap > T(0))
          z = cap * (l / cap).tanh();
        else
          z = l;
        const T m = z.maxCoeff();
        ez = (z - m).exp();
        const T lrow = m + std::log(ez.sum());
        lse(i) = lrow;
        const index_t t = targets(i);
        loss(i) = t == ignore_index ? T(0) : lrow - z(t);
      }
    });
    return;
  }
  parallel_for(N, std::max<index_t>(1, 8192 / V), [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) {
      auto z = [&](index_t j) { return cap > T(0) ? cap * std::tanh(logits(i, j) / cap) : logits(i, j); };
      T m = -std::numeric_limits<T>::infinity();
      for (index_t j = 0; j < V; ++j) m = std::max(m, z(j));
      T s = 0;
      for (index_t j = 0; j < V; ++j) s += std::exp(z(j) - m);
      const T l = m + std::log(s);
      lse(i) = l;
      const index_t t = targets(i);
      loss(i) = t == ignore_index ? T(0) : l - z(t);
    }
  });
}

/// dlogits[i, :] = g[i] * (softmax(z_i) - onehot(t_i)) * dz/dl, zero for ignored rows and for
/// columns >= V.   g: (N) upstream gradient of each row's loss
template <class T>
void softcap_xent_backward(TensorView<const T, 2> logits, TensorView<const index_t, 1> targets, index_t V, T cap,
                           index_t ignore_index, TensorView<const T, 1> lse, TensorView<const T, 1> g,
                           TensorView<T, 2> dlogits) {
  const index_t N = logits.shape()[0], Vp = logits.shape()[1];
  lrt::detail::check_softcap_xent_backward(logits.shape(), targets.shape(), V, lse.shape(), g.shape(), dlogits.shape());
  parallel_for(N, std::max<index_t>(1, 8192 / Vp), [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) {
      const index_t t = targets(i);
      if (t == ignore_index || g(i) == T(0)) {
        for (index_t j = 0; j < Vp; ++j) dlogits(i, j) = T(0);
        continue;
      }
      const T gi = g(i), l = lse(i);
      if (logits.strides()[1] == 1 && dlogits.strides()[1] == 1) {
        // Contiguous rows: Eigen's vectorised tanh and exp, in place in the output row.
        using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
        const Eigen::Map<const Arr> lrow(&logits(i, 0), V);
        Eigen::Map<Arr> d(&dlogits(i, 0), V);
        if (cap > T(0)) {
          d = (lrow / cap).tanh();  // th
          const T th_t = d(t);
          d = gi * ((cap * d - l).exp() * (T(1) - d * d));  // g p dz
          d(t) -= gi * (T(1) - th_t * th_t);                // the one-hot term: - g dz at the target
        } else {
          d = gi * (lrow - l).exp();
          d(t) -= gi;
        }
        for (index_t j = V; j < Vp; ++j) dlogits(i, j) = T(0);
        continue;
      }
      for (index_t j = 0; j < V; ++j) {
        T zj, dz = T(1);
        if (cap > T(0)) {
          const T th = std::tanh(logits(i, j) / cap);
          zj = cap * th;
          dz = T(1) - th * th;
        } else {
          zj = logits(i, j);
        }
        const T p = std::exp(zj - l) - (j == t ? T(1) : T(0));
        dlogits(i, j) = gi * p * dz;
      }
      for (index_t j = V; j < Vp; ++j) dlogits(i, j) = T(0);
    }
  });
}

/// out[i, :] = table[ids[i], :].   ids: (N)   table: (V, C)   out: (N, C)
template <class T>
void embedding_forward(TensorView<const index_t, 1> ids, TensorView<const T, 2> table, TensorView<T, 2> out) {
  const index_t N = ids.shape()[0], V = table.shape()[0], C = table.shape()[1];
  lrt::detail::check_embedding_forward(ids.shape(), table.shape(), out.shape());
  for (index_t i = 0; i < N; ++i)
    check(ids(i) >= 0 && ids(i) < V, "embedding", "id ", ids(i), " at position ", i, " out of range for table ",
          table.shape());
  parallel_for(N, std::max<index_t>(1, 8192 / std::max<index_t>(C, 1)), [&](index_t b, index_t e) {
    for (index_t i = b; i < e; ++i)
      for (index_t j = 0; j < C; ++j) out(i, j) = table(ids(i), j);
  });
}

/// gtable[ids[i], :] += gout[i, :] (scatter-add; repeated ids accumulate in row order, so the
/// result does not depend on the thread count).   gout: (N, C)   gtable: (V, C)
template <class T>
void embedding_backward(TensorView<const index_t, 1> ids, TensorView<const T, 2> gout, TensorView<T, 2> gtable) {
  const index_t N = ids.shape()[0], C = gtable.shape()[1];
  lrt::detail::check_embedding_backward(N, gout.shape(), gtable.shape());
  // Threads own disjoint channel ranges: no races, fixed order per element.
  parallel_for(C, 16, [&](index_t c0, index_t c1) {
    for (index_t i = 0; i < N; ++i)
      for (index_t j = c0; j < c1; ++j) gtable(ids(i), j) += gout(i, j);
  });
}

}  // namespace cpu
}  // namespace v0
}  // namespace lrt
