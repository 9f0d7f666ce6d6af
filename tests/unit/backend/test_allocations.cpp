// Fusion: evaluating an expression allocates nothing (global operator new is counted here).
#include <atomic>
#include <cstdlib>
#include <new>

#include "../test_util.hpp"
#include <lrt/autodiff.hpp>
#include <lrt/decode.hpp>
#include <lrt/eval.hpp>

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
// The nothrow forms too (std::stable_sort's temporary buffer uses them): otherwise the runtime's
// own nothrow new would pair with the free() below (ASan: alloc-dealloc-mismatch).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const std::size_t al = static_cast<std::size_t>(a);
  return std::aligned_alloc(al, (n + al - 1) / al * al);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return operator new(n, a, t);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace test_allocations {

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;

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
  CHECK(allocations_during([&] { d.t() = c.t() * 2.f; }) == 0);         // strided path
  CHECK(allocations_during([&] { a = a * b + a; }) == 0);               // safe self-alias
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
  const long long n = allocations_during([&] {
    step();
    step();
  });
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

TEST_CASE("autodiff: after the first step a training step allocates nothing; backward frees activations") {
  namespace ad = lrt::ad;
  const index_t B = 2, T = 16, C = 32, H = 2, Dh = 16, V = 40;
  ad::Param<float, 2> wte(Tensor<float, 2>(lrt::normal<float>(Shape<2>{V, C}, 1)));
  ad::Param<float, 2> wq(Tensor<float, 2>(lrt::uniform<float>(Shape<2>{H * Dh, C}, 2, 0, -0.2f, 0.2f)));
  ad::Param<float, 2> wk(Tensor<float, 2>(lrt::uniform<float>(Shape<2>{H * Dh, C}, 3, 0, -0.2f, 0.2f)));
  ad::Param<float, 2> wv(Tensor<float, 2>(lrt::uniform<float>(Shape<2>{H * Dh, C}, 4, 0, -0.2f, 0.2f)));
  ad::Param<float, 2> w1(Tensor<float, 2>(lrt::uniform<float>(Shape<2>{4 * C, C}, 5, 0, -0.2f, 0.2f)));
  ad::Param<float, 2> head(Tensor<float, 2>(lrt::uniform<float>(Shape<2>{V, C}, 6, 0, -0.2f, 0.2f)));
  Tensor<index_t, 2> ids(Shape<2>{B, T});
  Tensor<index_t, 1> tg(Shape<1>{B * T});
  for (index_t i = 0; i < B * T; ++i) {
    ids.data()[i] = (i * 7) % V;
    tg(i) = (i * 11) % V;
  }
  const Tensor<index_t, 1> pos = lrt::iota(Shape<1>{T}, index_t{0});
  const auto rope = ad::RopeTable<float>::make(T, Dh);
  ad::Graph g;
  std::size_t after_forward = 0, after_backward = 0;
  auto step = [&] {
    g.clear();
    const std::size_t base = lrt::cpu::memory_stats().in_use;
    auto x = ad::rmsnorm(ad::embedding(ids, wte.var()));
    auto q = ad::rope(ad::reshape(ad::linear(x, wq.var()), Shape<4>{B, T, H, Dh}), rope);
    auto k = ad::rope(ad::reshape(ad::linear(x, wk.var()), Shape<4>{B, T, H, Dh}), rope);
    auto v = ad::reshape(ad::linear(x, wv.var()), Shape<4>{B, T, H, Dh});
    x = x + ad::reshape(ad::attention(q, k, v, pos, T), Shape<3>{B, T, C});
    x = x + ad::linear(ad::relu2(ad::linear(x, w1.var())), ad::constant(Tensor<float, 2>(Shape<2>{C, 4 * C})));
    auto loss = ad::cross_entropy(ad::linear(ad::reshape(x, Shape<2>{B * T, C}), head.var()), tg).loss;
    after_forward = lrt::cpu::memory_stats().in_use - base;
    ad::backward(loss);
    after_backward = lrt::cpu::memory_stats().in_use - base;
  };
  // Serial execution (parallel_for inside a "task" runs inline): how many same-size blocks the
  // cache must hold otherwise depends on how many pool tasks happened to overlap (attention tiles
  // allocate their score blocks concurrently), which made this check flaky under load. The
  // property tested is the steady state of one thread's step.
  const bool was_in_task = std::exchange(lrt::detail::in_pool_task, true);
  // Warm-up until a steady state: caches, free lists and the arena reach their size; wait for
  // two consecutive steps without any allocation (at most 40 steps).
  for (int i = 0, quiet = 0; i < 40 && quiet < 2; ++i) {
    const auto before = lrt::cpu::memory_stats().system_allocs;
    const long long news = allocations_during(step);
    quiet = (i >= 2 && news == 0 && lrt::cpu::memory_stats().system_allocs == before) ? quiet + 1 : 0;
  }
  const auto s0 = lrt::cpu::memory_stats();
  const long long n = allocations_during([&] {
    step();
    step();
    step();
  });
  CHECK(n == 0);  // no operator new at all: nodes in the arena, tensors from the cache
  CHECK(lrt::cpu::memory_stats().system_allocs == s0.system_allocs);
  lrt::detail::in_pool_task = was_in_task;
  // activations are gone after backward; what remains is the gradients, saved inputs of
  // constants (ids, targets) and the retained loss
  CAPTURE(after_forward);
  CAPTURE(after_backward);
  CHECK(after_backward < after_forward / 3);
}

namespace {
/// Heap allocations of `steps` decode steps after a prefill and `warm` warm-up steps, on a tiny
/// float model of variant V with two rows: prompts of equal lengths (the lockstep path) or not
/// (one sequence of per-row tokens), fed in the given prefill mode. Also returns what the first
/// step allocated (the counter works: the decoder's tape starts empty).
template <class V>
std::pair<long long, long long> decode_allocations(bool ragged, lrt::PrefillMode mode, int warm = 2, int steps = 16,
                                                   index_t T = 64) {
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = T, c.vocab_size = 257;
  c.mem_offset = 2, c.reset_at_bos = true;  // the ring's BOS check runs too
  lrt::Model<V, float> m(c, 1);
  lrt::Decoder dec(m, 2);
  const std::vector<std::vector<index_t>> prompts = ragged
                                                        ? std::vector<std::vector<index_t>>{{256, 1, 2, 3}, {256, 7}}
                                                        : std::vector<std::vector<index_t>>{{256, 1, 2}, {256, 5, 6}};
  dec.prefill(std::span<const std::vector<index_t>>(prompts), mode);
  const std::vector<index_t> tok{65, 256};
  // Serial, as in the training-step test: the property is one thread's steady state.
  const bool was_in_task = std::exchange(lrt::detail::in_pool_task, true);
  const long long first = allocations_during([&] { dec.step(tok); });
  for (int i = 1; i < warm; ++i) dec.step(tok);
  const auto s0 = lrt::cpu::memory_stats();
  const long long n = allocations_during([&] {
    for (int i = 0; i < steps; ++i) dec.step(tok);
  });
  CHECK(lrt::cpu::memory_stats().system_allocs == s0.system_allocs);
  lrt::detail::in_pool_task = was_in_task;
  return {first, n};
}
}  // namespace

TEST_CASE("decoder: after start-up a decode step allocates nothing (lockstep and ragged rows, every prefill mode)") {
  namespace vs = lrt::variants;
  for (bool ragged : {false, true}) {
    CAPTURE(ragged);
    CHECK(decode_allocations<vs::Baseline>(ragged, lrt::PrefillMode::exact()).second == 0);
    CHECK(decode_allocations<vs::Lrt>(ragged, lrt::PrefillMode::exact()).second == 0);
    // After a parallel prefill the decoder's own tape is still empty: its first step allocates.
    const auto [first, steady] = decode_allocations<vs::Lrt>(ragged, lrt::PrefillMode::interleaved(2));
    CHECK(first > 0);
    CHECK(steady == 0);
    CHECK(decode_allocations<vs::Lrt>(ragged, lrt::PrefillMode::zero()).second == 0);
    CHECK(decode_allocations<vs::Baseline>(ragged, lrt::PrefillMode::zero()).second == 0);
    // Past the context (T = 8): 80 steps move every layer's keys to the front of its buffer
    // several times (every 10 positions in the long layer, every 6 in the short one).
    CHECK(decode_allocations<vs::Baseline>(ragged, lrt::PrefillMode::exact(), 2, 80, 8).second == 0);
    CHECK(decode_allocations<vs::Lrt>(ragged, lrt::PrefillMode::exact(), 2, 80, 8).second == 0);
  }
}

TEST_CASE(
    "core scorers: after warm-up an example costs the same allocations at any length (none per token, no decoder)") {
  namespace ev = lrt::eval;
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 32, c.vocab_size = 257;
  c.mem_offset = 2, c.reset_at_bos = true;
  lrt::Model<lrt::variants::Lrt, float> m(c, 1);
  // Three options after a shared prefix of n tokens (multiple choice: the span after the prefix),
  // past the context for the longer ones.
  const auto spans = [](index_t n) {
    ev::CoreSpans s;
    for (index_t o = 0; o < 3; ++o) {
      std::vector<index_t> r{256};
      for (index_t i = 1; i < n; ++i) r.push_back(32 + (i * 7) % 90);
      for (index_t i = 0; i < 2 + o; ++i) r.push_back(97 + o);
      s.start.push_back(n), s.end.push_back(static_cast<index_t>(r.size()));
      s.rows.push_back(std::move(r));
    }
    return s;
  };
  const ev::CoreSpans short_one = spans(10), long_one = spans(90);
  const bool was_in_task = std::exchange(lrt::detail::in_pool_task, true);  // one thread's steady state
  for (const bool seq : {false, true}) {
    CAPTURE(seq);
    const ev::CoreScorer score = seq ? ev::sequential_scorer(m) : ev::zero_memory_scorer(m);
    const long long first = allocations_during([&] { score(long_one); });  // sequential: builds the decoder
    for (int i = 0; i < 2; ++i) score(short_one), score(long_one);
    const long long a = allocations_during([&] { score(short_one); });
    const long long b = allocations_during([&] { score(long_one); });
    MESSAGE(std::string(seq ? "sequential" : "parallel"), ": the first example ", first, " allocations, then ", a,
            " (prefix of 10 tokens) and ", b, " (90 tokens)");
    CHECK(first > a + 10);  // the counter sees the first example's buffers being made
    CHECK(a == b);          // nothing per token: the steps and the prefix's pass reuse what warm-up left
    CHECK(a < 100);         // the scores returned, the prefill's bookkeeping (parallel: the passes' graphs)
  }
  lrt::detail::in_pool_task = was_in_task;
}

TEST_CASE("lean decoder: nothing is allocated after construction, first step and exact prefill included") {
  namespace vs = lrt::variants;
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 16, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 8, c.vocab_size = 40;
  c.window_pattern = "SL", c.mem_offset = 2, c.reset_at_bos = true;
  const auto run = [&](auto tag) {
    using V = decltype(tag);
    lrt::Model<V> m(c, 3);
    auto dec = lrt::make_lean_decoder(m, {0, 0});  // exact prefill only: the smallest layout
    const std::vector<index_t> prompt{39, 1, 2, 3, 39, 5};
    return allocations_during([&] {
      dec.prefill(prompt);
      for (index_t t = 0; t < 60; ++t) dec.step(t % 39);  // past T = 8: the caches slide
      dec.reset();
      dec.prefill(prompt);
    });
  };
  CHECK(run(vs::Baseline{}) == 0);
  CHECK(run(vs::Lrt{}) == 0);
  CHECK(run(vs::LrtRelease{}) == 0);
}

TEST_CASE("lean decoder rows: joins, steps of any rows and leaves allocate nothing (fp32 and int8 weights)") {
  namespace vs = lrt::variants;
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 8, c.vocab_size = 40;
  c.window_pattern = "SL", c.mem_offset = 2, c.reset_at_bos = true;
  const auto run = [&](auto tag, bool packed) {
    using V = decltype(tag);
    lrt::Model<V> m(c, 3);
    const lrt::PackedWeights pw = lrt::pack_weights(m, lrt::WeightFormat::Int8, 8);
    typename lrt::LeanDecoder<V, float>::Options o{0, -1};
    o.rows = 16;
    lrt::LeanDecoder<V, float> dec(lrt::lean_weights(m, packed ? &pw : nullptr), o);
    const std::vector<index_t> prompt{39, 1, 2, 3, 39, 5};
    std::vector<index_t> rows, toks;
    rows.reserve(16), toks.reserve(16);
    const auto schedule = [&] {
      dec.reset();
      for (index_t t = 0; t < 60; ++t) {
        if (t % 4 == 0 && dec.active_rows() < 16)  // a new request every fourth step, exact or zero-memory prefill
          (void)dec.join(prompt, t % 8 == 0 ? lrt::PrefillMode::exact() : lrt::PrefillMode::zero());
        rows.clear(), toks.clear();
        for (index_t r = 0; r < 16; ++r)
          if (dec.active(r)) rows.push_back(r), toks.push_back((t + r) % 39);
        dec.step(rows, toks);
        if (t % 7 == 6) dec.leave(rows.front());  // and the oldest leaves now and then
      }
    };
    // Warm-up: a whole-prompt prefill's attention takes its score blocks from the caching allocator
    // and its thread's position list the first time (steps and exact prefill take nothing).
    schedule();
    return allocations_during(schedule);
  };
  CHECK(run(vs::Baseline{}, false) == 0);
  CHECK(run(vs::Lrt{}, false) == 0);
  CHECK(run(vs::Lrt{}, true) == 0);
}

}  // namespace test_allocations
