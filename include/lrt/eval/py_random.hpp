// lrt/eval/py_random.hpp: CPython 3.11's random.Random, bit for bit, for what nanochat's CORE
// evaluation draws (the few-shot sample of each item, the shuffle of a task's items).
// Reproduces, from Modules/_randommodule.c: init_genrand, init_by_array, genrand_uint32,
// random_seed (an int seed: the 32-bit words of abs(seed), least significant first; [0] for 0)
// and getrandbits; from Lib/random.py: _randbelow_with_getrandbits (Random._randbelow), shuffle
// and sample (both of its algorithms, chosen by its setsize rule). Checked against draws that
// Python made (tests/data/core/random_draws.txt, scripts/core_reference/random_draws.py).
// Not here: random(), choice, the float distributions, seeding by str/bytes or from the OS.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace eval {

/// CPython's random.Random (MT19937 seeded from an int), for getrandbits, _randbelow, shuffle, sample.
class PyRandom {
 public:
  /// random.Random(seed) for an int seed (a negative one seeds as its absolute value).
  template <std::integral I>
  explicit PyRandom(I seed) {
    this->seed(seed);
  }

  /// Random.seed(seed) for an int: init_by_array of abs(seed)'s 32-bit words, least significant first.
  template <std::integral I>
  void seed(I seed) {
    std::uint64_t mag = static_cast<std::uint64_t>(seed);
    if constexpr (std::is_signed_v<I>) {
      if (seed < 0) mag = std::uint64_t{0} - mag;  // abs, INT64_MIN included
    }
    const std::uint32_t key[2] = {static_cast<std::uint32_t>(mag), static_cast<std::uint32_t>(mag >> 32)};
    init_by_array(key, (mag >> 32) != 0 ? 2 : 1);
  }

  /// MT19937's init_genrand(s) (the plain seeding: std::mt19937(s) has the same state).
  void init_genrand(std::uint32_t s) noexcept {
    mt_[0] = s;
    for (std::size_t i = 1; i < kN; ++i)
      mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
    index_ = kN;
  }

  /// MT19937's init_by_array(key, n) (n >= 1), as _randommodule.c has it.
  void init_by_array(const std::uint32_t* key, std::size_t n) {
    check(n >= 1, "PyRandom", "init_by_array needs a key of at least one word");
    init_genrand(19650218U);
    std::size_t i = 1, j = 0;
    for (std::size_t k = kN > n ? kN : n; k; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] + static_cast<std::uint32_t>(j);
      ++i;
      ++j;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
      if (j >= n) j = 0;
    }
    for (std::size_t k = kN - 1; k; --k) {
      mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<std::uint32_t>(i);
      ++i;
      if (i >= kN) {
        mt_[0] = mt_[kN - 1];
        i = 1;
      }
    }
    mt_[0] = 0x80000000U;
  }

  /// The next 32-bit output of MT19937.
  std::uint32_t genrand_uint32() noexcept {
    if (index_ >= kN) twist();
    std::uint32_t y = mt_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= y >> 18;
    return y;
  }

  /// Random.getrandbits(k), 0 <= k <= 64: 32-bit words from the least significant one up, the last
  /// one's surplus low bits dropped (k = 0 draws nothing).
  std::uint64_t getrandbits(int k) {
    check(k >= 0 && k <= 64, "getrandbits", "k must be in [0, 64], got ", k);
    if (k == 0) return 0;
    if (k <= 32) return genrand_uint32() >> (32 - k);
    std::uint64_t r = genrand_uint32();
    const int rest = k - 32;
    return r | (std::uint64_t{genrand_uint32() >> (32 - rest)} << 32);
  }

  /// Random._randbelow(n) (_randbelow_with_getrandbits): uniform in [0, n), n >= 1.
  std::uint64_t randbelow(std::uint64_t n) {
    check(n > 0, "randbelow", "n must be positive, got 0");
    const int k = static_cast<int>(std::bit_width(n));
    std::uint64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
  }

  /// Random.shuffle(x) (3.11): for i from len - 1 down to 1, swap x[i] with x[_randbelow(i + 1)].
  template <class T>
  void shuffle(std::vector<T>& x) {
    for (std::size_t i = x.size(); i-- > 1;) {
      const auto j = static_cast<std::size_t>(randbelow(i + 1));
      T tmp = std::move(x[i]);
      x[i] = std::move(x[j]);
      x[j] = std::move(tmp);
    }
  }

  /// Random.sample(population, k) (3.11, no counts): k distinct positions, in selection order.
  template <class T>
  std::vector<T> sample(const std::vector<T>& population, std::size_t k) {
    const std::size_t n = population.size();
    check(k <= n, "sample", "sample larger than population: k = ", k, ", n = ", n);
    std::vector<T> result;
    result.reserve(k);
    if (n <= sample_setsize(k)) {  // pool: draw from the shrinking front of a copy
      std::vector<T> pool(population);
      for (std::size_t i = 0; i < k; ++i) {
        const auto j = static_cast<std::size_t>(randbelow(n - i));
        result.push_back(pool[j]);
        pool[j] = pool[n - i - 1];
      }
    } else {  // set: redraw positions already taken
      std::unordered_set<std::uint64_t> selected;
      for (std::size_t i = 0; i < k; ++i) {
        std::uint64_t j = randbelow(n);
        while (selected.count(j)) j = randbelow(n);
        selected.insert(j);
        result.push_back(population[static_cast<std::size_t>(j)]);
      }
    }
    return result;
  }

  /// sample's threshold: the pool algorithm runs when n <= this. 21, plus for k > 5
  /// 4 ** ceil(log(k * 3, 4)) with log(x, b) = log(x) / log(b) in doubles as math.log computes it
  /// (saturated where it would pass 2**64: no population is that large).
  static std::uint64_t sample_setsize(std::size_t k) {
    std::uint64_t setsize = 21;
    if (k > 5) {
      if (k > (std::size_t{1} << 60)) return UINT64_MAX;
      const double e = std::ceil(std::log(static_cast<double>(std::uint64_t{k} * 3)) / std::log(4.0));
      if (e > 31) return UINT64_MAX;
      setsize += std::uint64_t{1} << (2 * static_cast<int>(e));
    }
    return setsize;
  }

 private:
  static constexpr std::size_t kN = 624, kM = 397;

  void twist() noexcept {
    constexpr std::uint32_t kUpper = 0x80000000U, kLower = 0x7fffffffU, kMatrixA = 0x9908b0dfU;
    auto mix = [&](std::size_t a, std::size_t b, std::size_t c) {
      const std::uint32_t y = (mt_[a] & kUpper) | (mt_[b] & kLower);
      mt_[a] = mt_[c] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    };
    std::size_t kk = 0;
    for (; kk < kN - kM; ++kk) mix(kk, kk + 1, kk + kM);
    for (; kk < kN - 1; ++kk) mix(kk, kk + 1, kk + kM - kN);
    mix(kN - 1, 0, kM - 1);
    index_ = 0;
  }

  std::array<std::uint32_t, kN> mt_{};
  std::size_t index_ = kN;
};

}  // namespace eval
}  // namespace v0
}  // namespace lrt
