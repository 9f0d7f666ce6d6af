// Fusion: evaluating an expression allocates nothing (global operator new is counted here).
#include <atomic>
#include <cstdlib>
#include <new>

#include "test_util.hpp"

namespace {
std::atomic<long long> g_news{0};
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// Counting replacements of the global allocation functions (they apply to the whole test binary).
void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using lrt::Shape;
using lrt::Tensor;
using lrt::index_t;

namespace {
/// Heap allocations (every operator new, lrt's host buffers included) made while running f.
template <class F>
long long allocations_during(F&& f) {
  const long long n0 = g_news.load();
  f();
  return g_news.load() - n0;
}
}  // namespace

TEST_CASE("evaluating d = a * b + c * 2.f allocates nothing") {
  const index_t n = index_t{1} << 17;  // large enough to run on the thread pool
  Tensor<float, 2> a(Shape<2>{n / 64, 64}), b(a.shape()), c(a.shape()), d(a.shape());
  a.fill(1.f);
  b.fill(2.f);
  c.fill(3.f);
  d = a * b + c * 2.f;  // warm-up: starts the global pool
  CHECK(allocations_during([&] { d = a * b + c * 2.f; }) == 0);
  CHECK(d(5, 5) == 8.f);
  auto e = a + b * 2.f;
  CHECK(allocations_during([&] { d = e; }) == 0);
  Tensor<float, 1> bias = Tensor<float, 1>::full(Shape<1>{64}, 1.f);
  CHECK(allocations_during([&] { d = lrt::exp(a) * b + bias; }) == 0);  // broadcast path
  CHECK(allocations_during([&] { d.t() = c.t() * 2.f; }) == 0);        // strided path
  CHECK(allocations_during([&] { a = a * b + a; }) == 0);              // safe self-alias
  CHECK(allocations_during([&] { d += 1.f; }) == 0);
  CHECK(allocations_during([&] { d.fill(0.f); }) == 0);
  // an overlapping, differently laid out read goes through exactly one temporary
  Tensor<float, 2> sq(Shape<2>{256, 256});
  const long long d0 = lrt::detail::device_allocations().load();
  sq = sq.t();
  CHECK(lrt::detail::device_allocations().load() - d0 == 1);
}

TEST_CASE("the CPU caching allocator reuses blocks: a repeated loop stops allocating") {
  using lrt::cpu::CachingAllocator;
  CHECK(CachingAllocator::size_class(1) == 64);
  CHECK(CachingAllocator::size_class(257) == 320);
  CHECK(CachingAllocator::size_class(1000) == 1024);
  CHECK(CachingAllocator::size_class(1025) == 1280);
  for (std::size_t n : {1u, 63u, 300u, 5000u, 123457u}) {
    const std::size_t c = CachingAllocator::size_class(n);
    CHECK(c >= n);
    CHECK(double(c) <= 1.25 * double(n) + 64);
  }
  auto step = [] {
    Tensor<float, 2> a(Shape<2>{100, 37}), b(Shape<2>{37, 80});
    Tensor<float, 2> c = lrt::matmul(a, b);
    Tensor<float, 2> d = lrt::exp(c) + 1.f;
    return lrt::sum(d);
  };
  step();  // first iteration fills the cache
  const auto s0 = lrt::cpu::memory_stats();
  const long long n = allocations_during([&] { step(); step(); });
  const auto s1 = lrt::cpu::memory_stats();
  CHECK(s1.system_allocs == s0.system_allocs);
  CHECK(n == 0);
  CHECK(s1.in_use == s0.in_use);
  lrt::cpu::reset_peak_memory();
  {
    Tensor<float, 1> big(Shape<1>{1 << 20});
    CHECK(lrt::cpu::memory_stats().peak_in_use >= s1.in_use + (std::size_t{4} << 20));
  }
  lrt::cpu::empty_cache();
  CHECK(lrt::cpu::memory_stats().cached == 0);
}
