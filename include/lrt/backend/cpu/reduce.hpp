// lrt/backend/cpu/reduce.hpp: CPU reduction kernels (pairwise float sums, NaN-aware extrema),
// parallel over output elements; results do not depend on the thread count.
#pragma once

#include <cmath>
#include <vector>

#include "../../tensor/reduce.hpp"
#include "device.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu::detail {

/// Pairwise summation of n elements at stride s: blocks of 64 summed with 4 accumulators,
/// blocks combined as a balanced tree.
template <class T>
T pairwise_sum(const T* p, index_t n, index_t s) {
  if constexpr (!std::is_floating_point_v<T>) {
    T acc = 0;
    for (index_t i = 0; i < n; ++i) acc += p[i * s];
    return acc;
  } else {
    if (n <= 64) {
      T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      index_t i = 0;
      for (; i + 4 <= n; i += 4) {
        a0 += p[i * s];
        a1 += p[(i + 1) * s];
        a2 += p[(i + 2) * s];
        a3 += p[(i + 3) * s];
      }
      T r = (a0 + a1) + (a2 + a3);
      for (; i < n; ++i) r += p[i * s];
      return r;
    }
    const index_t h = ((n / 2) + 63) / 64 * 64;  // split on a block boundary
    return pairwise_sum(p, h, s) + pairwise_sum(p + h * s, n - h, s);
  }
}

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

/// Index of the first extremal element (Max: largest) at stride s; a NaN wins at once.
template <bool Max, class T>
index_t arg_extreme(const T* p, index_t n, index_t s) {
  index_t best = 0;
  T bv = p[0];
  if (is_nan(bv)) return 0;
  for (index_t i = 1; i < n; ++i) {
    const T x = p[i * s];
    if (is_nan(x)) return i;
    if (Max ? (x > bv) : (x < bv)) {
      bv = x;
      best = i;
    }
  }
  return best;
}

}  // namespace cpu::detail

template <>
struct Reducer<cpu::Device> {
  /// Elements reduced per task below which the loop stays on one thread.
  static constexpr index_t grain = index_t{1} << 15;
  /// Block size of the parallel first level of a long single reduction.
  static constexpr index_t block = index_t{1} << 16;

  template <ReduceOp Op, class T, int R, class U>
  static void reduce_axis(const TensorView<const T, R, cpu::Device>& in, int axis,
                          const TensorView<U, R - 1, cpu::Device>& out) {
    const index_t n = in.shape()[axis], s = in.strides()[axis];
    Shape<R - 1> os = out.shape();
    Strides<R - 1> ist;  // input strides of the kept axes
    for (int k = 0, j = 0; k < R; ++k)
      if (k != axis) ist[j++] = in.strides()[k];
    const index_t nout = os.numel();
    if constexpr (Op == ReduceOp::Sum && std::is_floating_point_v<T>) {
      if (nout == 1 && n > 2 * block) {  // one long sum: fixed blocks in parallel, then a tree
        const index_t nb = (n + block - 1) / block;
        std::vector<T> part(static_cast<std::size_t>(nb));
        parallel_for(nb, 1, [&](index_t b, index_t e) {
          for (index_t i = b; i < e; ++i)
            part[i] = cpu::detail::pairwise_sum(in.data() + i * block * s, std::min(block, n - i * block), s);
        });
        *out.data() = cpu::detail::pairwise_sum(part.data(), nb, 1);
        return;
      }
    }
    parallel_for(nout, std::max<index_t>(1, grain / std::max<index_t>(n, 1)), [&](index_t b, index_t e) {
      for (index_t o = b; o < e; ++o) {
        const Index<R - 1> idx = unravel(o, os);
        index_t ioff = 0, ooff = 0;
        for (int k = 0; k < R - 1; ++k) {
          ioff += idx[k] * ist[k];
          ooff += idx[k] * out.strides()[k];
        }
        const T* p = in.data() + ioff;
        U& dst = out.data()[ooff];
        if constexpr (Op == ReduceOp::Sum) {
          dst = cpu::detail::pairwise_sum(p, n, s);
        } else if constexpr (Op == ReduceOp::ArgMax) {
          dst = cpu::detail::arg_extreme<true>(p, n, s);
        } else if constexpr (Op == ReduceOp::ArgMin) {
          dst = cpu::detail::arg_extreme<false>(p, n, s);
        } else {
          dst = p[cpu::detail::arg_extreme<Op == ReduceOp::Max>(p, n, s) * s];
        }
      }
    });
  }
};

}  // namespace v0
}  // namespace lrt
