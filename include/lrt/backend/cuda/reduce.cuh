// lrt/backend/cuda/reduce.cuh: Reducer<cuda::Device>, reductions over one axis on the GPU.
//
// One block reduces one output element: each thread folds a strided subset of the axis in
// order, then the block combines the threads' results in a fixed shared-memory tree. When
// there are few outputs and a long axis, the axis is also split into chunks (one block each)
// whose partial results a second kernel combines the same way. Block size and chunking depend
// only on the shapes (never on the GPU model or on timing), so results are deterministic.
// Semantics match backend/cpu/reduce.hpp: Sum in the element type (floating-point sums are
// deterministic but may differ from the CPU's pairwise order in the last bits); Max/Min
// propagate NaN; ArgMax/ArgMin return the first extremal index, a NaN counting as extremal
// (the first NaN wins). Not here: fused multi-axis reductions, warp-shuffle tuning.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../../tensor/reduce.hpp"
#include "device.cuh"
#include "launch.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

/// Most threads per reduction block (a power of two; the shared arrays are this long).
inline constexpr int reduce_threads = 256;
/// Blocks a reduction aims for when it splits long axes (a constant, not the GPU's SM count:
/// results must not depend on the GPU model).
inline constexpr index_t reduce_target_blocks = 1024;
/// Least elements per thread before an axis is split into chunks.
inline constexpr index_t reduce_min_per_thread = 16;

/// A partial result: value, and its index on the reduced axis (-1: no element yet).
template <class T>
struct RedVal {
  T v;
  index_t i;
};

template <class T>
__host__ __device__ inline bool red_is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

/// Combines two partial results. For extrema this picks the least element of a total order
/// (NaN first, then the extremal value, then the lower index), so any combination order gives
/// the result of the CPU's first-index scan.
template <ReduceOp Op, class T>
__host__ __device__ inline RedVal<T> red_combine(const RedVal<T>& a, const RedVal<T>& b) {
  if constexpr (Op == ReduceOp::Sum) {
    return {static_cast<T>(a.v + b.v), 0};
  } else {
    constexpr bool mx = Op == ReduceOp::Max || Op == ReduceOp::ArgMax;
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool na = red_is_nan(a.v), nb = red_is_nan(b.v);
    if (na || nb) {
      if (na && nb) return a.i <= b.i ? a : b;
      return na ? a : b;
    }
    if (mx ? (b.v > a.v) : (b.v < a.v)) return b;
    if (mx ? (a.v > b.v) : (a.v < b.v)) return a;
    return a.i <= b.i ? a : b;
  }
}

template <ReduceOp Op, class T>
__host__ __device__ inline RedVal<T> red_identity() {
  return {T(0), Op == ReduceOp::Sum ? 0 : -1};
}

/// Reduces the threads' values in a fixed tree; thread 0 gets the block's result.
/// blockDim.x must be a power of two <= reduce_threads. Ends with a barrier.
template <ReduceOp Op, class T>
__device__ inline RedVal<T> block_reduce(RedVal<T> acc, T* sv, index_t* si) {
  const int t = threadIdx.x;
  sv[t] = acc.v;
  si[t] = acc.i;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (t < w) {
      const RedVal<T> r = red_combine<Op>(RedVal<T>{sv[t], si[t]}, RedVal<T>{sv[t + w], si[t + w]});
      sv[t] = r.v;
      si[t] = r.i;
    }
    __syncthreads();
  }
  const RedVal<T> r{sv[0], si[0]};
  __syncthreads();  // the arrays are reused by the caller's next output
  return r;
}

template <ReduceOp Op, class T, class U>
__device__ inline void red_store(U* out, const RedVal<T>& r) {
  if constexpr (Op == ReduceOp::ArgMax || Op == ReduceOp::ArgMin) {
    *out = static_cast<U>(r.i);
  } else {
    *out = static_cast<U>(r.v);
  }
}

/// First pass: block (o, c) reduces chunk c (elements [c*chunk, (c+1)*chunk) of the axis) of
/// output o. With one chunk it writes the output; otherwise the partial (pv, pi)[o*chunks + c].
template <ReduceOp Op, class T, class U, int Rk>
__global__ void __launch_bounds__(reduce_threads)
    reduce_axis_kernel(const T* in, Shape<Rk> os, Strides<Rk> ist, index_t n, index_t s, index_t chunk, index_t nout,
                       U* out, Strides<Rk> ost, T* pv, index_t* pi) {
  __shared__ T sv[reduce_threads];
  __shared__ index_t si[reduce_threads];
  const index_t c = blockIdx.y, chunks = gridDim.y;
  const index_t j0 = c * chunk, j1 = j0 + chunk < n ? j0 + chunk : n;
  for (index_t o = blockIdx.x; o < nout; o += gridDim.x) {
    const Index<Rk> idx = unravel(o, os);
    index_t ioff = 0, ooff = 0;
    for (int k = 0; k < Rk; ++k) {
      ioff += idx[k] * ist[k];
      ooff += idx[k] * ost[k];
    }
    const T* p = in + ioff;
    RedVal<T> acc = red_identity<Op, T>();
    for (index_t j = j0 + threadIdx.x; j < j1; j += blockDim.x) acc = red_combine<Op>(acc, RedVal<T>{p[j * s], j});
    const RedVal<T> r = block_reduce<Op>(acc, sv, si);
    if (threadIdx.x == 0) {
      if (chunks == 1) {
        red_store<Op>(out + ooff, r);
      } else {
        pv[o * chunks + c] = r.v;
        pi[o * chunks + c] = r.i;
      }
    }
  }
}

/// Second pass: block o combines the `chunks` partials of output o.
template <ReduceOp Op, class T, class U, int Rk>
__global__ void __launch_bounds__(reduce_threads)
    reduce_partials_kernel(const T* pv, const index_t* pi, index_t chunks, Shape<Rk> os, index_t nout, U* out,
                           Strides<Rk> ost) {
  __shared__ T sv[reduce_threads];
  __shared__ index_t si[reduce_threads];
  for (index_t o = blockIdx.x; o < nout; o += gridDim.x) {
    const Index<Rk> idx = unravel(o, os);
    index_t ooff = 0;
    for (int k = 0; k < Rk; ++k) ooff += idx[k] * ost[k];
    RedVal<T> acc = red_identity<Op, T>();
    for (index_t c = threadIdx.x; c < chunks; c += blockDim.x)
      acc = red_combine<Op>(acc, RedVal<T>{pv[o * chunks + c], pi[o * chunks + c]});
    const RedVal<T> r = block_reduce<Op>(acc, sv, si);
    if (threadIdx.x == 0) red_store<Op>(out + ooff, r);
  }
}

/// Threads for a block folding m values: a power of two in [32, reduce_threads].
inline int reduce_block_threads(index_t m) {
  int t = 32;
  while (t < reduce_threads && t < m) t *= 2;
  return t;
}

/// How a reduction of nout outputs over an axis of n elements is laid out: `threads` per
/// block, the axis cut into `chunks` pieces of `chunk` elements (the last may be shorter, none
/// is empty). A function of (n, nout) only.
struct ReducePlan {
  int threads;
  index_t chunks, chunk;
};
inline ReducePlan reduce_plan(index_t n, index_t nout) {
  ReducePlan p{reduce_block_threads(n), 1, std::max<index_t>(n, 1)};
  const index_t per_block = index_t{p.threads} * reduce_min_per_thread;
  if (nout < reduce_target_blocks && n > per_block) {
    const index_t by_work = (n + per_block - 1) / per_block;
    const index_t by_blocks = (reduce_target_blocks + nout - 1) / nout;
    p.chunks = std::min<index_t>({by_work, by_blocks, 65535});
    p.chunk = (n + p.chunks - 1) / p.chunks;
    p.chunks = (n + p.chunk - 1) / p.chunk;
  }
  return p;
}

/// Scratch memory from the caching allocator, returned when it goes out of scope (safe right
/// after the launches: later work on the one stream runs after them).
template <class T>
struct Scratch {
  T* p = nullptr;
  std::size_t bytes = 0;
  explicit Scratch(index_t n) : bytes(static_cast<std::size_t>(n) * sizeof(T)) {
    p = static_cast<T*>(DeviceTraits<cuda::Device>::allocate(bytes));
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { DeviceTraits<cuda::Device>::deallocate(p, bytes); }
};

}  // namespace cuda::detail

template <>
struct Reducer<cuda::Device> {
  template <ReduceOp Op, class T, int R, class U>
  static void reduce_axis(const TensorView<const T, R, cuda::Device>& in, int axis,
                          const TensorView<U, R - 1, cuda::Device>& out) {
    namespace cd = cuda::detail;
    constexpr int Rk = R - 1;
    const index_t n = in.shape()[axis], s = in.strides()[axis];
    const Shape<Rk> os = out.shape();
    Strides<Rk> ist;  // input strides of the kept axes
    for (int k = 0, j = 0; k < R; ++k)
      if (k != axis) ist[j++] = in.strides()[k];
    const index_t nout = os.numel();
    if (nout == 0) return;

    const cd::ReducePlan plan = cd::reduce_plan(n, nout);
    const int threads = plan.threads;
    const index_t chunks = plan.chunks, chunk = plan.chunk;
    const unsigned gx = static_cast<unsigned>(std::min<index_t>(nout, index_t{1} << 20));
    if (chunks == 1) {
      cd::launch(cd::reduce_axis_kernel<Op, T, U, Rk>, dim3(gx, 1), dim3(threads), 0, "reduction kernel launch",
                 in.data(), os, ist, n, s, chunk, nout, out.data(), out.strides(), static_cast<T*>(nullptr),
                 static_cast<index_t*>(nullptr));
      return;
    }
    cd::Scratch<T> pv(nout * chunks);
    cd::Scratch<index_t> pi(nout * chunks);
    const dim3 grid(gx, static_cast<unsigned>(chunks));
    cd::launch(cd::reduce_axis_kernel<Op, T, U, Rk>, grid, dim3(threads), 0, "reduction kernel launch", in.data(), os,
               ist, n, s, chunk, nout, out.data(), out.strides(), pv.p, pi.p);
    cd::launch(cd::reduce_partials_kernel<Op, T, U, Rk>, dim3(gx),
               dim3(static_cast<unsigned>(cd::reduce_block_threads(chunks))), 0, "reduction kernel launch (partials)",
               pv.p, pi.p, chunks, os, nout, out.data(), out.strides());
  }
};

}  // namespace v0
}  // namespace lrt
