// lrt/backend/cuda/sample.cuh: the sampler of spec §6 on the GPU (DeviceSampler<cuda::Device>,
// behind lrt::sample_tokens): one block per row of logits. Greedy is a block argmax (ties to the
// lowest id, as the CPU). Otherwise, when top-k or top-p needs an order, the rows are sorted on
// the device first (top_k_rows: descending, ties to the lower id); the block then keeps the
// values >= the k-th largest, takes the softmax of x / T in double, cuts the top-p prefix (the
// first sorted position whose running mass reaches p; a column is kept when it sorts before or
// at it), renormalises, and picks the first id in ascending order whose running mass exceeds the
// Philox draw u = unit_float(Philox::generate(seed, counter).v[0]). Sums run per thread over a
// contiguous chunk, then over the chunks in order: another order than the CPU's sequential one,
// so a seeded draw can differ from sample_token's when u lies within rounding of a boundary (the
// contract is in decode/sampler.hpp). Only the B ids are copied back (one wait).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "../../core/error.hpp"
#include "../../tensor/random.hpp"
#include "../../tensor/tensor.hpp"
#include "../sampler.hpp"
#include "device.cuh"
#include "launch.cuh"
#include "primitives.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

inline constexpr int sample_threads = 256;

/// Row blockIdx.x of x (V columns used, row stride xs): its token into out[row]. sv / sid: the
/// row's values sorted descending and their columns (row stride ss), or null when neither top-k
/// nor top-p is active.
template <class T>
__global__ void __launch_bounds__(sample_threads)
    sample_rows_kernel(index_t V, const T* x, index_t xs, const T* sv, const index_t* sid, index_t ss,
                       double temperature, index_t top_k, double top_p, std::uint64_t seed,
                       const std::uint64_t* counters, index_t* out) {
  __shared__ double part[sample_threads], cumv[sample_threads];
  __shared__ index_t at[sample_threads], last[sample_threads];
  __shared__ double sh[3];  // mx, sum, top-p mass
  __shared__ index_t shi[1];
  const index_t r = blockIdx.x;
  const unsigned t = threadIdx.x, nt = blockDim.x;
  const T* xr = x + r * xs;
  const double inf = std::numeric_limits<double>::infinity();
  if (temperature == 0) {  // argmax, ties to the lowest id (a total order: any tree gives it)
    double best = -inf;
    index_t bi = V;
    for (index_t j = t; j < V; j += nt) {
      const double v = static_cast<double>(xr[j]);
      if (bi == V || v > best) best = v, bi = j;
    }
    part[t] = best, at[t] = bi;
    __syncthreads();
    for (unsigned w = nt / 2; w > 0; w /= 2) {
      if (t < w) {
        const index_t oi = at[t + w];
        const double ov = part[t + w];
        if (oi != V && (at[t] == V || ov > part[t] || (ov == part[t] && oi < at[t]))) part[t] = ov, at[t] = oi;
      }
      __syncthreads();
    }
    if (t == 0) out[r] = at[0] == V ? 0 : at[0];
    return;
  }
  const double T_ = temperature;
  const bool use_k = top_k > 0 && top_k < V, use_p = top_p < 1;
  const double kth = use_k ? static_cast<double>(sv[r * ss + top_k - 1]) : -inf;
  // mx: the largest x / T (the largest x is always kept).
  double m = -inf;
  for (index_t j = t; j < V; j += nt) m = ::fmax(m, static_cast<double>(xr[j]) / T_);
  part[t] = m;
  __syncthreads();
  for (unsigned w = nt / 2; w > 0; w /= 2) {
    if (t < w) part[t] = ::fmax(part[t], part[t + w]);
    __syncthreads();
  }
  const double mx = part[0];
  __syncthreads();
  const index_t L = (V + nt - 1) / nt, j0 = t * L < V ? t * L : V, j1 = j0 + L < V ? j0 + L : V;
  // sum of exp(x / T - mx) over the kept values: per thread over its chunk, then the chunks in order.
  double s = 0;
  for (index_t j = j0; j < j1; ++j) {
    const double v = static_cast<double>(xr[j]);
    if (v >= kth) s += ::exp(v / T_ - mx);
  }
  part[t] = s;
  __syncthreads();
  if (t == 0) {
    double tot = 0;
    for (unsigned i = 0; i < nt; ++i) tot += part[i];
    sh[1] = tot;
  }
  __syncthreads();
  const double sum = sh[1];
  // top-p: the first sorted position i whose running mass reaches p; kept: sorted at or before i.
  double thr_v = -inf, mass = 1;
  index_t thr_id = V;
  if (use_p) {
    const T* svr = sv + r * ss;
    const index_t* sir = sid + r * ss;
    s = 0;
    for (index_t i = j0; i < j1; ++i) {
      const double v = static_cast<double>(svr[i]);
      s += v >= kth ? ::exp(v / T_ - mx) / sum : 0.0;
    }
    part[t] = s;
    __syncthreads();
    if (t == 0) {  // exclusive prefix of the chunks; the total
      double c = 0;
      for (unsigned i = 0; i < nt; ++i) {
        const double p = part[i];
        part[i] = c;
        c += p;
      }
      sh[2] = c;
    }
    __syncthreads();
    double c = part[t];
    index_t found = V;
    for (index_t i = j0; i < j1; ++i) {
      const double v = static_cast<double>(svr[i]);
      c += v >= kth ? ::exp(v / T_ - mx) / sum : 0.0;
      if (c >= top_p) {
        found = i;
        break;
      }
    }
    at[t] = found, cumv[t] = c;
    __syncthreads();
    if (t == 0) {
      index_t keep = V - 1;
      double cm = sh[2];
      for (unsigned i = 0; i < nt; ++i)
        if (at[i] != V) {
          keep = at[i], cm = cumv[i];
          break;
        }
      sh[2] = cm;
      shi[0] = keep;
    }
    __syncthreads();
    thr_v = static_cast<double>(svr[shi[0]]);
    thr_id = sir[shi[0]];
    mass = sh[2];
    __syncthreads();
  }
  // The draw: the first id (ascending) with p > 0 whose running mass exceeds u.
  const double u = lrt::unit_float(Philox::generate(seed, counters[r]).v[0]);
  const auto prob = [&](index_t j) {
    const double v = static_cast<double>(xr[j]);
    if (!(v >= kth) || (use_p && !(v > thr_v || (v == thr_v && j <= thr_id)))) return 0.0;
    const double p = ::exp(v / T_ - mx) / sum;
    return use_p ? p / mass : p;
  };
  s = 0;
  for (index_t j = j0; j < j1; ++j) s += prob(j);
  part[t] = s;
  __syncthreads();
  if (t == 0) {
    double c = 0;
    for (unsigned i = 0; i < nt; ++i) {
      const double p = part[i];
      part[i] = c;
      c += p;
    }
  }
  __syncthreads();
  double c = part[t];
  index_t found = V, lj = -1;
  for (index_t j = j0; j < j1; ++j) {
    const double p = prob(j);
    if (p <= 0) continue;
    lj = j;
    c += p;
    if (u < c) {
      found = j;
      break;
    }
  }
  at[t] = found, last[t] = lj;
  __syncthreads();
  if (t == 0) {
    index_t pick = -1;
    for (unsigned i = 0; i < nt && pick < 0; ++i)
      if (at[i] != V) pick = at[i];
    if (pick < 0) {  // rounding left u above the total: the last kept id
      pick = 0;
      for (unsigned i = 0; i < nt; ++i) pick = last[i] > pick ? last[i] : pick;
    }
    out[r] = pick;
  }
}

}  // namespace cuda::detail

/// lrt::sample_tokens on the GPU (see the top of this file).
template <>
struct DeviceSampler<cuda::Device> {
  template <class T>
  static std::vector<index_t> sample(const Tensor<T, 2, cuda::Device>& logits, index_t vocab, const SamplerOptions& o,
                                     std::span<const std::uint64_t> counters) {
    static_assert(std::is_floating_point_v<T>, "sample: float or double logits");
    const index_t B = logits.shape()[0];
    const index_t xs = logits.strides()[0];
    check(logits.strides()[1] == 1 || vocab == 1, "sample", "logits ", logits.shape(),
          " need contiguous rows (column stride 1) on the GPU");
    std::vector<index_t> out(static_cast<std::size_t>(B));
    if (B == 0) return out;
    using Traits = DeviceTraits<cuda::Device>;
    cuda::detail::PrimScratch ctr(sizeof(std::uint64_t) * B), ids(sizeof(index_t) * B);
    Traits::copy_from_host(ctr.get(), counters.data(), sizeof(std::uint64_t) * B);  // pageable: no wait
    const bool sorted = o.temperature > 0 && ((o.top_k > 0 && o.top_k < vocab) || o.top_p < 1);
    cuda::detail::PrimScratch sv(sorted ? sizeof(T) * B * vocab : 0), sid(sorted ? sizeof(index_t) * B * vocab : 0);
    if (sorted) cuda::top_k_rows<T>(logits.data(), B, vocab, xs, vocab, sv.as<T>(), sid.as<index_t>());
    cuda::detail::launch(cuda::detail::sample_rows_kernel<T>, static_cast<unsigned>(B), cuda::detail::sample_threads, 0,
                         "sample kernel launch", vocab, logits.data(), xs, sv.as<T>(), sid.as<index_t>(), vocab,
                         o.temperature, o.top_k, o.top_p, o.seed, ctr.as<std::uint64_t>(), ids.as<index_t>());
    Traits::copy_to_host(out.data(), ids.get(), sizeof(index_t) * B);  // the one wait
    return out;
  }
};

}  // namespace v0
}  // namespace lrt
