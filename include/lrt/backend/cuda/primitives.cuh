// lrt/backend/cuda/primitives.cuh: device-wide primitives on lrt's stream, for kernels that need
// data sorted, counted or ranked without a round trip through the host:
//
//   cuda::sort_pairs(keys_in, keys_out, vals_in, vals_out, n, key_bits)  stable ascending by key
//   cuda::inclusive_scan(in, out, n)                                      out[i] = in[0] + ... + in[i]
//   cuda::top_k_rows(x, rows, cols, row_stride, k, values, ids)           k largest per row, descending
//
// All pointers are device memory; each call only queues work (no synchronisation, nothing copied
// to or from the host), so it may be recorded into a StepGraph. Under nvcc they are CUB's
// (cub::DeviceRadixSort::SortPairs, cub::DeviceScan::InclusiveSum,
// cub::DeviceSegmentedRadixSort::SortPairsDescending), their temporary storage from lrt's caching
// allocator (the two-phase CUB call: query the bytes, allocate, run, give back; legal during a
// graph capture, unlike cudaMalloc). Under the CPU emulator of the tests (LRT_CUDA_EMULATOR) the
// same results come from std::stable_sort and std::partial_sum in a one-thread "kernel".
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "check.cuh"
#include "device.cuh"
#include "launch.cuh"

#if defined(LRT_CUDA_EMULATOR)
#include <numeric>
#include <vector>
#else
#include <cub/cub.cuh>
#endif

namespace lrt {
inline namespace v0 {
namespace cuda {
namespace detail {

/// Device memory from the caching allocator for the life of one primitive call (given back at
/// the end of the scope: later work on the stream runs after the work that used it).
class PrimScratch {
 public:
  explicit PrimScratch(std::size_t bytes) : p_(CachingAllocator::instance().allocate(bytes)) {}
  ~PrimScratch() { CachingAllocator::instance().deallocate(p_); }
  PrimScratch(const PrimScratch&) = delete;
  PrimScratch& operator=(const PrimScratch&) = delete;
  void* get() const noexcept { return p_; }
  template <class T>
  T* as() const noexcept {
    return static_cast<T*>(p_);
  }

 private:
  void* p_;
};

/// Blocks of 256 threads for a grid-stride kernel over n items.
inline unsigned prim_blocks(index_t n) {
  return static_cast<unsigned>(std::max<index_t>(1, std::min<index_t>((n + 255) / 256, index_t{1} << 16)));
}

/// keys[r * s + j] = x[r * s + j] + 0 (-0 becomes +0: both sorts see them equal), vals = j, and
/// the segments' offsets [r * s, r * s + cols).
template <class T>
__global__ void top_k_prepare_kernel(const T* x, index_t rows, index_t cols, index_t s, T* keys, index_t* vals,
                                     int* begin, int* end) {
  const index_t n = rows * cols, step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    const index_t r = i / cols, j = i - r * cols, at = r * s + j;
    keys[at] = x[at] + T(0);
    vals[at] = j;
    if (j == 0) {
      begin[r] = static_cast<int>(r * s);
      end[r] = static_cast<int>(r * s + cols);
    }
  }
}

/// values[r, j] = keys[r * s + j], ids[r, j] = vals[r * s + j] for j < k.
template <class T>
__global__ void top_k_gather_kernel(const T* keys, const index_t* vals, index_t rows, index_t s, index_t k, T* values,
                                    index_t* ids) {
  const index_t n = rows * k, step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    const index_t r = i / k, j = i - r * k;
    values[i] = keys[r * s + j];
    ids[i] = vals[r * s + j];
  }
}

#if defined(LRT_CUDA_EMULATOR)
// The emulator's versions: one CUDA thread runs the host algorithm (device memory is host memory
// there), so that the calls are ordered on the stream and recorded by a capture like kernels.

/// The low key_bits bits of a key (the bits a radix sort over [0, key_bits) looks at).
template <class K>
K emu_key_bits(K k, int key_bits) {
  using U = std::make_unsigned_t<K>;
  const U mask = key_bits >= static_cast<int>(8 * sizeof(K)) ? ~U{0} : static_cast<U>((U{1} << key_bits) - 1);
  return static_cast<K>(static_cast<U>(k) & mask);
}

template <class K, class V>
__global__ void emu_sort_pairs_kernel(const K* ki, K* ko, const V* vi, V* vo, index_t n, int key_bits) {
  std::vector<index_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), index_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](index_t a, index_t b) { return emu_key_bits(ki[a], key_bits) < emu_key_bits(ki[b], key_bits); });
  std::vector<K> k(static_cast<std::size_t>(n));
  std::vector<V> v(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) k[i] = ki[order[i]], v[i] = vi[order[i]];
  std::copy(k.begin(), k.end(), ko);
  std::copy(v.begin(), v.end(), vo);
}

template <class X>
__global__ void emu_inclusive_scan_kernel(const X* in, X* out, index_t n) {
  std::partial_sum(in, in + n, out);
}

template <class T>
__global__ void emu_segmented_sort_desc_kernel(const T* keys, T* keys_out, const index_t* vals, index_t* vals_out,
                                               index_t rows, index_t cols, index_t s) {
  std::vector<index_t> order(static_cast<std::size_t>(cols));
  for (index_t r = 0; r < rows; ++r) {
    const T* kr = keys + r * s;
    std::iota(order.begin(), order.end(), index_t{0});
    std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) { return kr[a] > kr[b]; });
    for (index_t j = 0; j < cols; ++j) {
      keys_out[r * s + j] = kr[order[j]];
      vals_out[r * s + j] = vals[r * s + order[j]];
    }
  }
}
#endif

}  // namespace detail

/// Sorts the n pairs (keys_in[i], vals_in[i]) by key, ascending and stable (equal keys keep their
/// order), into keys_out / vals_out (neither may overlap an input). Keys are unsigned or
/// non-negative integers below 2^key_bits: only the bits [0, key_bits) are compared (fewer bits,
/// fewer radix passes). Queued on lrt's stream; no wait.
template <class K, class V>
void sort_pairs(const K* keys_in, K* keys_out, const V* vals_in, V* vals_out, index_t n, int key_bits) {
  static_assert(std::is_integral_v<K> && !std::is_same_v<K, bool>, "sort_pairs: keys are integers");
  check(n >= 0, "sort_pairs", "n must be >= 0, got ", n);
  check(key_bits >= 1 && key_bits <= static_cast<int>(8 * sizeof(K)), "sort_pairs", "key_bits must be in [1, ",
        8 * sizeof(K), "], got ", key_bits);
  if (n == 0) return;
#if defined(LRT_CUDA_EMULATOR)
  detail::launch(detail::emu_sort_pairs_kernel<K, V>, 1, 1, 0, "sort_pairs launch", keys_in, keys_out, vals_in,
                 vals_out, n, key_bits);
#else
  std::size_t bytes = 0;
  LRT_CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, vals_in, vals_out, n, 0, key_bits, stream()));
  detail::PrimScratch tmp(std::max<std::size_t>(bytes, 1));
  LRT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.get(), bytes, keys_in, keys_out, vals_in, vals_out, n, 0, key_bits,
                                                 stream()));
#endif
}

/// out[i] = in[0] + ... + in[i] for i < n (integers; out may be in). Queued on lrt's stream.
template <class X>
void inclusive_scan(const X* in, X* out, index_t n) {
  static_assert(std::is_integral_v<X>, "inclusive_scan: integer sums (exact in any order)");
  check(n >= 0, "inclusive_scan", "n must be >= 0, got ", n);
  if (n == 0) return;
#if defined(LRT_CUDA_EMULATOR)
  detail::launch(detail::emu_inclusive_scan_kernel<X>, 1, 1, 0, "inclusive_scan launch", in, out, n);
#else
  std::size_t bytes = 0;
  LRT_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, in, out, n, stream()));
  detail::PrimScratch tmp(std::max<std::size_t>(bytes, 1));
  LRT_CUDA_CHECK(cub::DeviceScan::InclusiveSum(tmp.get(), bytes, in, out, n, stream()));
#endif
}

/// For each of the rows of x (element (r, j) at x[r * row_stride + j], j < cols) its k largest
/// values in descending order, ties to the lower column: values[r * k + i] and their columns
/// ids[r * k + i], i < k. -0 and +0 are equal (and come back as +0); x must hold no NaN. A full
/// stable sort of every row (k = cols gives the whole order). Queued on lrt's stream; no wait.
template <class T>
void top_k_rows(const T* x, index_t rows, index_t cols, index_t row_stride, index_t k, T* values, index_t* ids) {
  static_assert(std::is_floating_point_v<T>, "top_k_rows: float or double rows");
  check(rows >= 0 && cols >= 0 && k >= 0 && k <= cols, "top_k_rows", "k = ", k, " of ", rows, " rows of ", cols,
        " columns: needs 0 <= k <= cols");
  check(rows <= 1 || row_stride >= cols, "top_k_rows", "row stride ", row_stride, " is less than the ", cols,
        " columns");
  if (rows == 0 || cols == 0 || k == 0) return;
  const index_t s = rows == 1 ? cols : row_stride, extent = (rows - 1) * s + cols;
  check(extent <= std::numeric_limits<int>::max(), "top_k_rows", rows, " rows of stride ", s,
        " span more than 2^31 - 1 elements");
  detail::PrimScratch keys(sizeof(T) * extent), keys_out(sizeof(T) * extent), vals(sizeof(index_t) * extent),
      vals_out(sizeof(index_t) * extent), offsets(sizeof(int) * 2 * rows);
  int* begin = offsets.as<int>();
  int* end = begin + rows;
  detail::launch(detail::top_k_prepare_kernel<T>, detail::prim_blocks(rows * cols), 256, 0,
                 "top_k_rows prepare kernel launch", x, rows, cols, s, keys.as<T>(), vals.as<index_t>(), begin, end);
#if defined(LRT_CUDA_EMULATOR)
  detail::launch(detail::emu_segmented_sort_desc_kernel<T>, 1, 1, 0, "top_k_rows sort launch", keys.as<T>(),
                 keys_out.as<T>(), vals.as<index_t>(), vals_out.as<index_t>(), rows, cols, s);
#else
  std::size_t bytes = 0;
  LRT_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, bytes, keys.as<T>(), keys_out.as<T>(), vals.as<index_t>(), vals_out.as<index_t>(),
      static_cast<int>(extent), static_cast<int>(rows), begin, end, 0, static_cast<int>(8 * sizeof(T)), stream()));
  detail::PrimScratch tmp(std::max<std::size_t>(bytes, 1));
  LRT_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      tmp.get(), bytes, keys.as<T>(), keys_out.as<T>(), vals.as<index_t>(), vals_out.as<index_t>(),
      static_cast<int>(extent), static_cast<int>(rows), begin, end, 0, static_cast<int>(8 * sizeof(T)), stream()));
#endif
  detail::launch(detail::top_k_gather_kernel<T>, detail::prim_blocks(rows * k), 256, 0,
                 "top_k_rows gather kernel launch", keys_out.as<T>(), vals_out.as<index_t>(), rows, s, k, values, ids);
}

}  // namespace cuda
}  // namespace v0
}  // namespace lrt
