// lrt/backend/nn_backend.hpp: NnBackend<D>, the fused transformer kernels of one device
// (RMSNorm, RoPE, softmax, softcapped cross-entropy, embedding, causal attention) behind one
// interface, the way GemmBackend<D> hides BLAS. The differentiable ops (autodiff/nn.hpp) are
// written once against it; backend/cpu/nn_backend.hpp and backend/cuda/nn_backend.cuh specialise it.
//
// Every specialisation provides these static member templates (T = float or double; views on D;
// the shapes are checked by nn_checks.hpp, the same on every device; values such as ids and
// targets are validated by the caller, autodiff/nn.hpp, before a kernel runs):
//   rmsnorm_forward<T>(x (N,C), y (N,C), rinv (N), double eps)
//   rmsnorm_backward<T>(y, rinv, gy, gx)                           gx overwritten
//   rope_apply<T>(x (B,T,H,Dh), cos (T,Dh/2), sin, y, bool inverse)
//   rope_rmsnorm_forward<T>(x (B,T,H,Dh), cos, sin, y, rinv (B*T*H), double eps)
//       y = rmsnorm(rope_apply(x)) over each head vector (RoPE + QK-norm in one kernel)
//   rope_rmsnorm_backward<T>(y, rinv, gy, cos, sin, gx)             gx overwritten
//   softmax_forward<T>(x (N,C), y)      softmax_backward<T>(y, gy, gx)
//   softcap_xent_forward<T>(logits (N,Vp), targets (N), V, cap, ignore, loss (N), lse (N))
//   softcap_xent_backward<T>(logits, targets, V, cap, ignore, lse, g (N), dlogits (N,Vp))
//   embedding_forward<T>(ids (N), table (V,C), out (N,C))
//   embedding_backward<T>(ids (N), gout (N,C), gtable (V,C))       accumulates (+=)
//   EmbeddingPlan, embedding_plan(ids (N), V, bool sort = true)     ids checked against V (and,
//       where the backward needs it, prepared) once for several lookups of the same ids
//   embedding_backward<T>(plan, ids, gout, gtable)                 accumulates (+=)
//   attention_forward<T>(q (B,Tq,H,Dh), k, v (B,Tk,Hkv,Dh), qpos (Tq), window, scale,
//                        out (B,Tq,H,Dh), lse (B,H,Tq), bool qpos_checked = false)
//   attention_backward<T>(q, k, v, qpos, window, scale, out, lse, dout, dq, dk, dv,
//                         bool qpos_checked = false)                   overwritten
//   qpos_checked: the caller has checked the positions on the host (check_query_positions), so
//   a device that would have to copy them back first may skip that.
// Attention masks: a query at position p sees key j iff j <= p and p - j <= window.
// NnKernels<D> states this interface; each specialisation static_asserts it.
#pragma once

#include <concepts>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/view.hpp"
#include "nn_checks.hpp"

namespace lrt {
inline namespace v0 {

/// RMSNorm epsilon of the spec: fp32 machine epsilon.
inline constexpr double rmsnorm_eps = 1.1920929e-07;

template <class D>
struct NnBackend {
  static_assert(detail::always_false<D>,
                "no transformer kernels for this device: include its backend header (<lrt/cuda.hpp> for "
                "lrt::cuda::Device)");
};

/// NnBackend<D>'s interface (the list at the top of this file) for element type T.
template <class D, class T>
concept NnKernelsFor = requires(TensorView<const T, 1, D> c1, TensorView<T, 1, D> m1, TensorView<const T, 2, D> c2,
                                TensorView<T, 2, D> m2, TensorView<const T, 3, D> c3, TensorView<T, 3, D> m3,
                                TensorView<const T, 4, D> c4, TensorView<T, 4, D> m4,
                                TensorView<const index_t, 1, D> ids, index_t n, T s, double eps, bool flag,
                                const typename NnBackend<D>::EmbeddingPlan& plan) {
  NnBackend<D>::template rmsnorm_forward<T>(c2, m2, m1, eps);
  NnBackend<D>::template rmsnorm_backward<T>(c2, c1, c2, m2);
  NnBackend<D>::template rope_apply<T>(c4, c2, c2, m4, flag);
  NnBackend<D>::template rope_rmsnorm_forward<T>(c4, c2, c2, m4, m1, eps);
  NnBackend<D>::template rope_rmsnorm_backward<T>(c4, c1, c4, c2, c2, m4);
  NnBackend<D>::template softmax_forward<T>(c2, m2);
  NnBackend<D>::template softmax_backward<T>(c2, c2, m2);
  NnBackend<D>::template softcap_xent_forward<T>(c2, ids, n, s, n, m1, m1);
  NnBackend<D>::template softcap_xent_backward<T>(c2, ids, n, s, n, c1, c1, m2);
  NnBackend<D>::template embedding_forward<T>(ids, c2, m2);
  NnBackend<D>::template embedding_backward<T>(ids, c2, m2);
  { NnBackend<D>::embedding_plan(ids, n) } -> std::same_as<typename NnBackend<D>::EmbeddingPlan>;
  { NnBackend<D>::embedding_plan(ids, n, flag) } -> std::same_as<typename NnBackend<D>::EmbeddingPlan>;
  NnBackend<D>::template embedding_backward<T>(plan, ids, c2, m2);
  NnBackend<D>::template attention_forward<T>(c4, c4, c4, ids, n, s, m4, m3);
  NnBackend<D>::template attention_forward<T>(c4, c4, c4, ids, n, s, m4, m3, flag);
  NnBackend<D>::template attention_backward<T>(c4, c4, c4, ids, n, s, c4, c3, c4, m4, m4, m4);
  NnBackend<D>::template attention_backward<T>(c4, c4, c4, ids, n, s, c4, c3, c4, m4, m4, m4, flag);
};

/// D's transformer kernels are complete, for float and double (a backend static_asserts it next to
/// its specialisation, so a missing or misspelt kernel is one error there).
template <class D>
concept NnKernels = NnKernelsFor<D, float> && NnKernelsFor<D, double>;

}  // namespace v0
}  // namespace lrt
