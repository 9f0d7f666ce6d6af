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
//   softmax_forward<T>(x (N,C), y)      softmax_backward<T>(y, gy, gx)
//   softcap_xent_forward<T>(logits (N,Vp), targets (N), V, cap, ignore, loss (N), lse (N))
//   softcap_xent_backward<T>(logits, targets, V, cap, ignore, lse, g (N), dlogits (N,Vp))
//   embedding_forward<T>(ids (N), table (V,C), out (N,C))
//   embedding_backward<T>(ids (N), gout (N,C), gtable (V,C))       accumulates (+=)
//   attention_forward<T>(q (B,Tq,H,Dh), k, v (B,Tk,Hkv,Dh), qpos (Tq), window, scale,
//                        out (B,Tq,H,Dh), lse (B,H,Tq))
//   attention_backward<T>(q, k, v, qpos, window, scale, out, lse, dout, dq, dk, dv)  overwritten
// Attention masks: a query at position p sees key j iff j <= p and p - j <= window.
#pragma once

#include "../core/config.hpp"

namespace lrt {
inline namespace v0 {

template <class D>
struct NnBackend {
  static_assert(detail::always_false<D>,
                "no transformer kernels for this device: include its backend header (<lrt/cuda.hpp> for "
                "lrt::cuda::Device)");
};

}  // namespace v0
}  // namespace lrt
