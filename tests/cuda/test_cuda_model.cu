// tests/cuda/test_cuda_model.cu: the model layer on lrt::cuda::Device against the CPU. Every
// body below is a template over the device; each case runs it on the CPU (the reference) and on
// the GPU and compares: the fused ops and their gradients, the whole model's logits, loss and
// every parameter's gradient for the baseline and the LRT variants, the schedules, and the LRT
// invariants (decode == Exact, Interleaved<S >= T> == Exact) checked on the GPU itself. The
// optimizers' cases come from optim_cases.hpp; the Trainer's (the same training run on both
// devices, and checkpoints that move between them) are at the end.
// Tolerances: double runs differ only in summation order (1e-9 relative to the scale); float
// runs get 2e-4 relative (many reductions of length <= a few hundred).
// Compiled with test_cuda.cu in one unit (tests/cuda/cuda_tests.cu with nvcc, the program
// lrt_cuda_tests; tests/emu/test_cuda_emu.cpp on the CPU emulator), which brings main(); its cases
// are those of `lrt_cuda_tests --source-file=*/cuda/test_cuda_model.cu,*/cuda/optim_cases.hpp`.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <lrt/cuda.hpp>
#include <lrt/train/trainer.hpp>

#include "optim_cases.hpp"

namespace {

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
using C = lrt::cpu::Device;
using G = lrt::cuda::Device;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

/// Any tensor, flattened on the host as doubles.
template <class T, int R, class D>
std::vector<double> host(const Tensor<T, R, D>& t) {
  Tensor<T, R, C> h = lrt::to<C>(t);
  std::vector<double> out(static_cast<std::size_t>(h.numel()));
  for (index_t i = 0; i < h.numel(); ++i) out[static_cast<std::size_t>(i)] = static_cast<double>(h.data()[i]);
  return out;
}

/// Checks |a - b| <= tol * max(1, max |b|) elementwise; reports the worst element.
void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  double scale = 1, worst = 0;
  std::size_t at = 0;
  for (double x : b) scale = std::max(scale, std::abs(x));
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - b[i]);
    if (!(d <= worst)) worst = d, at = i;  // NaN counts as worst
  }
  INFO("worst |diff| " << worst << " at " << at << " (scale " << scale << ", n " << a.size() << ")");
  CHECK(worst <= tol * scale);
}

template <class T>
constexpr double tol() {
  return std::is_same_v<T, double> ? 1e-9 : 2e-4;
}

/// A tensor of deterministic uniform numbers in [lo, hi) on D (the same numbers on every device).
template <class T, int R, class D>
Tensor<T, R, D> rnd(Shape<R> s, std::uint64_t seed, T lo = T(-1), T hi = T(1)) {
  Tensor<T, R, D> t(s, lrt::uninitialized);
  t = lrt::uniform<T>(s, seed, 0, lo, hi);
  return t;
}

/// Token ids (B, T) in [0, V) from a fixed rule, on D.
template <class D>
Tensor<index_t, 2, D> ids_of(index_t B, index_t T, index_t V, unsigned seed) {
  Tensor<index_t, 2> h(Shape<2>{B, T});
  std::uint64_t x = seed * 2654435761u + 1;
  for (index_t i = 0; i < B * T; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    h.data()[i] = static_cast<index_t>((x >> 33) % static_cast<std::uint64_t>(V));
  }
  if constexpr (std::is_same_v<D, C>) {
    return h;
  } else {
    return lrt::to<D>(h);
  }
}

// ------------------------------------------------------------------ fused ops, one body per op

/// Values and input gradients of one op: y = op(x...), loss = sum(y * w) for a fixed w.
struct OpRun {
  std::vector<std::vector<double>> out;
};

template <class T, class D>
OpRun run_rmsnorm_rope_softmax() {
  OpRun r;
  ad::Graph g;
  const Shape<4> s{2, 5, 4, 8};
  auto x = ad::variable(rnd<T, 4, D>(s, 1));
  const Tensor<index_t, 1> pos = lrt::iota(Shape<1>{5}, index_t{3});  // positions 3..7
  const auto rope = ad::RopeTable<T, D>::make(pos.view(), 8, true);
  auto y = ad::softmax(ad::rmsnorm(ad::rope(x, rope)));
  auto z = ad::rope_rmsnorm(x, rope);  // the fused RoPE + QK-norm
  y.retain();                          // read after backward, which frees unretained values
  z.retain();
  auto loss = ad::sum(y * ad::constant(rnd<T, 4, D>(s, 2))) + ad::sum(z * ad::constant(rnd<T, 4, D>(s, 3)));
  ad::backward(loss);
  r.out = {host(y.value()), host(z.value()), host(x.grad())};
  return r;
}

template <class T, class D>
OpRun run_embedding_xent() {
  OpRun r;
  ad::Graph g;
  const index_t V = 13, Vp = 16, Cc = 6, B = 3, Tt = 7;
  auto table = ad::variable(rnd<T, 2, D>(Shape<2>{Vp, Cc}, 3));
  const auto ids = ids_of<D>(B, Tt, 4, 5);  // few distinct ids: repeated rows in the backward
  auto e = ad::embedding(ids, table);       // (B, T, C)
  auto w = ad::variable(rnd<T, 2, D>(Shape<2>{Vp, Cc}, 4, T(-3), T(3)));
  auto z = ad::linear(e, w);  // (B, T, Vp)
  Tensor<index_t, 2> tg_h(Shape<2>{B, Tt});
  const auto tg_src = lrt::to<C>(ids_of<D>(B, Tt, V, 9));
  for (index_t i = 0; i < B * Tt; ++i) tg_h.data()[i] = i % 5 == 2 ? -1 : tg_src.data()[i];  // some ignored
  Tensor<index_t, 1, D> tg;
  if constexpr (std::is_same_v<D, C>) {
    tg = Tensor<index_t, 1, D>(tg_h.view().template reshape<1>(Shape<1>{B * Tt}));
  } else {
    tg = lrt::to<D>(tg_h.view().template reshape<1>(Shape<1>{B * Tt}));
  }
  auto ce = ad::cross_entropy(ad::reshape(z, Shape<2>{B * Tt, Vp}), tg, T(2.5), V);
  ad::backward(ce.loss);
  r.out = {host(ce.loss.value()), host(ce.per_token), host(table.grad()), host(w.grad())};
  CHECK(ce.count == B * Tt - (B * Tt + 2) / 5);
  return r;
}

/// Attention with GQA (H = 4, Hkv = 2), a window, and subset queries at increasing positions.
template <class T, class D>
OpRun run_attention(index_t window, bool subset, index_t Dh) {
  OpRun r;
  ad::Graph g;
  const index_t B = 2, Tk = 19, H = 4, Hkv = 2;
  std::vector<index_t> P;
  for (index_t p = 0; p < Tk; ++p)
    if (!subset || p % 3 == 1) P.push_back(p);
  const index_t Tq = static_cast<index_t>(P.size());
  auto q = ad::variable(rnd<T, 4, D>(Shape<4>{B, Tq, H, Dh}, 11, T(-2), T(2)));
  auto k = ad::variable(rnd<T, 4, D>(Shape<4>{B, Tk, Hkv, Dh}, 12, T(-2), T(2)));
  auto v = ad::variable(rnd<T, 4, D>(Shape<4>{B, Tk, Hkv, Dh}, 13));
  const lrt::IndexList<D> idx(P);
  const Tensor<index_t, 1, D> qpos = idx.tensor();
  auto y = ad::attention(q, k, v, qpos, window);
  y.retain();  // read after backward, which frees unretained values
  auto loss = ad::sum(y * ad::constant(rnd<T, 4, D>(y.shape(), 14)));
  ad::backward(loss);
  r.out = {host(y.value()), host(q.grad()), host(k.grad()), host(v.grad())};
  return r;
}

void compare(const OpRun& cpu, const OpRun& gpu, double t, const std::string& what) {
  REQUIRE(cpu.out.size() == gpu.out.size());
  for (std::size_t i = 0; i < cpu.out.size(); ++i)
    check_close(gpu.out[i], cpu.out[i], t, what + " output " + std::to_string(i));
}

// ------------------------------------------------------------------ whole models

lrt::ModelConfig small_cfg(index_t T = 12) {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 32, c.n_head = 4, c.n_kv_head = 2, c.sequence_len = T, c.vocab_size = 50;
  c.window_pattern = "SL";  // layer 0 window T/2
  return c;
}

/// Copies every parameter of `from` (CPU) into `to` (same variant and config, any device), after
/// giving the CPU model random weights (the release's init zeroes the projections and gates,
/// which would hide most of the model from the comparison).
template <class M0, class M1>
void copy_random_weights(M0& from, M1& to, std::uint64_t seed) {
  std::uint64_t s = seed;
  from.for_each_param([&](auto& p) {
    using T = typename std::decay_t<decltype(p.value())>::value_type;
    p.value() = lrt::uniform<T>(p.shape(), ++s, 0, T(-0.4), T(0.4));
  });
  std::size_t i = 0;
  // Collect the CPU values in visiting order, then assign them in the same order on the target.
  std::vector<std::vector<double>> flat;
  from.for_each_param([&](auto& p) { flat.push_back(host(p.value())); });
  to.for_each_param([&](auto& p) {
    using TT = std::decay_t<decltype(p.value())>;
    using T = typename TT::value_type;
    REQUIRE(i < flat.size());
    Tensor<T, TT::rank, C> h(p.shape(), lrt::uninitialized);
    REQUIRE(static_cast<std::size_t>(h.numel()) == flat[i].size());
    for (index_t j = 0; j < h.numel(); ++j) h.data()[j] = static_cast<T>(flat[i][static_cast<std::size_t>(j)]);
    p.value() = lrt::to<typename TT::device_type>(h);
    ++i;
  });
  CHECK(i == flat.size());
}

/// Loss, per-pass per-token losses and all parameter gradients of schedule Sched.
template <class Sched, class M, class D>
std::vector<std::vector<double>> model_run(const M& m, const Tensor<index_t, 2, D>& ids,
                                           const Tensor<index_t, 2, D>& tg) {
  ad::Graph g;
  m.zero_grad();
  lrt::ScheduleOptions o;
  o.keep_logits = true;
  auto r = lrt::schedule_loss<Sched>(m, ids, tg, o);
  ad::backward(r.loss);
  std::vector<std::vector<double>> out{host(r.loss.value())};
  for (const auto& p : r.passes) out.push_back(host(p.logits));
  m.for_each_param([&](auto& p) { out.push_back(host(p.grad())); });
  return out;
}

template <class V, class Sched, class T>
void model_matches(const char* what, index_t B = 2, index_t Tt = 12) {
  INFO(what);
  const auto c = small_cfg(Tt);
  lrt::Model<V, T, C> mc(c, 1);
  lrt::Model<V, T, G> mg(c, 1);
  copy_random_weights(mc, mg, 100);
  const auto ids_c = ids_of<C>(B, Tt, c.vocab_size, 1), tg_c = ids_of<C>(B, Tt, c.vocab_size, 2);
  const auto ids_g = lrt::to<G>(ids_c), tg_g = lrt::to<G>(tg_c);
  const auto a = model_run<Sched>(mc, ids_c, tg_c);
  const auto b = model_run<Sched>(mg, ids_g, tg_g);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    check_close(b[i], a[i], tol<T>(), std::string(what) + " tensor " + std::to_string(i));
}

/// Soft-capped logits (B, T, V) of a schedule on device D, each position from the last pass
/// that computed it, on the host.
template <class Sched, class M, class D>
std::vector<double> merged_logits(const M& m, const Tensor<index_t, 2, D>& ids) {
  ad::Graph g;
  ad::NoGrad ng;
  lrt::ScheduleOptions o;
  o.keep_logits = true;
  const auto r = lrt::schedule_loss<Sched>(m, ids, ids, o);
  const index_t B = ids.shape()[0], T = ids.shape()[1], V = m.config().vocab_size;
  std::vector<double> out(static_cast<std::size_t>(B * T * V));
  for (const auto& pr : r.passes) {
    const auto lg = host(pr.logits);  // (B, |P|, V)
    const index_t n = static_cast<index_t>(pr.positions.size());
    for (index_t b = 0; b < B; ++b)
      for (index_t i = 0; i < n; ++i)
        for (index_t v = 0; v < V; ++v)
          out[static_cast<std::size_t>((b * T + pr.positions[static_cast<std::size_t>(i)]) * V + v)] =
              lg[static_cast<std::size_t>((b * n + i) * V + v)];
  }
  return out;
}

/// Logits (B, T, V) from the KV-cache decoder fed ids token by token.
/// graphs: through Decoder::use_graphs (replays counted into *replays).
template <class M, class D>
std::vector<double> decode_logits(const M& m, const Tensor<index_t, 2, D>& ids, bool graphs = false,
                                  index_t* replays = nullptr, bool zero_prefill = false) {
  const auto h = lrt::to<C>(ids);
  const index_t B = h.shape()[0], T = h.shape()[1], V = m.config().vocab_size;
  lrt::Decoder dec(m, B);
  if (graphs) dec.use_graphs(true);
  if (zero_prefill) {  // mode zero (no recurrent memory) from a one-token prompt per row
    std::vector<index_t> first(static_cast<std::size_t>(B));
    for (index_t b = 0; b < B; ++b) first[static_cast<std::size_t>(b)] = h(b, 0);
    dec.prefill(first, lrt::PrefillMode::zero());
  }
  std::vector<double> out(static_cast<std::size_t>(B * T * V));
  for (index_t t = zero_prefill ? 1 : 0; t < T; ++t) {
    std::vector<index_t> tok(static_cast<std::size_t>(B));
    for (index_t b = 0; b < B; ++b) tok[static_cast<std::size_t>(b)] = h(b, t);
    const auto lg = host(dec.step(tok));
    for (index_t b = 0; b < B; ++b)
      for (index_t v = 0; v < V; ++v)
        out[static_cast<std::size_t>((b * T + t) * V + v)] = lg[static_cast<std::size_t>(b * V + v)];
  }
  if (replays) *replays = dec.graph_replays();
  return out;
}

}  // namespace

TEST_CASE("cuda model: rmsnorm, rope, softmax and their gradients match the CPU") {
  compare(run_rmsnorm_rope_softmax<double, C>(), run_rmsnorm_rope_softmax<double, G>(), 1e-10, "double");
  compare(run_rmsnorm_rope_softmax<float, C>(), run_rmsnorm_rope_softmax<float, G>(), 1e-5, "float");
}

TEST_CASE("cuda model: embedding (repeated ids) and softcapped cross-entropy (ignored targets) match the CPU") {
  compare(run_embedding_xent<double, C>(), run_embedding_xent<double, G>(), 1e-10, "double");
  compare(run_embedding_xent<float, C>(), run_embedding_xent<float, G>(), 1e-5, "float");
}

TEST_CASE("cuda model: attention (GQA, windows, subset queries) forward and backward match the CPU") {
  for (index_t Dh : {8, 40, 64}) {
    for (index_t window : {index_t{3}, index_t{1} << 40}) {
      for (bool subset : {false, true}) {
        const std::string what =
            "Dh " + std::to_string(Dh) + " window " + std::to_string(window) + (subset ? " subset" : " all");
        compare(run_attention<double, C>(window, subset, Dh), run_attention<double, G>(window, subset, Dh), 1e-10,
                what + " double");
        compare(run_attention<float, C>(window, subset, Dh), run_attention<float, G>(window, subset, Dh), 1e-4,
                what + " float");
        // The same through the GEMM kernels (cuBLAS + masked softmax), in full precision.
        const lrt::cuda::AttentionKernelScope gemm(lrt::cuda::AttentionKernel::gemm);
        compare(run_attention<double, C>(window, subset, Dh), run_attention<double, G>(window, subset, Dh), 1e-10,
                what + " double (gemm kernels)");
        compare(run_attention<float, C>(window, subset, Dh), run_attention<float, G>(window, subset, Dh), 1e-4,
                what + " float (gemm kernels)");
      }
    }
  }
}

TEST_CASE("cuda model: attention with bf16 matmuls runs as GEMMs and stays close to the CPU") {
  const lrt::cuda::MatmulPrecisionScope bf16(lrt::cuda::MatmulPrecision::bf16);
  for (bool subset : {false, true}) {
    // 19 queries take the GEMM kernels automatically; the subset's 6 (fewer than 16) would run
    // the warp kernel, so they are sent to the GEMMs explicitly.
    const lrt::cuda::AttentionKernelScope kernel(subset ? lrt::cuda::AttentionKernel::gemm
                                                        : lrt::cuda::AttentionKernel::automatic);
#if defined(LRT_CUDA_EMULATOR)
    const auto rounded0 = lrt_cuda_emu::gemm_rounded_calls;
#endif
    compare(run_attention<float, C>(index_t{1} << 40, subset, 64),
            run_attention<float, G>(index_t{1} << 40, subset, 64), 0.1, subset ? "bf16 subset" : "bf16 all");
#if defined(LRT_CUDA_EMULATOR)
    CHECK(lrt_cuda_emu::gemm_rounded_calls > rounded0);  // the automatic choice took the GEMM kernels
#endif
  }
}

TEST_CASE("cuda model: bad ids, targets and positions raise lrt::Error on the GPU too") {
  ad::Graph g;
  auto table = ad::variable(rnd<float, 2, G>(Shape<2>{5, 3}, 1));
  const Tensor<index_t, 2, G> bad = lrt::to<G>(Tensor<index_t, 2>(Tensor<index_t, 2>::full(Shape<2>{1, 2}, 7)));
  CHECK_THROWS_AS(ad::embedding(bad, table), lrt::Error);
  auto z = ad::variable(rnd<float, 2, G>(Shape<2>{2, 5}, 2));
  const Tensor<index_t, 1, G> tg = lrt::to<G>(Tensor<index_t, 1>(Tensor<index_t, 1>::full(Shape<1>{2}, 9)));
  CHECK_THROWS_AS(ad::cross_entropy(z, tg), lrt::Error);
  auto q = ad::variable(rnd<float, 4, G>(Shape<4>{1, 2, 1, 4}, 3));
  auto k = ad::variable(rnd<float, 4, G>(Shape<4>{1, 2, 1, 4}, 4));
  const Tensor<index_t, 1, G> qpos = lrt::to<G>(Tensor<index_t, 1>(Tensor<index_t, 1>::full(Shape<1>{2}, 1)));
  CHECK_THROWS_AS(ad::attention(q, k, k, qpos, 100), lrt::Error);                       // not strictly increasing
  CHECK_THROWS_AS(ad::attention(q, k, k, lrt::IndexList<G>({0, 2}), 100), lrt::Error);  // 2 >= Tk (host check)
  {
    const ad::TokenIds<G> deferred(bad, 5);                 // checked once for all lookups, on the device:
    CHECK_THROWS_AS(lrt::cuda::synchronize(), lrt::Error);  // raised at the next wait
  }
  const Tensor<index_t, 2, G> four = lrt::to<G>(Tensor<index_t, 2>(Tensor<index_t, 2>::full(Shape<2>{1, 2}, 4)));
  const ad::TokenIds<G> ok(four, 5);
  auto small = ad::variable(rnd<float, 2, G>(Shape<2>{4, 3}, 5));
  CHECK_THROWS_AS(ad::embedding(ok, small), lrt::Error);  // checked against 5 rows, the table has 4
}

/// The elements of a contiguous host tensor.
template <class T, int R>
std::vector<T> elems(const Tensor<T, R, C>& t) {
  return std::vector<T>(t.data(), t.data() + t.numel());
}

template <class T>
void embedding_grad_on_device(index_t N, index_t V, index_t Cc, unsigned seed) {
  CAPTURE(N);
  CAPTURE(V);
  const Tensor<index_t, 2, C> ids2 = ids_of<C>(1, N, std::max<index_t>(1, V / 3), seed);  // many repeats
  const Tensor<index_t, 1, C> ids(ids2.view().template reshape<1>(Shape<1>{N}));
  const auto table = rnd<T, 2, C>(Shape<2>{V, Cc}, seed + 1), gout = rnd<T, 2, C>(Shape<2>{N, Cc}, seed + 2);
  auto gt = rnd<T, 2, C>(Shape<2>{V, Cc}, seed + 3);
  const auto ids_g = lrt::to<G>(ids);
  const auto table_g = lrt::to<G>(table), gout_g = lrt::to<G>(gout);
  auto gt_g = lrt::to<G>(gt);
  Tensor<T, 2, C> out(Shape<2>{N, Cc});
  Tensor<T, 2, G> out_g(Shape<2>{N, Cc});
  lrt::NnBackend<C>::template embedding_forward<T>(ids.view(), table.view(), out.view());
  lrt::NnBackend<C>::template embedding_backward<T>(ids.view(), gout.view(), gt.view());
  const auto plan = lrt::NnBackend<G>::embedding_plan(ids_g.view(), V);
  lrt::NnBackend<G>::template embedding_forward<T>(ids_g.view(), table_g.view(), out_g.view());
  lrt::NnBackend<G>::template embedding_backward<T>(plan, ids_g.view(), gout_g.view(), gt_g.view());
  CHECK(elems(lrt::to<C>(out_g)) == elems(out));
  CHECK(elems(lrt::to<C>(gt_g)) == elems(gt));  // the same additions in the same order: bit for bit
  // The plan-less backward sorts the same way.
  auto gt2_g = lrt::to<G>(rnd<T, 2, C>(Shape<2>{V, Cc}, seed + 3));
  lrt::NnBackend<G>::template embedding_backward<T>(ids_g.view(), gout_g.view(), gt2_g.view());
  CHECK(elems(lrt::to<C>(gt2_g)) == elems(gt));
}

TEST_CASE("cuda model: embedding gradients with repeated ids (grouped on the device) equal the CPU's exactly") {
  embedding_grad_on_device<float>(300, 20, 9, 1);
  embedding_grad_on_device<double>(300, 20, 9, 2);
  embedding_grad_on_device<float>(1, 1, 3, 3);
  embedding_grad_on_device<double>(1000, 700, 5, 4);
  embedding_grad_on_device<float>(64, 1000, 4, 5);
}

TEST_CASE("cuda model: an embedding id out of range raises lrt::Error at the next wait for the GPU") {
  std::vector<index_t> h(12, 3);
  h[7] = 25, h[9] = -1, h[10] = 20;
  Tensor<index_t, 1> ids_h(Shape<1>{12});
  std::copy(h.begin(), h.end(), ids_h.data());
  const Tensor<index_t, 1, G> ids = lrt::to<G>(ids_h);
  const auto table = rnd<float, 2, G>(Shape<2>{20, 2}, 1);
  Tensor<float, 2, G> out(Shape<2>{12, 2}), gt(Shape<2>{20, 2});
  gt.fill(0.f);
  const auto plan = lrt::NnBackend<G>::embedding_plan(ids.view(), 20);  // no throw: nothing waited
  lrt::NnBackend<G>::embedding_forward<float>(ids.view(), table.view(), out.view());
  lrt::NnBackend<G>::embedding_backward<float>(plan, ids.view(), Tensor<float, 2, G>::full(Shape<2>{12, 2}, 1.f).view(),
                                               gt.view());
  bool thrown = false;
  try {
    lrt::cuda::synchronize();
  } catch (const lrt::Error& e) {
    thrown = true;
    CHECK(e.op() == std::string("embedding"));
    CHECK(std::string(e.what()) == "[embedding] id 25 at position 7 out of range for a table of 20 rows");
  }
  CHECK(thrown);
  lrt::cuda::synchronize();  // raised once
  // The kernels never read or wrote out of range: zero rows for bad ids, the other rows added.
  const auto o = lrt::to<C>(out), g = lrt::to<C>(gt), t = lrt::to<C>(table);
  for (index_t i = 0; i < 12; ++i)
    for (index_t j = 0; j < 2; ++j) CHECK(o(i, j) == (i == 7 || i == 9 || i == 10 ? 0.f : t(3, j)));
  for (index_t r = 0; r < 20; ++r) CHECK(g(r, 0) == (r == 3 ? 9.f : 0.f));
  // A copy to the host raises it too; a TokenIds of bad ids the same.
  {
    const ad::TokenIds<G> tok(lrt::to<G>(Tensor<index_t, 2>::full(Shape<2>{1, 3}, -4)), 5);
    CHECK_THROWS_WITH_AS(lrt::to<C>(out), "[embedding] id -4 at position 0 out of range for a table of 5 rows",
                         lrt::Error);
  }
}

#if defined(LRT_CUDA_EMULATOR)
TEST_CASE("cuda model (emulator): an embedding plan, forward and backward never wait for the GPU") {
  const Tensor<index_t, 1, G> ids =
      lrt::to<G>(Tensor<index_t, 1>(ids_of<C>(1, 50, 7, 3).view().template reshape<1>(Shape<1>{50})));
  const auto table = rnd<float, 2, G>(Shape<2>{9, 4}, 1), gout = rnd<float, 2, G>(Shape<2>{50, 4}, 2);
  Tensor<float, 2, G> out(Shape<2>{50, 4}), gt(Shape<2>{9, 4});
  gt.fill(0.f);
  lrt::cuda::synchronize();
  const auto s0 = lrt_cuda_emu::stream_syncs, c0 = lrt_cuda_emu::device_to_host_copies;
  {
    const auto plan = lrt::NnBackend<G>::embedding_plan(ids.view(), 9);
    lrt::NnBackend<G>::embedding_forward<float>(ids.view(), table.view(), out.view());
    lrt::NnBackend<G>::embedding_backward<float>(plan, ids.view(), gout.view(), gt.view());
    lrt::NnBackend<G>::embedding_backward<float>(ids.view(), gout.view(), gt.view());  // plan-less
    const ad::TokenIds<G> tok(lrt::to<G>(Tensor<index_t, 2>(ids_of<C>(2, 5, 7, 4))), 9);
  }
  CHECK(lrt_cuda_emu::stream_syncs - s0 == 0);
  CHECK(lrt_cuda_emu::device_to_host_copies - c0 == 0);
}
#endif

// ---------------------------------------------------------------------------------------------
// Sampling on the device (lrt::sample_tokens -> DeviceSampler<cuda::Device>) against sample_token

namespace sample_case {
/// Logits (B, Vp) with many exact ties (values on a coarse grid) and padding columns.
template <class T>
Tensor<T, 2> logits(index_t B, index_t Vp, unsigned seed, double scale) {
  Tensor<T, 2> h(Shape<2>{B, Vp});
  std::uint64_t x = seed * 2654435761u + 7;
  for (index_t i = 0; i < B * Vp; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const double g = static_cast<double>((x >> 40) % 41) - 20;  // 41 values: ties in every row
    h.data()[i] = static_cast<T>(g * scale / 8);
  }
  return h;
}

/// The CPU's tokens: sample_token per row over the first vocab columns.
template <class T>
std::vector<index_t> cpu_tokens(const Tensor<T, 2>& h, index_t vocab, const lrt::SamplerOptions& o,
                                const std::vector<std::uint64_t>& ctr) {
  std::vector<index_t> out;
  for (index_t r = 0; r < h.shape()[0]; ++r)
    out.push_back(lrt::sample_token<T>(std::span<const T>(h.data() + r * h.shape()[1], static_cast<std::size_t>(vocab)),
                                       o, ctr[static_cast<std::size_t>(r)]));
  return out;
}

std::vector<std::uint64_t> counters(index_t B, index_t t) {
  std::vector<std::uint64_t> c;
  for (index_t r = 0; r < B; ++r) c.push_back(lrt::sample_counter(r, t));
  return c;
}
}  // namespace sample_case

TEST_CASE("cuda sampler: greedy equals the CPU's argmax (ties to the lowest id), only the ids come back") {
  for (int k = 0; k < 3; ++k) {
    const index_t B = 7, Vp = 300, vocab = k == 2 ? 1 : 290;
    const auto h = sample_case::logits<float>(B, Vp, 10 + k, k == 1 ? 0.0 : 1.0);  // k == 1: all equal
    const auto hd = sample_case::logits<double>(B, Vp, 20 + k, 1.0);
    lrt::SamplerOptions o;
    o.temperature = 0;
    const auto ctr = sample_case::counters(B, 3);
    CHECK(lrt::sample_tokens(lrt::to<G>(h), vocab, o, ctr) == sample_case::cpu_tokens(h, vocab, o, ctr));
    CHECK(lrt::sample_tokens(h, vocab, o, ctr) == sample_case::cpu_tokens(h, vocab, o, ctr));
    CHECK(lrt::sample_tokens(lrt::to<G>(hd), vocab, o, ctr) == sample_case::cpu_tokens(hd, vocab, o, ctr));
  }
#if defined(LRT_CUDA_EMULATOR)
  const auto g = lrt::to<G>(sample_case::logits<float>(4, 64, 1, 1.0));
  lrt::cuda::synchronize();
  const auto s0 = lrt_cuda_emu::stream_syncs, c0 = lrt_cuda_emu::device_to_host_copies;
  lrt::SamplerOptions o;
  o.top_p = 0.5, o.top_k = 9;
  (void)lrt::sample_tokens(g, 60, o, sample_case::counters(4, 0));
  CHECK(lrt_cuda_emu::stream_syncs - s0 == 1);  // the B ids: one copy back, one wait
  CHECK(lrt_cuda_emu::device_to_host_copies - c0 == 1);
#endif
}

TEST_CASE("cuda sampler: seeded temperature / top-k / top-p draws equal the CPU's sample_token") {
  const index_t B = 40, Vp = 136, vocab = 130;
  std::vector<lrt::SamplerOptions> opts(7);
  opts[0].temperature = 1.0;
  opts[1].temperature = 0.7, opts[1].top_k = 10;
  opts[2].temperature = 1.3, opts[2].top_p = 0.9;
  opts[3].temperature = 0.5, opts[3].top_k = 50, opts[3].top_p = 0.8;
  opts[4].temperature = 2.0, opts[4].top_k = 1;  // a tie at the k-th: all tied values kept
  opts[5].temperature = 0.9, opts[5].top_p = 1e-9;
  opts[6].temperature = 1.0, opts[6].top_k = vocab;
  std::size_t draws = 0, mismatches = 0;
  for (std::size_t i = 0; i < opts.size(); ++i) {
    CAPTURE(i);
    opts[i].seed = 100 + i;
    const auto h = sample_case::logits<float>(B, Vp, static_cast<unsigned>(i), 1.5);
    const auto g = lrt::to<G>(h);
    for (index_t t = 0; t < 8; ++t) {
      const auto ctr = sample_case::counters(B, t * 1000 + 1);
      const auto want = sample_case::cpu_tokens(h, vocab, opts[i], ctr);
      const auto got = lrt::sample_tokens(g, vocab, opts[i], ctr);
      CHECK(lrt::sample_tokens(h, vocab, opts[i], ctr) == want);  // the host path is sample_token
      REQUIRE(got.size() == want.size());
      for (std::size_t r = 0; r < got.size(); ++r) {
        ++draws;
        mismatches += got[r] != want[r];
        CHECK(got[r] >= 0);
        CHECK(got[r] < vocab);
      }
    }
  }
  MESSAGE("device vs CPU sampler: " << mismatches << " of " << draws << " seeded draws differ");
  // The device sums in another order: a draw may differ when u lies within rounding of a boundary
  // (about 1e-15 of a draw's range per boundary: never in practice).
  CHECK(mismatches * 1000 <= draws);
#if defined(LRT_CUDA_EMULATOR)
  CHECK(mismatches == 0);  // the same exp as the host; only the order of the additions differs
#endif
}

TEST_CASE("cuda sampler: bad options and shapes raise lrt::Error naming sample") {
  const auto g = lrt::to<G>(sample_case::logits<float>(2, 8, 1, 1.0));
  const auto ctr = sample_case::counters(2, 0);
  const auto bad = [&](lrt::SamplerOptions o, index_t vocab, std::vector<std::uint64_t> c) {
    try {
      (void)lrt::sample_tokens(g, vocab, o, c);
    } catch (const lrt::Error& e) {
      return e.op() == std::string("sample");
    }
    return false;
  };
  lrt::SamplerOptions o;
  CHECK(bad(o, 9, ctr));  // vocab larger than the logits' columns
  CHECK(bad(o, 0, ctr));
  CHECK(bad(o, 8, {1}));  // one counter for two rows
  o.temperature = -0.5;
  CHECK(bad(o, 8, ctr));
  o = {};
  o.top_p = 0;
  CHECK(bad(o, 8, ctr));
  o.top_p = 1.5;
  CHECK(bad(o, 8, ctr));
  o = {};
  o.top_k = -1;
  CHECK(bad(o, 8, ctr));
}

TEST_CASE("cuda model: whole-model loss, logits and gradients match the CPU (baseline and LRT variants)") {
  model_matches<vs::Baseline, lrt::Standard, double>("baseline standard double");
  model_matches<vs::Lrt, lrt::Interleaved<2>, double>("lrt interleaved<2> double");
  model_matches<vs::LrtRelease, lrt::Interleaved<3>, double>("lrt-release interleaved<3> double");
  model_matches<vs::Lrt, lrt::MultiRefine<2>, double>("lrt multirefine<2> double");
  model_matches<vs::Lrt, lrt::Exact, double>("lrt exact double", 2, 6);
  model_matches<vs::Baseline, lrt::Standard, float>("baseline standard float");
  model_matches<vs::Lrt, lrt::Interleaved<2>, float>("lrt interleaved<2> float");
}

/// ||a - b|| / ||b|| (0 when both are 0).
double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), n += b[i] * b[i];
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

/// The float model on the GPU with bf16 matmuls against itself with fp32 matmuls: the loss within
/// 2% (relative), logits and each parameter's gradient within a relative L2 error of 0.1 (all
/// logits and gradients together: 0.05; the per-layer scalars, whose gradients are sums with
/// cancellation, count only there). Measured on the emulator (inputs rounded to nearest even):
/// loss 1e-4..4e-4, worst tensor 0.046, all 0.010-0.012, scalars up to 0.12.
template <class V, class Sched>
void bf16_tracks_fp32(const char* what) {
  INFO(std::string(what));
  const auto c = small_cfg(12);
  lrt::Model<V, float, C> mc(c, 1);
  lrt::Model<V, float, G> mg(c, 1);
  copy_random_weights(mc, mg, 400);
  const auto ids = lrt::to<G>(ids_of<C>(2, 12, c.vocab_size, 5)), tg = lrt::to<G>(ids_of<C>(2, 12, c.vocab_size, 6));
  const auto full = model_run<Sched>(mg, ids, tg);
#if defined(LRT_CUDA_EMULATOR)
  const auto rounded0 = lrt_cuda_emu::gemm_rounded_calls;
#endif
  std::vector<std::vector<double>> half;
  {
    const lrt::cuda::MatmulPrecisionScope bf16(lrt::cuda::MatmulPrecision::bf16);
    half = model_run<Sched>(mg, ids, tg);
  }
#if defined(LRT_CUDA_EMULATOR)
  CHECK(lrt_cuda_emu::gemm_rounded_calls > rounded0);
#endif
  REQUIRE(full.size() == half.size());
  const double loss_rel = std::abs(half[0][0] - full[0][0]) / std::abs(full[0][0]);
  std::vector<double> all_full, all_half;
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t i = 1; i < full.size(); ++i) {
    const double e = rel_l2(half[i], full[i]);
    if (full[i].size() >= 16 && e > worst) worst = e, worst_at = i;  // per-layer scalars: `all` only
    all_full.insert(all_full.end(), full[i].begin(), full[i].end());
    all_half.insert(all_half.end(), half[i].begin(), half[i].end());
  }
  const double all = rel_l2(all_half, all_full);
  MESSAGE(std::string(what) << ": bf16 vs fp32 loss rel " << loss_rel << ", worst tensor rel L2 " << worst
                            << " (tensor " << worst_at << "), all " << all);
  CHECK(loss_rel <= 0.02);
  CHECK(worst <= 0.1);
  CHECK(all <= 0.05);
#if defined(LRT_CUDA_EMULATOR)
  CHECK(all > 0);  // the emulator always rounds: the runs must differ
#endif
}

TEST_CASE("cuda model: bf16 matmuls (fp32 weights) track the fp32 model") {
  bf16_tracks_fp32<vs::Baseline, lrt::Standard>("baseline standard");
  bf16_tracks_fp32<vs::Lrt, lrt::Interleaved<2>>("lrt interleaved<2>");
}

#if defined(LRT_CUDA_EMULATOR)
/// Host waits (stream synchronisations and copies back) of one forward + backward of schedule
/// Sched on a float model with n_layer layers (the emulator counts them).
template <class V, class Sched>
std::pair<std::uint64_t, std::uint64_t> waits_per_step(index_t n_layer) {
  auto c = small_cfg(12);
  c.n_layer = n_layer;
  lrt::Model<V, float, G> m(c, 1);
  const auto ids = lrt::to<G>(ids_of<C>(2, 12, c.vocab_size, 5)), tg = lrt::to<G>(ids_of<C>(2, 12, c.vocab_size, 6));
  const auto s0 = lrt_cuda_emu::stream_syncs, c0 = lrt_cuda_emu::device_to_host_copies;
  {
    ad::Graph g;
    m.zero_grad();
    auto r = lrt::schedule_loss<Sched>(m, ids, tg);
    ad::backward(r.loss);
  }
  return {lrt_cuda_emu::stream_syncs - s0, lrt_cuda_emu::device_to_host_copies - c0};
}

TEST_CASE("cuda model (emulator): a training step's waits for the GPU do not grow with the layers") {
  // Per pass the host still reads the targets (the loss's token count) and, for LRT, the ids
  // (memory rows cut at BOS); nothing per layer: lambdas, gamma and their gradients stay on the
  // device, attention positions are checked from their IndexList's host copy.
  const auto b2 = waits_per_step<vs::Baseline, lrt::Standard>(2), b4 = waits_per_step<vs::Baseline, lrt::Standard>(4);
  const auto l2 = waits_per_step<vs::Lrt, lrt::Interleaved<2>>(2), l4 = waits_per_step<vs::Lrt, lrt::Interleaved<2>>(4);
  MESSAGE("syncs / copies back per step: baseline " << b2.first << " / " << b2.second << ", lrt interleaved<2> "
                                                    << l2.first << " / " << l2.second);
  CHECK(b2 == b4);
  CHECK(l2 == l4);
}
#endif

TEST_CASE("cuda model: LRT invariants hold on the GPU (decode == Exact == Interleaved<S >= T>)") {
  const index_t B = 2, Tt = 10;
  auto c = small_cfg(Tt);
  c.vocab_size = 260;  // room for BOS (256): rows cross a document boundary
  c.reset_at_bos = true;
  lrt::Model<vs::Lrt, double, C> mc(c, 3);
  lrt::Model<vs::Lrt, double, G> mg(c, 3);
  copy_random_weights(mc, mg, 200);
  auto ids_h = ids_of<C>(B, Tt, c.vocab_size, 4);
  ids_h(0, 0) = 256, ids_h(1, 4) = 256;
  const auto ids = lrt::to<G>(ids_h);
  const auto exact = merged_logits<lrt::Exact>(mg, ids);
  check_close(decode_logits(mg, ids), exact, 1e-10, "decode vs exact (gpu)");
  check_close(merged_logits<lrt::Interleaved<16>>(mg, ids), exact, 1e-10, "interleaved<16> vs exact (gpu)");
  check_close(exact, merged_logits<lrt::Exact>(mc, ids_h), 1e-9, "exact gpu vs cpu");
  // Baseline: decode == the Standard forward.
  lrt::Model<vs::Baseline, double, C> bc(c, 5);
  lrt::Model<vs::Baseline, double, G> bg(c, 5);
  copy_random_weights(bc, bg, 300);
  check_close(decode_logits(bg, ids), merged_logits<lrt::Standard>(bg, ids), 1e-10,
              "baseline decode vs standard (gpu)");
}

/// Graph replay vs eager decoding: the same kernels on the same data, so equal bit for bit on the
/// emulator. On a GPU cuBLAS may pick another algorithm for a captured GEMM than for the eager one
/// (same inputs, another summation order), so there the check allows rounding-level differences
/// (a graph replaying stale inputs is off by O(1)).
constexpr double graph_vs_eager_tol(bool is_double) {
#if defined(LRT_CUDA_EMULATOR)
  (void)is_double;
  return 0.0;
#else
  return is_double ? 1e-12 : 1e-5;
#endif
}

TEST_CASE("cuda model: decoding through a CUDA graph gives the eager decoder's logits (bit for bit on the emulator)") {
  const index_t B = 2, Tt = 9;
  auto c = small_cfg(Tt);
  c.window_pattern = "SL";  // a window shorter than the context: the graph attends over the whole cache buffer
  lrt::Model<vs::Baseline, double, C> bc(c, 5);
  lrt::Model<vs::Baseline, double, G> bg(c, 5);
  copy_random_weights(bc, bg, 600);
  const auto ids = lrt::to<G>(ids_of<C>(B, Tt, c.vocab_size, 8));
  index_t replays = 0;
#if defined(LRT_CUDA_EMULATOR)
  const auto launches0 = lrt_cuda_emu::stats.graph_launches;
#endif
  const auto eager = decode_logits(bg, ids);
  const auto graphed = decode_logits(bg, ids, true, &replays);
  CHECK(replays == Tt - 1);  // step 1 warms up eagerly, step 2 records and replays, then replays
  check_close(graphed, eager, graph_vs_eager_tol(true), "baseline double: graph vs eager");
#if defined(LRT_CUDA_EMULATOR)
  CHECK(lrt_cuda_emu::stats.graph_launches - launches0 == static_cast<std::uint64_t>(Tt - 1));
#endif
  // Float, and an LRT model decoding in mode zero (no recurrent memory: graphed too).
  lrt::Model<vs::Baseline, float, C> fc(c, 6);
  lrt::Model<vs::Baseline, float, G> fg(c, 6);
  copy_random_weights(fc, fg, 700);
  check_close(decode_logits(fg, ids, true), decode_logits(fg, ids), graph_vs_eager_tol(false),
              "baseline float: graph vs eager");
  lrt::Model<vs::Lrt, double, C> lc(c, 7);
  lrt::Model<vs::Lrt, double, G> lg(c, 7);
  copy_random_weights(lc, lg, 800);
  index_t lrt_replays = 0;
  check_close(decode_logits(lg, ids, true, &lrt_replays, true), decode_logits(lg, ids, false, nullptr, true),
              graph_vs_eager_tol(true), "lrt mode zero: graph vs eager");
  CHECK(lrt_replays == Tt - 2);  // the prompt token went through prefill
  // With the recurrent memory (ring slots and masks as graph inputs), across BOS tokens too.
  auto cb = c;
  cb.vocab_size = 260;
  cb.reset_at_bos = true;
  lrt::Model<vs::Lrt, double, C> rc(cb, 9);
  lrt::Model<vs::Lrt, double, G> rg(cb, 9);
  copy_random_weights(rc, rg, 900);
  auto ids_b = ids_of<C>(B, Tt, cb.vocab_size, 10);
  ids_b(0, 3) = 256, ids_b(1, 6) = 256;
  const auto idsb = lrt::to<G>(ids_b);
  const auto exact = merged_logits<lrt::Exact>(rg, idsb);
  check_close(decode_logits(rg, idsb, true, &lrt_replays), exact, 1e-10, "lrt memory: graph vs exact");
  CHECK(lrt_replays == Tt - 1);
  check_close(decode_logits(rg, idsb, true), decode_logits(rg, idsb), graph_vs_eager_tol(true),
              "lrt memory: graph vs eager");
}

TEST_CASE("cuda model: decoding past the training context (eager and from a graph) == Exact over the whole sequence") {
  const index_t B = 2, Tt = 6, N = 5 * Tt;  // every layer's cache moves its keys to the front several times
  auto c = small_cfg(Tt);
  c.window_pattern = "SL";
  lrt::Model<vs::Lrt, double, C> mc(c, 3);
  lrt::Model<vs::Lrt, double, G> mg(c, 3);
  copy_random_weights(mc, mg, 1000);
  const auto ids_h = ids_of<C>(B, N, c.vocab_size, 11);
  const auto ids = lrt::to<G>(ids_h);
  const auto exact = merged_logits<lrt::Exact>(mc, ids_h);  // CPU, no gradients, N > sequence_len
  check_close(decode_logits(mg, ids), exact, 1e-10, "lrt past T: gpu eager vs cpu exact");
  index_t replays = 0;
  check_close(decode_logits(mg, ids, true, &replays), exact, 1e-10, "lrt past T: gpu graph vs cpu exact");
  CHECK(replays == N - 1);
  lrt::Model<vs::Baseline, double, C> bc(c, 5);
  lrt::Model<vs::Baseline, double, G> bg(c, 5);
  copy_random_weights(bc, bg, 1100);
  const auto standard = merged_logits<lrt::Exact>(bc, ids_h);
  check_close(decode_logits(bg, ids, true), standard, 1e-10, "baseline past T: gpu graph vs cpu");
}

// ------------------------------------------------------------------ the Trainer on the GPU

namespace train_case {

/// Deterministic byte documents (words from a small vocabulary, varied lengths).
std::vector<lrt::data::Document> docs(int n) {
  static const char* words[] = {"the",   "model", "keeps", "a",  "memory", "of",    "each", "token", "and", "its",
                                "state", "moves", "on",    "to", "next",   "layer", "in",   "time",  "."};
  std::vector<lrt::data::Document> out;
  std::uint64_t x = 12345;
  for (int d = 0; d < n; ++d) {
    lrt::data::Document doc;
    doc.name = "doc" + std::to_string(d);
    const int len = 6 + d % 17;
    for (int w = 0; w < len; ++w) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      doc.text += std::string(w ? " " : "") + words[(x >> 33) % (sizeof words / sizeof *words)];
    }
    out.push_back(std::move(doc));
  }
  return out;
}

lrt::ModelConfig cfg() {
  auto c = small_cfg(8);
  c.n_layer = 2;
  c.vocab_size = 257;  // the byte tokenizer's (BOS 256)
  return c;
}

/// Two rows a step, in micro-batches of micro_rows (1: accumulation over two).
lrt::TrainOptions opts(index_t micro_rows = 1) {
  lrt::TrainOptions o;
  o.batch_rows = 2, o.micro_rows = micro_rows, o.steps = 8, o.seed = 3;
  return o;
}

/// A fresh directory under the system's temporary directory, removed by the destructor.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag) {
    path = (std::filesystem::temp_directory_path() / ("lrt-cuda-trainer-" + tag + "-" + std::to_string(::getpid())))
               .string();
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::string file_bytes(const std::string& path) { return lrt::read_file(path, "test"); }

/// Every parameter of a model (any device) on the host, in visiting order.
template <class M>
std::vector<std::vector<double>> weights(const M& m) {
  std::vector<std::vector<double>> out;
  m.for_each_param([&](auto& p) { out.push_back(host(p.value())); });
  return out;
}

/// Losses of a few steps within float rounding of the other device's (relative 2e-4).
void check_losses(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
  check_close(a, b, 2e-4, what);
}

template <class Tr>
std::vector<double> run_steps(Tr& tr, int n) {
  std::vector<double> l;
  for (int i = 0; i < n; ++i) l.push_back(tr.train_step().loss);
  return l;
}

/// The CPU Trainer and the GPU Trainer from the same weights: the same losses within rounding,
/// the same bits per byte; a GPU checkpoint resumes on the CPU and a CPU checkpoint on the GPU,
/// both exactly (the resumed trainer saves the same bytes), and the runs continue together.
template <class V, class Sched>
void trainer_on_both(const char* what) {
  INFO(std::string(what));
  const auto c = cfg();
  const auto rows = lrt::data::TokenRows::build(docs(80), static_cast<int>(c.sequence_len));
  const auto val = lrt::data::validation_batches(rows, 2, 32);
  // Random weights: the release's init zeroes the output projections, and the final RMSNorm then
  // makes the loss invariant to the residual and x0 lambdas, whose gradients are rounding noise
  // (~1e-10) that AdamW (eps 1e-10) turns into full steps of either sign on either device.
  lrt::Model<V, float, C> mc(c, 7);
  std::uint64_t seed = 500;
  mc.for_each_param([&](auto& p) { p.value() = lrt::uniform<float>(p.shape(), ++seed, 0, -0.4f, 0.4f); });
  lrt::Model<V, float, G> mg(c, 8);  // another init: the weights come from the CPU's file
  const TempDir init("init");
  std::filesystem::create_directories(init.path);
  lrt::save_model(mc, init.path + "/model.safetensors", 0);
  lrt::load_weights(mg, lrt::st::Reader::open(init.path + "/model.safetensors"));
  const auto w0 = weights(mc), w0g = weights(mg);
  REQUIRE(w0.size() == w0g.size());
  for (std::size_t i = 0; i < w0.size(); ++i) REQUIRE(w0[i] == w0g[i]);  // loaded exactly

  lrt::Trainer<V, Sched, float, C> tc(mc, rows, opts());
  lrt::Trainer<V, Sched, float, G> tg(mg, rows, opts());
  check_losses(run_steps(tg, 2), run_steps(tc, 2), "losses of steps 0-1 (gpu vs cpu)");
  const double bpb_c = tc.evaluate(val).bpb(), bpb_g = tg.evaluate(val).bpb();
  INFO("bits per byte: cpu " << bpb_c << ", gpu " << bpb_g << "; batches " << val.size());
  CHECK(std::abs(bpb_g - bpb_c) <= 2e-4 * bpb_c);

  // GPU -> CPU: the CPU trainer resumes the GPU's checkpoint and saves it again byte for byte.
  const TempDir dg("gpu"), dg2("gpu-again"), dc("cpu"), dc2("cpu-again");
  const std::string sg = tg.save(dg.path);
  lrt::Model<V, float, C> mc2(c, 99);
  lrt::Trainer<V, Sched, float, C> tc2(mc2, rows, opts());
  tc2.resume(dg.path);
  CHECK(tc2.step() == 2);
  const std::string sg2 = tc2.save(dg2.path);
  CHECK(file_bytes(sg2 + "/model.safetensors") == file_bytes(sg + "/model.safetensors"));
  CHECK(file_bytes(sg2 + "/optim.safetensors") == file_bytes(sg + "/optim.safetensors"));

  // CPU -> GPU, the same way.
  const std::string sc = tc.save(dc.path);
  lrt::Model<V, float, G> mg2(c, 99);
  lrt::Trainer<V, Sched, float, G> tg2(mg2, rows, opts());
  tg2.resume(dc.path);
  CHECK(tg2.step() == 2);
  CHECK(weights(mg2) == weights(mc));
  const std::string sc2 = tg2.save(dc2.path);
  CHECK(file_bytes(sc2 + "/model.safetensors") == file_bytes(sc + "/model.safetensors"));
  CHECK(file_bytes(sc2 + "/optim.safetensors") == file_bytes(sc + "/optim.safetensors"));

  // Each resumed run goes on as the run it came from (the data cursor and optimizer state moved).
  check_losses(run_steps(tc2, 2), run_steps(tg, 2), "steps 2-3: cpu resumed from the gpu vs the gpu");
  check_losses(run_steps(tg2, 2), run_steps(tc, 2), "steps 2-3: gpu resumed from the cpu vs the cpu");
}

}  // namespace train_case

TEST_CASE("cuda trainer: the same run as the CPU's, and checkpoints that resume across devices") {
  train_case::trainer_on_both<vs::Baseline, lrt::Standard>("baseline / standard");
  train_case::trainer_on_both<vs::Lrt, lrt::Interleaved<2>>("lrt / interleaved:2");
}

#if defined(LRT_CUDA_EMULATOR)
/// Host waits (syncs, copies back) of one Trainer step at micro_rows rows per micro-batch (2 rows a step).
template <class V, class Sched>
std::pair<std::uint64_t, std::uint64_t> trainer_waits(index_t micro_rows) {
  const auto c = train_case::cfg();
  const auto rows = lrt::data::TokenRows::build(train_case::docs(80), static_cast<int>(c.sequence_len));
  lrt::Model<V, float, G> m(c, 7);
  lrt::Trainer<V, Sched, float, G> tr(m, rows, train_case::opts(micro_rows));
  tr.train_step();  // warm-up
  const auto s0 = lrt_cuda_emu::stream_syncs, c0 = lrt_cuda_emu::device_to_host_copies;
  tr.train_step();
  return {lrt_cuda_emu::stream_syncs - s0, lrt_cuda_emu::device_to_host_copies - c0};
}

TEST_CASE("cuda trainer (emulator): a step waits for the GPU once, plus what each micro-batch's forward reads") {
  for (int v = 0; v < 2; ++v) {
    const auto w = [&](index_t micro) {
      return v == 0 ? trainer_waits<vs::Baseline, lrt::Standard>(micro)
                    : trainer_waits<vs::Lrt, lrt::Interleaved<2>>(micro);
    };
    const auto one = w(2), two = w(1);  // one and two micro-batches a step
    MESSAGE(std::string(v == 0 ? "baseline" : "lrt interleaved:2")
            << ": syncs / copies back per step with 1 and 2 micro-batches: " << one.first << " / " << one.second << ", "
            << two.first << " / " << two.second);
    // A part per micro-batch (its ids go up; what its forward and backward read comes back) and
    // one copy back a step (the losses, before the update); nothing from the optimizers.
    const auto per_sync = two.first - one.first, per_copy = two.second - one.second;
    CHECK(one.first - per_sync == 1);
    CHECK(one.second - per_copy == 1);
  }
}
#endif
