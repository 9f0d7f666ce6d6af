// lrt/backend/nn_backend.hpp: NnBackend<D>, the fused transformer kernels of one device
// (RMSNorm, RoPE, softmax, softcapped cross-entropy, embedding, causal attention) behind one
// interface, the way GemmBackend<D> hides BLAS. The differentiable ops (autodiff/nn.hpp) are
// written once against it; backend/cpu/nn.hpp and backend/cuda/nn.cuh specialise it.
//
// Every specialisation provides these static member templates (T = float or double; views on D;
// inputs are validated by the caller, autodiff/nn.hpp, before a kernel runs):
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
#pragma once

#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"

namespace lrt {
inline namespace v0 {

namespace detail {
/// The argument checks every device's attention runs first (same messages everywhere):
/// q (B, Tq, H, Dh), k, v (B, Tk, Hkv, Dh), qpos (Tq), window >= 0.
inline void check_attention_shapes(const char* op, const Shape<4>& qs, const Shape<4>& ks, const Shape<4>& vs,
                                   const Shape<1>& ps, index_t window) {
  check(ks == vs, op, "k ", ks, " and v ", vs, " differ in shape");
  check(qs[0] == ks[0], op, "q ", qs, " and k ", ks, ": batch sizes differ");
  check(qs[3] == ks[3], op, "q ", qs, " and k ", ks, ": head dims differ");
  check(ks[2] > 0, op, "k ", ks, " has no heads (Hkv = 0)");
  check(qs[2] % ks[2] == 0, op, "q ", qs, " and k ", ks, ": H % Hkv != 0");
  check(window >= 0, op, "window must be >= 0, got ", window);
  check(ps[0] == qs[1], op, "qpos ", ps, " has ", ps[0], " entries but q ", qs, " has Tq = ", qs[1]);
}
/// Query positions (on the host) must be non-negative, strictly increasing and < Tk.
inline void check_query_positions(const char* op, const std::vector<index_t>& pos, const Shape<4>& ks) {
  const index_t Tk = ks[1];
  for (std::size_t i = 0; i < pos.size(); ++i) {
    check(pos[i] >= 0, op, "qpos[", i, "] = ", pos[i], " is negative");
    if (i > 0)
      check(pos[i] > pos[i - 1], op, "qpos must be strictly increasing: qpos[", i, "] = ", pos[i],
            " after qpos[", i - 1, "] = ", pos[i - 1]);
    check(pos[i] < Tk, op, "qpos[", i, "] = ", pos[i], " is not < Tk = ", Tk, " (k ", ks, ")");
  }
}
}  // namespace detail

template <class D>
struct NnBackend {
  static_assert(detail::always_false<D>,
                "no transformer kernels for this device: include its backend header (<lrt/cuda.hpp> for "
                "lrt::cuda::Device)");
};

}  // namespace v0
}  // namespace lrt
