// lrt/backend/cuda/embedding.cuh: embedding lookups on the GPU and their backward without
// atomics: the ids are checked and sorted on the device (rows grouped by id, in increasing row
// order: sort_pairs, then the runs of equal ids by a mark kernel and inclusive_scan) into an
// EmbeddingPlan, with no wait for the GPU; one block per distinct id then adds its rows into the
// table's gradient in row order, as the CPU does (deterministic). An id out of range is reported
// at the host's next wait (DeferredChecks in device.cuh); the kernels never read out of range.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "../../tensor/tensor.hpp"
#include "../nn_checks.hpp"
#include "device.cuh"
#include "launch.cuh"
#include "nn_common.cuh"
#include "primitives.cuh"

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

/// Finds the first position i < N whose id is outside [0, V) (one block, a min-reduction) and
/// records it for the host's next wait (DeferredChecks); nothing when all are in range.
template <int = 0>  // a template: defined in every translation unit that includes this header
__global__ void __launch_bounds__(nn_row_threads)
    embedding_check_kernel(index_t N, index_t V, const index_t* ids, index_t is, DeviceCheckSlot* slot, int what) {
  __shared__ index_t first[nn_row_threads];
  index_t f = N;
  for (index_t i = threadIdx.x; i < N && f == N; i += blockDim.x) {
    const index_t id = ids[i * is];
    if (id < 0 || id >= V) f = i;
  }
  first[threadIdx.x] = f;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w && first[threadIdx.x + w] < first[threadIdx.x]) first[threadIdx.x] = first[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0 && first[0] < N) device_check_fail(slot, what, first[0], ids[first[0] * is]);
}

/// The sort's input: key = id (V for an id out of range: those rows sort last and are skipped),
/// value = row.
template <int = 0>  // a template: defined in every translation unit that includes this header
__global__ void embedding_keys_kernel(index_t N, index_t V, const index_t* ids, index_t is, index_t* keys,
                                      index_t* rows) {
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < N; i += step) {
    const index_t id = ids[i * is];
    keys[i] = id >= 0 && id < V ? id : V;
    rows[i] = i;
  }
}

/// mark[k] = 1 where a run of equal sorted keys starts.
template <int = 0>  // a template: defined in every translation unit that includes this header
__global__ void embedding_mark_kernel(index_t N, const index_t* skeys, index_t* mark) {
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t k = index_t{blockIdx.x} * blockDim.x + threadIdx.x; k < N; k += step)
    mark[k] = k == 0 || skeys[k] != skeys[k - 1];
}

/// From the runs' numbers (the inclusive scan of the marks, 1-based): seg_id[u] and seg_start[u]
/// of run u, seg_start[U] = N and *unique = U.
template <int = 0>  // a template: defined in every translation unit that includes this header
__global__ void embedding_runs_kernel(index_t N, const index_t* skeys, const index_t* run, index_t* seg_id,
                                      index_t* seg_start, index_t* unique) {
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t k = index_t{blockIdx.x} * blockDim.x + threadIdx.x; k < N; k += step) {
    if (k == 0 || skeys[k] != skeys[k - 1]) {
      seg_id[run[k] - 1] = skeys[k];
      seg_start[run[k] - 1] = k;
    }
    if (k == N - 1) {
      seg_start[run[k]] = N;
      *unique = run[k];
    }
  }
}

/// Block u adds the rows perm[start[u] .. start[u+1]) of gout (all with id seg_id[u], in
/// increasing row order) into gtable[seg_id[u], :], one running sum per channel. The number of
/// runs U is read from the device (*unique); the grid is sized by a bound. The run of ids out of
/// range (id == bound) is skipped.
template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    embedding_backward_kernel(const index_t* unique, index_t bound, index_t C, const index_t* perm,
                              const index_t* seg_id, const index_t* seg_start, const T* gout, index_t gs0, index_t gs1,
                              T* gt, index_t ts0, index_t ts1) {
  const index_t U = *unique;
  for (index_t u = blockIdx.x; u < U; u += gridDim.x) {
    const index_t id = seg_id[u], k0 = seg_start[u], k1 = seg_start[u + 1];
    if (id >= bound) continue;
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

/// out[i, :] = table[ids[i], :] (ids validated by the caller or a plan; an id out of range gives
/// a zero row here, never an out-of-bounds read).
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
/// as [perm (N) | seg_id (N) | seg_start (N + 1) | U (1)], of which the first U runs (U distinct
/// ids, a number only the device knows) are used. Empty when made without sorting.
struct EmbeddingPlan {
  Tensor<index_t, 1, cuda::Device> layout;
  index_t n = 0, bound = 0;  // ids checked to lie in [0, bound)
};

/// Checks 0 <= id < V on the device (as the CPU kernels do, but without waiting: the first id
/// out of range is raised as lrt::Error(op, "id <id> at position <i> out of range for <table>")
/// at the host's next wait for the device, see DeferredChecks) and, when sort is set, sorts the
/// rows by id on the device (sort_pairs: rows of one id stay in increasing order) and finds the
/// runs of equal ids (a mark per run start, inclusive_scan). Queues work only: no wait, no copy.
inline EmbeddingPlan embedding_plan(NnView<const index_t, 1> ids, index_t V, bool sort, const char* op,
                                    const std::string& table) {
  const index_t N = ids.shape()[0], is = ids.strides()[0];
  EmbeddingPlan plan;
  plan.n = N, plan.bound = V;
  if (N == 0) return plan;
  auto& checks = DeferredChecks::instance();
  launch(embedding_check_kernel<>, 1, nn_row_threads, 0, "embedding check kernel launch", N, V, ids.data(), is,
         checks.slot(), checks.describe(op, "id", table));
  if (!sort) return plan;
  using Buf = Tensor<index_t, 1, cuda::Device>;
  plan.layout = Buf(Shape<1>{3 * N + 2}, uninitialized);
  index_t* perm = plan.layout.data();
  index_t *seg_id = perm + N, *seg_start = perm + 2 * N, *unique = perm + 3 * N + 1;
  Buf keys(Shape<1>{N}, uninitialized), skeys(Shape<1>{N}, uninitialized), rows(Shape<1>{N}, uninitialized),
      run(Shape<1>{N}, uninitialized);
  const unsigned blocks = prim_blocks(N);
  launch(embedding_keys_kernel<>, blocks, 256, 0, "embedding keys kernel launch", N, V, ids.data(), is, keys.data(),
         rows.data());
  const int bits = std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(std::max<index_t>(V, 0)))));
  sort_pairs(keys.data(), skeys.data(), rows.data(), perm, N, bits);  // keys in [0, V]
  launch(embedding_mark_kernel<>, blocks, 256, 0, "embedding mark kernel launch", N, skeys.data(), run.data());
  inclusive_scan(run.data(), run.data(), N);
  launch(embedding_runs_kernel<>, blocks, 256, 0, "embedding runs kernel launch", N, skeys.data(), run.data(), seg_id,
         seg_start, unique);
  return plan;  // the scratch goes back to the caching allocator: later work runs after the kernels
}

/// A plan for n ids the caller has checked against V itself (nothing checked, nothing sorted:
/// a backward with it sorts then).
inline EmbeddingPlan embedding_plan_checked(index_t n, index_t V) {
  EmbeddingPlan plan;
  plan.n = n, plan.bound = V;
  return plan;
}

/// gtable[ids[i], :] += gout[i, :] from a plan of the ids (made with sort): one block per
/// distinct id, rows accumulated in order (deterministic, no atomics, no wait for the GPU). Rows
/// whose id was out of range add nothing (their error comes at the next wait).
template <class T>
void embedding_backward(const EmbeddingPlan& plan, NnView<const T, 2> gout, NnView<T, 2> gtable) {
  const index_t N = plan.n, V = gtable.shape()[0], C = gtable.shape()[1];
  lrt::detail::check_embedding_backward(N, gout.shape(), gtable.shape());
  check(plan.bound <= V, "embedding_backward", "ids were checked against ", plan.bound, " rows, the table ",
        gtable.shape(), " has fewer");
  if (N == 0 || C == 0) return;
  check(plan.layout.numel() == 3 * N + 2, "embedding_backward", "the ids' plan was made without sorting");
  const index_t* perm = plan.layout.data();
  launch(embedding_backward_kernel<T>, nn_blocks(std::min(N, plan.bound + 1)), nn_block_threads(C), 0,
         "embedding_backward kernel launch", perm + 3 * N + 1, plan.bound, C, perm, perm + N, perm + 2 * N, gout.data(),
         gout.strides()[0], gout.strides()[1], gtable.data(), gtable.strides()[0], gtable.strides()[1]);
}

/// gtable[ids[i], :] += gout[i, :], repeated ids accumulated in row order (deterministic: the
/// ids are sorted on the device, one block per distinct id, no atomics, no wait; an id out of
/// range adds nothing and is raised at the next wait).
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
