// lrt/backend/cuda/nn_backend.cuh: NnBackend<cuda::Device>, the CUDA kernels of rmsnorm.cuh,
// rope.cuh, softmax.cuh, cross_entropy.cuh, embedding.cuh and attention.cuh behind the
// device-neutral interface of backend/nn_backend.hpp.
#pragma once

#include <string>
#include <type_traits>

#include "../../tensor/tensor.hpp"
#include "../nn_backend.hpp"
#include "attention.cuh"
#include "cross_entropy.cuh"
#include "device.cuh"
#include "embedding.cuh"
#include "rmsnorm.cuh"
#include "rope.cuh"
#include "softmax.cuh"

namespace lrt {
inline namespace v0 {

template <>
struct NnBackend<cuda::Device> {
  template <class T>
  using V1 = TensorView<T, 1, cuda::Device>;
  template <class T>
  using V2 = TensorView<T, 2, cuda::Device>;
  template <class T>
  using V3 = TensorView<T, 3, cuda::Device>;
  template <class T>
  using V4 = TensorView<T, 4, cuda::Device>;

 private:
  template <class T>
  static constexpr void require_real() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "lrt's CUDA transformer kernels take float or double");
  }

 public:
  template <class T>
  static void rmsnorm_forward(V2<const T> x, V2<T> y, V1<T> rinv, double eps) {
    require_real<T>();
    cuda::detail::rmsnorm_forward<T>(x, y, rinv, eps);
  }
  template <class T>
  static void rmsnorm_backward(V2<const T> y, V1<const T> rinv, V2<const T> gy, V2<T> gx) {
    require_real<T>();
    cuda::detail::rmsnorm_backward<T>(y, rinv, gy, gx);
  }
  template <class T>
  static void rope_apply(V4<const T> x, V2<const T> cos, V2<const T> sin, V4<T> y, bool inverse) {
    require_real<T>();
    cuda::detail::rope_apply<T>(x, cos, sin, y, inverse);
  }
  template <class T>
  static void rope_rmsnorm_forward(V4<const T> x, V2<const T> cos, V2<const T> sin, V4<T> y, V1<T> rinv, double eps) {
    require_real<T>();
    cuda::detail::rope_rmsnorm_forward<T>(x, cos, sin, y, rinv, eps);
  }
  template <class T>
  static void rope_rmsnorm_backward(V4<const T> y, V1<const T> rinv, V4<const T> gy, V2<const T> cos, V2<const T> sin,
                                    V4<T> gx) {
    require_real<T>();
    cuda::detail::rope_rmsnorm_backward<T>(y, rinv, gy, cos, sin, gx);
  }
  template <class T>
  static void softmax_forward(V2<const T> x, V2<T> y) {
    require_real<T>();
    cuda::detail::softmax_forward<T>(x, y);
  }
  template <class T>
  static void softmax_backward(V2<const T> y, V2<const T> gy, V2<T> gx) {
    require_real<T>();
    cuda::detail::softmax_backward<T>(y, gy, gx);
  }
  template <class T>
  static void softcap_xent_forward(V2<const T> logits, V1<const index_t> targets, index_t V, T cap,
                                   index_t ignore_index, V1<T> loss, V1<T> lse) {
    require_real<T>();
    cuda::detail::softcap_xent_forward<T>(logits, targets, V, cap, ignore_index, loss, lse);
  }
  template <class T>
  static void softcap_xent_backward(V2<const T> logits, V1<const index_t> targets, index_t V, T cap,
                                    index_t ignore_index, V1<const T> lse, V1<const T> g, V2<T> dlogits) {
    require_real<T>();
    cuda::detail::softcap_xent_backward<T>(logits, targets, V, cap, ignore_index, lse, g, dlogits);
  }
  template <class T>
  static void embedding_forward(V1<const index_t> ids, V2<const T> table, V2<T> out) {
    require_real<T>();
    cuda::detail::embedding_forward<T>(ids, table, out);
  }

  /// The ids sorted on the device for embedding_backward (see cuda::detail::EmbeddingPlan).
  using EmbeddingPlan = cuda::detail::EmbeddingPlan;

  /// Checks 0 <= id < V on the device (an id out of range is raised as lrt::Error at the next
  /// wait for the GPU) and, when sort is set, sorts the rows by id on the device: no wait, no copy.
  static EmbeddingPlan embedding_plan(V1<const index_t> ids, index_t V, bool sort = true) {
    return cuda::detail::embedding_plan(ids, V, sort, "embedding", "a table of " + std::to_string(V) + " rows");
  }
  /// The same; errors name op and describe the table as `table`.
  static EmbeddingPlan embedding_plan_for(V1<const index_t> ids, index_t V, bool sort, const char* op,
                                          const std::string& table) {
    return cuda::detail::embedding_plan(ids, V, sort, op, table);
  }
  /// A plan for n ids the caller has checked against V itself (nothing copied, nothing sorted:
  /// a backward with it sorts then).
  static EmbeddingPlan embedding_plan_checked(index_t n, index_t V) {
    return cuda::detail::embedding_plan_checked(n, V);
  }
  /// gtable[ids[i], :] += gout[i, :] from a plan of the ids (made with sort; no wait for the GPU).
  template <class T>
  static void embedding_backward(const EmbeddingPlan& plan, V1<const index_t> /*ids: in the plan*/, V2<const T> gout,
                                 V2<T> gtable) {
    require_real<T>();
    cuda::detail::embedding_backward<T>(plan, gout, gtable);
  }
  /// gtable[ids[i], :] += gout[i, :] (the ids checked and sorted on the device first).
  template <class T>
  static void embedding_backward(V1<const index_t> ids, V2<const T> gout, V2<T> gtable) {
    require_real<T>();
    cuda::detail::embedding_backward<T>(ids, gout, gtable);
  }

  template <class T>
  static void attention_forward(V4<const T> q, V4<const T> k, V4<const T> v, V1<const index_t> qpos, index_t window,
                                T scale, V4<T> out, V3<T> lse, bool qpos_checked = false) {
    require_real<T>();
    cuda::detail::attention_forward<T>(q, k, v, qpos, window, scale, out, lse, qpos_checked);
  }
  template <class T>
  static void attention_backward(V4<const T> q, V4<const T> k, V4<const T> v, V1<const index_t> qpos, index_t window,
                                 T scale, V4<const T> out, V3<const T> lse, V4<const T> dout, V4<T> dq, V4<T> dk,
                                 V4<T> dv, bool qpos_checked = false) {
    require_real<T>();
    cuda::detail::attention_backward<T>(q, k, v, qpos, window, scale, out, lse, dout, dq, dk, dv, qpos_checked);
  }
};
static_assert(NnKernels<cuda::Device>, "NnBackend<cuda::Device> must provide every kernel of backend/nn_backend.hpp");

}  // namespace v0
}  // namespace lrt
