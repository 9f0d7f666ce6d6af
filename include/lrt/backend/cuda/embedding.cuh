// lrt/backend/cuda/embedding.cuh: embedding lookups on the GPU and their backward without
// atomics: the ids are copied to the host, checked and counting-sorted (rows grouped by id, in
// increasing row order) into an EmbeddingPlan; one block per distinct id then adds its rows into
// the table's gradient in row order, as the CPU does (deterministic).
#pragma once

#include <string>
#include <vector>

#include "../../tensor/tensor.hpp"
#include "../nn_checks.hpp"
#include "device.cuh"
#include "launch.cuh"
#include "nn_common.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    embedding_forward_kernel(index_t N, index_t V, index_t C, const index_t* ids, index_t is, const T* table,
                             index_t ts0, index_t ts1, T* out, index_t os0, index_t os1) {
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const index_t id = ids[i * is];
    const bool ok = id >= 0 && id < V;  // validated by the caller; never read out of range
    const T* tr = table + (ok ? id : 0) * ts0;
    T* orow = out + i * os0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) orow[j * os1] = ok ? tr[j * ts1] : T(0);
  }
}

/// Block u adds the rows perm[start[u] .. start[u+1]) of gout (all with id seg_id[u], in
/// increasing row order) into gtable[seg_id[u], :], one running sum per channel.
template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    embedding_backward_kernel(index_t U, index_t C, const index_t* perm, const index_t* seg_id,
                              const index_t* seg_start, const T* gout, index_t gs0, index_t gs1, T* gt, index_t ts0,
                              index_t ts1) {
  for (index_t u = blockIdx.x; u < U; u += gridDim.x) {
    const index_t id = seg_id[u], k0 = seg_start[u], k1 = seg_start[u + 1];
    T* tr = gt + id * ts0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) {
      T acc = tr[j * ts1];
      for (index_t k = k0; k < k1; ++k) acc += gout[perm[k] * gs0 + j * gs1];
      tr[j * ts1] = acc;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

/// out[i, :] = table[ids[i], :] (ids validated by the caller; an id out of range gives a
/// zero row here, never an out-of-bounds read).
template <class T>
void embedding_forward(NnView<const index_t, 1> ids, NnView<const T, 2> table, NnView<T, 2> out) {
  const index_t N = ids.shape()[0], V = table.shape()[0], C = table.shape()[1];
  lrt::detail::check_embedding_forward(ids.shape(), table.shape(), out.shape());
  if (N == 0 || C == 0) return;
  launch(embedding_forward_kernel<T>, nn_blocks(N), nn_block_threads(C), 0, "embedding_forward kernel launch", N, V, C,
         ids.data(), ids.strides()[0], table.data(), table.strides()[0], table.strides()[1], out.data(),
         out.strides()[0], out.strides()[1]);
}

/// What embedding_backward needs from the ids, made once per id tensor (the model's token
/// embedding and its value embeddings share it): the rows sorted by id on the device, laid out
/// as [perm (N) | seg_id (U) | seg_start (U + 1)] for U distinct ids.
struct EmbeddingPlan {
  Tensor<index_t, 1, cuda::Device> layout;
  index_t n = 0, unique = 0, bound = 0;  // ids checked to lie in [0, bound)
};

/// Copies ids to the host (a wait for the GPU), checks 0 <= id < V (as the CPU kernels do) and,
/// when sort is set, counting-sorts the rows by id and uploads the layout (a second wait).
/// Errors name op and describe the table as `table`.
inline EmbeddingPlan embedding_plan(NnView<const index_t, 1> ids, index_t V, bool sort, const char* op,
                                    const std::string& table) {
  const index_t N = ids.shape()[0];
  EmbeddingPlan plan;
  plan.n = N, plan.bound = V;
  if (N == 0) return plan;
  std::vector<index_t> h;
  nn_copy_indices_to_host(ids, h, op, "ids");
  for (index_t i = 0; i < N; ++i)
    check(h[i] >= 0 && h[i] < V, op, "id ", h[i], " at position ", i, " out of range for ", table);
  if (!sort) return plan;
  std::vector<index_t> start(static_cast<std::size_t>(V) + 1, 0);
  for (index_t i = 0; i < N; ++i) ++start[static_cast<std::size_t>(h[i]) + 1];
  index_t U = 0;
  for (index_t id = 0; id < V; ++id) {
    U += start[id + 1] > 0;
    start[id + 1] += start[id];
  }
  std::vector<index_t> host(static_cast<std::size_t>(N + 2 * U + 1));
  {
    std::vector<index_t> next(start.begin(), start.end() - 1);
    for (index_t i = 0; i < N; ++i) host[next[h[i]]++] = i;  // stable: rows in order
    index_t u = 0;
    for (index_t id = 0; id < V; ++id)
      if (start[id + 1] > start[id]) {
        host[N + u] = id;
        host[N + U + u] = start[id];
        ++u;
      }
    host[N + 2 * U] = N;
  }
  plan.layout = Tensor<index_t, 1, cuda::Device>(Shape<1>{N + 2 * U + 1}, uninitialized);
  DeviceTraits<cuda::Device>::copy_from_host(plan.layout.data(), host.data(),
                                             host.size() * sizeof(index_t));  // synchronises
  plan.unique = U;
  return plan;
}

/// A plan for n ids the caller has checked against V itself (nothing copied, nothing sorted:
/// a backward with it sorts then).
inline EmbeddingPlan embedding_plan_checked(index_t n, index_t V) {
  EmbeddingPlan plan;
  plan.n = n, plan.bound = V;
  return plan;
}

/// gtable[ids[i], :] += gout[i, :] from a plan of the ids (made with sort): one block per
/// distinct id, rows accumulated in order (deterministic, no atomics, no wait for the GPU).
template <class T>
void embedding_backward(const EmbeddingPlan& plan, NnView<const T, 2> gout, NnView<T, 2> gtable) {
  const index_t N = plan.n, V = gtable.shape()[0], C = gtable.shape()[1];
  lrt::detail::check_embedding_backward(N, gout.shape(), gtable.shape());
  check(plan.bound <= V, "embedding_backward", "ids were checked against ", plan.bound, " rows, the table ",
        gtable.shape(), " has fewer");
  if (N == 0 || C == 0) return;
  check(plan.layout.numel() == N + 2 * plan.unique + 1, "embedding_backward", "the ids' plan was made without sorting");
  const index_t U = plan.unique;
  const index_t* perm = plan.layout.data();
  launch(embedding_backward_kernel<T>, nn_blocks(U), nn_block_threads(C), 0, "embedding_backward kernel launch", U, C,
         perm, perm + N, perm + N + U, gout.data(), gout.strides()[0], gout.strides()[1], gtable.data(),
         gtable.strides()[0], gtable.strides()[1]);
}

/// gtable[ids[i], :] += gout[i, :], repeated ids accumulated in row order (deterministic:
/// the ids are sorted on the host, one block per distinct id, no atomics).
template <class T>
void embedding_backward(NnView<const index_t, 1> ids, NnView<const T, 2> gout, NnView<T, 2> gtable) {
  const index_t N = ids.shape()[0], C = gtable.shape()[1];
  lrt::detail::check_embedding_backward(N, gout.shape(), gtable.shape());
  if (N == 0 || C == 0) return;
  embedding_backward<T>(
      embedding_plan(ids, gtable.shape()[0], true, "embedding_backward", "table " + lrt::to_string(gtable.shape())),
      gout, gtable);
  // the plan's layout goes back to the caching allocator: later work runs after the kernel.
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
