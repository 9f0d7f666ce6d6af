// lrt/tensor/random.hpp: counter-based random numbers (Philox4x32-10).
// Element i of a fill with (seed, offset) depends only on (seed, offset + i), so a stream is
// the same on every device and thread count, and can be resumed from a stored offset.
// Uniform values are bit-identical across devices (host builds must not contract a*b+c into an
// FMA: -ffp-contract=off, which ISO -std=c++20 implies on GCC); normal values go through
// log/cos/sin and may differ in the last ulp between CPU libm and CUDA's math library.
#pragma once

#include <cstdint>

#include "expr.hpp"

namespace lrt {
inline namespace v0 {

/// Philox4x32 with 10 rounds (Salmon et al., SC'11): 4 random 32-bit words per 64-bit counter.
struct Philox {
  struct Block {
    std::uint32_t v[4];
  };
  /// The full generator: a 128-bit counter (4 words) under a 64-bit key (2 words).
  LRT_HD static Block generate(const std::uint32_t (&ctr)[4], const std::uint32_t (&key)[2]) {
    std::uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; ++r) {
      const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c0;
      const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c2;
      const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
      const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    return Block{{c0, c1, c2, c3}};
  }
  /// lrt's streams: counter = (block index, 0), key = seed.
  LRT_HD static Block generate(std::uint64_t seed, std::uint64_t block) {
    const std::uint32_t ctr[4] = {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u};
    const std::uint32_t key[2] = {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
    return generate(ctr, key);
  }
  /// The 32-bit word number n of the stream (word n is lane n % 4 of block n / 4).
  LRT_HD static std::uint32_t word(std::uint64_t seed, std::uint64_t n) { return generate(seed, n >> 2).v[n & 3]; }
};

/// Maps a 32-bit word (of Philox's stream) to [0, 1) with 24 random bits (exact in float): the
/// uniform fill's rule, which the sampler uses too.
LRT_HD inline float unit_float(std::uint32_t x) { return static_cast<float>(x >> 8) * 0x1p-24f; }

namespace detail {

template <class T>
struct UniformGen {
  std::uint64_t seed, offset;
  T lo, hi;
  LRT_HD T operator()(index_t i) const {
    const float u = unit_float(Philox::word(seed, offset + static_cast<std::uint64_t>(i)));
#if LRT_ON_DEVICE  // no FMA contraction: the same rounding as the host's separate mul and add
    if constexpr (std::is_same_v<T, float>) return __fadd_rn(lo, __fmul_rn(u, hi - lo));
    if constexpr (std::is_same_v<T, double>) return __dadd_rn(lo, __dmul_rn(double(u), hi - lo));
#endif
    return lo + static_cast<T>(u) * (hi - lo);
  }
};

/// Box-Muller on the lane pairs (0,1) and (2,3) of a block: even lanes take the cosine branch,
/// odd lanes the sine branch, so each element is computed independently of its neighbours.
template <class T>
struct NormalGen {
  std::uint64_t seed, offset;
  T mean, std;
  LRT_HD T operator()(index_t i) const {
    const std::uint64_t n = offset + static_cast<std::uint64_t>(i);
    const Philox::Block b = Philox::generate(seed, n >> 2);
    const unsigned lane = static_cast<unsigned>(n & 3), pair = lane & 2u;
    const float u1 = (static_cast<float>(b.v[pair] >> 8) + 1.0f) * 0x1p-24f;  // (0, 1]
    const float u2 = unit_float(b.v[pair + 1]);
    const float r = math::sqrt(-2.0f * math::log(u1));
    const float th = 6.2831853071795864f * u2;
    const float z = (lane & 1u) ? r * math::sin(th) : r * math::cos(th);
    return mean + std * static_cast<T>(z);
  }
};
}  // namespace detail

/// Uniform values in [lo, hi) over shape: element i uses stream position offset + i.
template <class T, int R>
auto uniform(const Shape<R>& shape, std::uint64_t seed, std::uint64_t offset = 0, T lo = T(0), T hi = T(1)) {
  static_assert(std::is_floating_point_v<T>, "uniform() fills floating-point tensors");
  return GeneratorExpr<detail::UniformGen<T>, R>({seed, offset, lo, hi}, shape);
}

/// Normal values N(mean, std^2) over shape: element i uses stream position offset + i.
template <class T, int R>
auto normal(const Shape<R>& shape, std::uint64_t seed, std::uint64_t offset = 0, T mean = T(0), T std = T(1)) {
  static_assert(std::is_floating_point_v<T>, "normal() fills floating-point tensors");
  return GeneratorExpr<detail::NormalGen<T>, R>({seed, offset, mean, std}, shape);
}

/// A seed and a running offset: each draw consumes numel positions of the stream, so a
/// sequence of draws is reproducible and resumable from (seed, offset).
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0, std::uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  template <class T, int R>
  auto uniform(const Shape<R>& shape, T lo = T(0), T hi = T(1)) {
    return lrt::uniform<T>(shape, seed_, advance(shape.numel()), lo, hi);
  }
  template <class T, int R>
  auto normal(const Shape<R>& shape, T mean = T(0), T std = T(1)) {
    // Rounded up to a whole block so that successive normal draws never share a Box-Muller pair.
    return lrt::normal<T>(shape, seed_, advance((shape.numel() + 3) & ~index_t{3}), mean, std);
  }
  std::uint64_t seed() const noexcept { return seed_; }
  std::uint64_t offset() const noexcept { return offset_; }
  void set_offset(std::uint64_t o) noexcept { offset_ = o; }

 private:
  std::uint64_t advance(index_t n) {
    const std::uint64_t o = offset_;
    offset_ += static_cast<std::uint64_t>(n);
    return o;
  }
  std::uint64_t seed_, offset_;
};

}  // namespace v0
}  // namespace lrt
