// lrt/backend/cuda/cross_entropy.cuh: softcap + log-softmax + cross-entropy on the GPU, forward
// and backward (see cpu::softcap_xent_forward): one block per row.
#pragma once

#include "../../tensor/tensor.hpp"
#include "../nn_checks.hpp"
#include "launch.cuh"
#include "nn_common.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

template <class T>
__device__ inline T nn_softcap(T l, T cap) {
  return cap > T(0) ? cap * nn_tanh(l / cap) : l;
}

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    xent_forward_kernel(index_t N, index_t V, const T* logits, index_t ls0, index_t ls1, const index_t* targets,
                        index_t ts, T cap, index_t ignore, T* loss, index_t los, T* lse, index_t lss) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* lr = logits + i * ls0;
    T m = nn_neg_inf<T>();
    for (index_t j = threadIdx.x; j < V; j += blockDim.x) m = nn_max(m, nn_softcap(lr[j * ls1], cap));
    m = nn_block_reduce(m, nn_neg_inf<T>(), NnMax{}, sh);
    T s = 0;
    for (index_t j = threadIdx.x; j < V; j += blockDim.x) s += nn_exp(nn_softcap(lr[j * ls1], cap) - m);
    s = nn_block_reduce(s, T(0), NnSum{}, sh);
    if (threadIdx.x == 0) {
      const T l = m + nn_log(s);
      lse[i * lss] = l;
      const index_t t = targets[i * ts];
      const bool skip = t == ignore || t < 0 || t >= V;  // out of range: validated by the caller
      loss[i * los] = skip ? T(0) : l - nn_softcap(lr[t * ls1], cap);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    xent_backward_kernel(index_t N, index_t V, index_t Vp, const T* logits, index_t ls0, index_t ls1,
                         const index_t* targets, index_t ts, T cap, index_t ignore, const T* lse, index_t lss,
                         const T* g, index_t gs, T* dl, index_t ds0, index_t ds1) {
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* lr = logits + i * ls0;
    T* dr = dl + i * ds0;
    const index_t t = targets[i * ts];
    const T gi = g[i * gs], l = lse[i * lss];
    const bool zero = t == ignore || t < 0 || t >= V || gi == T(0);
    for (index_t j = threadIdx.x; j < Vp; j += blockDim.x) {
      T val = T(0);
      if (!zero && j < V) {
        const T x = lr[j * ls1];
        T zj, dz = T(1);
        if (cap > T(0)) {
          const T th = nn_tanh(x / cap);
          zj = cap * th;
          dz = T(1) - th * th;
        } else {
          zj = x;
        }
        const T p = nn_exp(zj - l) - (j == t ? T(1) : T(0));
        val = gi * p * dz;
      }
      dr[j * ds1] = val;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

/// Softcap + log-softmax + cross-entropy over the first V columns (see cpu::
/// softcap_xent_forward). Targets are validated by the caller; one out of [0, V) that is not
/// ignore_index is treated as ignored here (never read out of range).
template <class T>
void softcap_xent_forward(NnView<const T, 2> logits, NnView<const index_t, 1> targets, index_t V, T cap,
                          index_t ignore_index, NnView<T, 1> loss, NnView<T, 1> lse) {
  const index_t N = logits.shape()[0];
  lrt::detail::check_softcap_xent_forward(logits.shape(), targets.shape(), V, loss.shape(), lse.shape());
  if (N == 0) return;
  launch(xent_forward_kernel<T>, nn_blocks(N), nn_block_threads(V), 0, "softcap_xent_forward kernel launch", N, V,
         logits.data(), logits.strides()[0], logits.strides()[1], targets.data(), targets.strides()[0], cap,
         ignore_index, loss.data(), loss.strides()[0], lse.data(), lse.strides()[0]);
}

/// dlogits = g * (softmax(z) - onehot(t)) * dz/dl on the first V columns, 0 elsewhere and on
/// ignored rows (dlogits overwritten).
template <class T>
void softcap_xent_backward(NnView<const T, 2> logits, NnView<const index_t, 1> targets, index_t V, T cap,
                           index_t ignore_index, NnView<const T, 1> lse, NnView<const T, 1> g, NnView<T, 2> dlogits) {
  const index_t N = logits.shape()[0], Vp = logits.shape()[1];
  lrt::detail::check_softcap_xent_backward(logits.shape(), targets.shape(), V, lse.shape(), g.shape(), dlogits.shape());
  if (N == 0) return;
  launch(xent_backward_kernel<T>, nn_blocks(N), nn_block_threads(Vp), 0, "softcap_xent_backward kernel launch", N, V,
         Vp, logits.data(), logits.strides()[0], logits.strides()[1], targets.data(), targets.strides()[0], cap,
         ignore_index, lse.data(), lse.strides()[0], g.data(), g.strides()[0], dlogits.data(), dlogits.strides()[0],
         dlogits.strides()[1]);
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
