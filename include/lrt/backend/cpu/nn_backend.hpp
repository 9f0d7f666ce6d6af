// lrt/backend/cpu/nn_backend.hpp: NnBackend<cpu::Device>, the CPU kernels of nn.hpp and
// attention.hpp behind the device-neutral interface of backend/nn_backend.hpp.
#pragma once

#include "../nn_backend.hpp"
#include "attention.hpp"
#include "nn.hpp"

namespace lrt {
inline namespace v0 {

template <>
struct NnBackend<cpu::Device> {
  template <class T>
  using V1 = TensorView<T, 1, cpu::Device>;
  template <class T>
  using V2 = TensorView<T, 2, cpu::Device>;
  template <class T>
  using V3 = TensorView<T, 3, cpu::Device>;
  template <class T>
  using V4 = TensorView<T, 4, cpu::Device>;

  template <class T>
  static void rmsnorm_forward(V2<const T> x, V2<T> y, V1<T> rinv, double eps) {
    cpu::rmsnorm_forward<T>(x, y, rinv, eps);
  }
  template <class T>
  static void rmsnorm_backward(V2<const T> y, V1<const T> rinv, V2<const T> gy, V2<T> gx) {
    cpu::rmsnorm_backward<T>(y, rinv, gy, gx);
  }
  template <class T>
  static void rope_apply(V4<const T> x, V2<const T> cos, V2<const T> sin, V4<T> y, bool inverse) {
    cpu::rope_apply<T>(x, cos, sin, y, inverse);
  }
  template <class T>
  static void rope_rmsnorm_forward(V4<const T> x, V2<const T> cos, V2<const T> sin, V4<T> y, V1<T> rinv, double eps) {
    cpu::rope_rmsnorm_forward<T>(x, cos, sin, y, rinv, eps);
  }
  template <class T>
  static void rope_rmsnorm_backward(V4<const T> y, V1<const T> rinv, V4<const T> gy, V2<const T> cos, V2<const T> sin,
                                    V4<T> gx) {
    cpu::rope_rmsnorm_backward<T>(y, rinv, gy, cos, sin, gx);
  }
  template <class T>
  static void softmax_forward(V2<const T> x, V2<T> y) {
    cpu::softmax_forward<T>(x, y);
  }
  template <class T>
  static void softmax_backward(V2<const T> y, V2<const T> gy, V2<T> gx) {
    cpu::softmax_backward<T>(y, gy, gx);
  }
  template <class T>
  static void softcap_xent_forward(V2<const T> logits, V1<const index_t> targets, index_t V, T cap,
                                   index_t ignore_index, V1<T> loss, V1<T> lse) {
    cpu::softcap_xent_forward<T>(logits, targets, V, cap, ignore_index, loss, lse);
  }
  template <class T>
  static void softcap_xent_backward(V2<const T> logits, V1<const index_t> targets, index_t V, T cap,
                                    index_t ignore_index, V1<const T> lse, V1<const T> g, V2<T> dlogits) {
    cpu::softcap_xent_backward<T>(logits, targets, V, cap, ignore_index, lse, g, dlogits);
  }
  template <class T>
  static void embedding_forward(V1<const index_t> ids, V2<const T> table, V2<T> out) {
    cpu::embedding_forward<T>(ids, table, out);
  }
  template <class T>
  static void embedding_backward(V1<const index_t> ids, V2<const T> gout, V2<T> gtable) {
    cpu::embedding_backward<T>(ids, gout, gtable);
  }
  /// Nothing to prepare on the CPU: the kernels read and check the ids themselves.
  struct EmbeddingPlan {
    index_t bound = 0;
  };
  static EmbeddingPlan embedding_plan(V1<const index_t>, index_t V, bool = true) { return {V}; }
  template <class T>
  static void embedding_backward(const EmbeddingPlan&, V1<const index_t> ids, V2<const T> gout, V2<T> gtable) {
    cpu::embedding_backward<T>(ids, gout, gtable);
  }
  template <class T>
  static void attention_forward(V4<const T> q, V4<const T> k, V4<const T> v, V1<const index_t> qpos, index_t window,
                                T scale, V4<T> out, V3<T> lse, bool /*qpos_checked*/ = false) {
    cpu::attention_forward<T>(q, k, v, qpos, window, scale, out, lse);
  }
  template <class T>
  static void attention_backward(V4<const T> q, V4<const T> k, V4<const T> v, V1<const index_t> qpos, index_t window,
                                 T scale, V4<const T> out, V3<const T> lse, V4<const T> dout, V4<T> dq, V4<T> dk,
                                 V4<T> dv, bool /*qpos_checked*/ = false) {
    cpu::attention_backward<T>(q, k, v, qpos, window, scale, out, lse, dout, dq, dk, dv);
  }
};
static_assert(NnKernels<cpu::Device>, "NnBackend<cpu::Device> must provide every kernel of backend/nn_backend.hpp");

}  // namespace v0
}  // namespace lrt
