// lrt/backend/cpu/device.hpp: host memory (64-byte aligned, cached: allocator.hpp) and the elementwise executor that
// runs an expression's evaluator over the destination on lrt's thread pool.
#pragma once

#include <cstring>
#include <new>

#include "../../core/thread_pool.hpp"
#include "allocator.hpp"
#include "../../tensor/expr_base.hpp"

namespace lrt {
inline namespace v0 {

template <>
struct DeviceTraits<cpu::Device> {
  static constexpr std::size_t alignment = cpu::CachingAllocator::alignment;
  static void* allocate(std::size_t bytes) { return cpu::CachingAllocator::global().allocate(bytes); }
  static void deallocate(void* p, std::size_t bytes) noexcept { cpu::CachingAllocator::global().deallocate(p, bytes); }
  static void zero(void* p, std::size_t bytes) { std::memset(p, 0, bytes); }
  static void copy_from_host(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void copy_to_host(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void copy_within(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
  static void synchronize() noexcept {}  // the CPU's work is done when its call returns
};

template <>
struct Executor<cpu::Device> {
  /// Elements per task below which a loop stays on the calling thread.
  static constexpr index_t grain = index_t{1} << 15;

  /// dst[i] = src[i] over shape; linear: both sides addressable by a flat row-major index.
  template <int R, class DstEv, class SrcEv>
  static void run(const Shape<R>& shape, const DstEv& dst, const SrcEv& src, bool linear) {
    const index_t n = shape.numel();
    if (n == 0) return;
    if constexpr (R == 0) {
      dst.at(Index<0>{}) = src.at(Index<0>{});
    } else if (linear) {
      parallel_for(n, grain, [&](index_t b, index_t e) {
        const DstEv d = dst;
        const SrcEv s = src;
        for (index_t i = b; i < e; ++i) d.lin(i) = s.lin(i);
      });
    } else {
      const index_t inner = shape[R - 1], rows = n / inner;
      parallel_for(rows, std::max<index_t>(1, grain / inner), [&](index_t b, index_t e) {
        const DstEv d = dst;
        const SrcEv s = src;
        Index<R> idx = unravel(b * inner, shape);
        for (index_t r = b; r < e; ++r) {
          for (index_t j = 0; j < inner; ++j) {
            idx[R - 1] = j;
            d.at(idx) = s.at(idx);
          }
          // advance the outer index by one row
          for (int k = R - 2; k >= 0; --k) {
            if (++idx[k] < shape[k]) break;
            idx[k] = 0;
          }
        }
      });
    }
  }
};

}  // namespace v0
}  // namespace lrt
