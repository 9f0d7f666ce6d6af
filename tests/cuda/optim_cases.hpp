// tests/cuda/optim_cases.hpp: AdamW and Muon on lrt::cuda::Device against the very same
// optimizers on the CPU (doctest cases, no main). Included by a CUDA test TU that already has
// <lrt/cuda.hpp>, lrt/optim/cuda.cuh, the CPU backend (Eigen GEMM) and doctest.
//
// Every case builds each parameter twice, on the CPU and on the GPU, from the same host tensor
// (lrt's counter-based generators, copied host -> device, so the two start bit-identical), gives
// both the same gradients (generated on the host and copied), steps both with the library's
// schedules and compares the GPU's parameters and saved state with the CPU's. Tolerances are
// explained where they are set. Everything, the cases included, is in namespace
// lrt_cuda_optim_test, so that the including TU's own aliases (G, C, Shape, ...) do not clash.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <lrt/autodiff/graph.hpp>
#include <lrt/optim/cuda.cuh>
#include <lrt/optim/adamw.hpp>
#include <lrt/optim/muon.hpp>
#include <lrt/optim/lr_schedule.hpp>

namespace lrt_cuda_optim_test {

using G = lrt::cuda::Device;
using C = lrt::cpu::Device;
namespace optim = lrt::optim;
namespace ad = lrt::ad;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;

/// One parameter twice: on the CPU and on the GPU, starting from the same values (uniform in
/// [-0.5, 0.5) from `seed`). Gradients come from a host generator with seed `seed + 7777`.
template <int R>
struct Twin {
  ad::Param<float, R, C> cpu;
  ad::Param<float, R, G> gpu;
  lrt::Generator gen;

  Twin(const std::string& name, const Shape<R>& shape, std::uint64_t seed)
      : cpu(Tensor<float, R, C>(lrt::uniform<float>(shape, seed, 0, -0.5f, 0.5f)), name),
        gpu(lrt::to<G>(cpu.value()), name),
        gen(seed + 7777) {}

  /// The same fresh N(0, 1) gradient on both (made on the host, copied to the GPU).
  void set_grad() {
    const Tensor<float, R, C> h(gen.template normal<float>(cpu.shape()));
    *ad::grad_slot(cpu.var()) = h;
    *ad::grad_slot(gpu.var()) = lrt::to<G>(h);
  }
  /// No gradient this step on either side.
  void drop_grad() {
    cpu.zero_grad();
    gpu.zero_grad();
  }
  index_t numel() const { return cpu.shape().numel(); }
};

inline std::vector<float> values(const Tensor<float, 1, C>& t) {
  return std::vector<float>(t.data(), t.data() + t.numel());
}
inline std::vector<float> values(const Tensor<float, 2, C>& t) {
  return std::vector<float>(t.data(), t.data() + t.numel());
}
template <int R>
std::vector<float> values(const Tensor<float, R, G>& t) {
  return values(lrt::to<C>(t));
}

/// Max over i of |a[i] - b[i]| / (atol + rtol |b[i]|): <= 1 means within tolerance.
inline double worst_rel(const std::vector<float>& a, const std::vector<float>& b, double rtol, double atol) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(double(a[i]) - double(b[i]));
    worst = std::max(worst, d / (atol + rtol * std::abs(double(b[i]))));
  }
  return worst;
}

inline std::size_t same_bits_count(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t k = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) k += std::memcmp(&a[i], &b[i], sizeof(float)) == 0;
  return k;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && same_bits_count(a, b) == a.size();
}

inline double rms(const std::vector<double>& d) {
  double s = 0;
  for (double x : d) s += x * x;
  return d.empty() ? 0.0 : std::sqrt(s / double(d.size()));
}

/// Buffers of a save(), by name.
inline std::map<std::string, const optim::NamedBuffer*> by_name(const std::vector<optim::NamedBuffer>& v) {
  std::map<std::string, const optim::NamedBuffer*> m;
  for (const auto& b : v) m[b.name] = &b;
  return m;
}

/// Checks that the GPU's saved state has the CPU's names, shapes and counters, and values within
/// worst_rel(rtol, atol) <= 1 (per buffer name suffix: rtol/atol chosen by the caller).
template <class Tol>
void compare_states(const std::vector<optim::NamedBuffer>& gpu, const std::map<std::string, std::int64_t>& gctr,
                    const std::vector<optim::NamedBuffer>& cpu, const std::map<std::string, std::int64_t>& cctr,
                    Tol tol) {
  CHECK(gctr == cctr);
  REQUIRE(gpu.size() == cpu.size());
  const auto c = by_name(cpu);
  for (const auto& b : gpu) {
    CAPTURE(b.name);
    const auto it = c.find(b.name);
    REQUIRE(it != c.end());
    CHECK(b.shape == it->second->shape);
    const auto [rtol, atol] = tol(b.name);
    CHECK(worst_rel(b.data, it->second->data, rtol, atol) <= 1.0);
  }
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST_CASE("cuda optim: ParamRef::of a device parameter") {
  Twin<2> w("w", Shape<2>{3, 5}, 1);
  const optim::ParamRef rc = optim::ParamRef::of(w.cpu);
  const optim::ParamRef rg = optim::ParamRef::of(w.gpu);
  CHECK(rc.device == nullptr);
  REQUIRE(rg.device != nullptr);
  CHECK(std::string(rg.device->name) == "cuda");
  CHECK(rg.device == optim::DeviceOpsOf<G>::get());
  CHECK(rg.rows == 3);
  CHECK(rg.cols == 5);
  CHECK(rg.rank == 2);
  CHECK(rg.value() == w.gpu.value().data());
  CHECK(rg.grad() == nullptr);
  w.set_grad();
  CHECK(rg.grad() == w.gpu.grad().data());
  cudaPointerAttributes attr{};
  LRT_CUDA_CHECK(cudaPointerGetAttributes(&attr, rg.value()));
  CHECK(attr.type == cudaMemoryTypeDevice);

  ad::Param<float, 1, G> anon(Tensor<float, 1, G>(Shape<1>{2}));
  CHECK_THROWS_AS(optim::ParamRef::of(anon), lrt::Error);
}

TEST_CASE("cuda optim: AdamW on the GPU matches the CPU") {
  // A short vector, a long one (more elements than one grid-stride sweep of the elementwise
  // kernel on an H200: 132 SMs x 32 blocks x 256 threads = 1081344), a wide and a tall matrix.
  Twin<1> vec("vec", Shape<1>{37}, 11);
  Twin<1> big("big", Shape<1>{(index_t{1} << 21) + 5}, 12);
  Twin<2> wide("wide", Shape<2>{8, 24}, 13);
  Twin<2> tall("tall", Shape<2>{24, 8}, 14);
  optim::AdamW oc, og;
  oc.add_group(
      {"vectors", 0.05f, 0.8f, 0.95f, 1e-10f, 0.f, {optim::ParamRef::of(vec.cpu), optim::ParamRef::of(big.cpu)}});
  og.add_group(
      {"vectors", 0.05f, 0.8f, 0.95f, 1e-10f, 0.f, {optim::ParamRef::of(vec.gpu), optim::ParamRef::of(big.gpu)}});
  oc.add_group(
      {"matrices", 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f, {optim::ParamRef::of(wide.cpu), optim::ParamRef::of(tall.cpu)}});
  og.add_group(
      {"matrices", 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f, {optim::ParamRef::of(wide.gpu), optim::ParamRef::of(tall.gpu)}});

  // Tolerance. The kernel performs the CPU loop's float operations one by one with
  // round-to-nearest intrinsics (no FMA contraction, IEEE division and square root), and the
  // step scalars are computed by the same host code, so with a host build that does not contract
  // either (GCC at -std=c++20) the results are bit-identical; the count of identical elements is
  // reported. The bound allows for a host compiler that does contract (one rounding less per
  // multiply-add): a few ulps of |w| (relative 2e-6, ~16 ulp) per run, plus the update's own
  // rounding, step_size (<= 0.05 / (1 - 0.8) = 0.25) x a few ulps of |m / (sqrt(v) + eps)| (= O(1)),
  // i.e. <= 0.25 x 1e-6 per step, six steps: absolute 2e-6.
  const double rtol = 2e-6, atol = 2e-6;
  const std::int64_t N = 6;
  std::size_t identical = 0, total = 0;
  for (std::int64_t it = 0; it < N; ++it) {
    CAPTURE(it);
    vec.set_grad();
    big.set_grad();
    wide.set_grad();
    if (it == 2)
      tall.drop_grad();  // skipped: value and state (and its step count) stay put
    else
      tall.set_grad();
    const std::vector<float> tall_before = values(tall.gpu.value());
    const float mult = optim::lr_multiplier(it, N);
    oc.step(mult);
    og.step(mult);
    if (it == 2) CHECK(same_bits(values(tall.gpu.value()), tall_before));
    const std::vector<float> pairs[4][2] = {
        {values(vec.gpu.value()), values(vec.cpu.value())},
        {values(big.gpu.value()), values(big.cpu.value())},
        {values(wide.gpu.value()), values(wide.cpu.value())},
        {values(tall.gpu.value()), values(tall.cpu.value())},
    };
    for (int k = 0; k < 4; ++k) {
      CAPTURE(k);
      CHECK(worst_rel(pairs[k][0], pairs[k][1], rtol, atol) <= 1.0);
      identical += same_bits_count(pairs[k][0], pairs[k][1]);
      total += pairs[k][0].size();
    }
  }
  MESSAGE("AdamW GPU vs CPU: ", identical, " of ", total, " parameter values bit-identical");
  CHECK(og.steps() == N);

  // The saved state: the same names, shapes and counters ("adamw.tall.step" is N - 1 on both),
  // m and v within the same kind of bound (m, v = O(1); the state's own rounding only).
  std::vector<optim::NamedBuffer> bc, bg;
  std::map<std::string, std::int64_t> cc, cg;
  oc.save(bc, cc);
  og.save(bg, cg);
  CHECK(cg.at("adamw.tall.step") == N - 1);
  compare_states(bg, cg, bc, cc, [](const std::string&) { return std::pair<double, double>{2e-6, 1e-7}; });
  lrt::cuda::synchronize();
}

TEST_CASE("cuda optim: polar_express on the GPU matches the CPU") {
  // Tolerance. Both sides run the same fp32 algorithm; they differ in the GEMMs (Eigen vs cuBLAS:
  // summation order, FMAs) and in the order of the fp64 norm. The CPU's fp32 result is within 1e-4
  // relative + 1e-5 absolute of a double reference (tests/unit/optim/test_optimizers.cpp), so two
  // fp32 runs differ by about twice that. Square inputs may have tiny singular values, along which
  // Polar Express amplifies perturbations by up to the product of the a coefficients (~990), so the
  // bound is on the relative Frobenius error (1e-3: observed fp32 errors are ~1e-6) and the largest
  // element error relative to the largest element (2e-3). A wrong transposition, coefficient or
  // normalisation gives O(1).
  struct Case {
    index_t r, c;
  };
  for (const Case cs : {Case{8, 24}, Case{24, 8}, Case{16, 16}, Case{96, 200}, Case{200, 96}, Case{1, 5}}) {
    CAPTURE(cs.r);
    CAPTURE(cs.c);
    const Tensor<float, 2, C> u(lrt::normal<float>(Shape<2>{cs.r, cs.c}, 99 + cs.r, 0));
    std::vector<float> xc(static_cast<std::size_t>(u.numel()));
    optim::polar_express(u.data(), cs.r, cs.c, xc.data());
    Tensor<float, 2, G> ug = lrt::to<G>(u), xg(Shape<2>{cs.r, cs.c});
    lrt::cuda::polar_express(ug.data(), cs.r, cs.c, xg.data());
    const std::vector<float> xgv = values(xg);
    double num = 0, den = 0, dmax = 0, xmax = 0;
    for (std::size_t i = 0; i < xc.size(); ++i) {
      const double d = double(xgv[i]) - double(xc[i]);
      num += d * d;
      den += double(xc[i]) * double(xc[i]);
      dmax = std::max(dmax, std::abs(d));
      xmax = std::max(xmax, std::abs(double(xc[i])));
    }
    CHECK(std::sqrt(num / den) <= 1e-3);
    CHECK(dmax <= 2e-3 * xmax);
    // In place (out == u) gives the same bits as out-of-place on the same GPU.
    lrt::cuda::polar_express(ug.data(), cs.r, cs.c, ug.data());
    CHECK(same_bits(values(ug), xgv));
    // Fewer steps work too (2 steps: still the CPU's).
    optim::polar_express(u.data(), cs.r, cs.c, xc.data(), 2);
    Tensor<float, 2, G> ug2 = lrt::to<G>(u);
    lrt::cuda::polar_express(ug2.data(), cs.r, cs.c, ug2.data(), 2);
    const std::vector<float> x2 = values(ug2);
    double n2 = 0, d2 = 0;
    for (std::size_t i = 0; i < xc.size(); ++i) {
      n2 += (double(x2[i]) - double(xc[i])) * (double(x2[i]) - double(xc[i]));
      d2 += double(xc[i]) * double(xc[i]);
    }
    CHECK(std::sqrt(n2 / d2) <= 1e-3);
  }
  Tensor<float, 2, G> x(Shape<2>{2, 2});
  CHECK_THROWS_AS(lrt::cuda::polar_express(x.data(), 2, 2, x.data(), 6), lrt::Error);
  CHECK_THROWS_AS(lrt::cuda::polar_express(x.data(), 0, 2, x.data()), lrt::Error);
  lrt::cuda::synchronize();
}

/// Follows one matrix through Muon steps on both devices and checks the GPU's W against the
/// CPU's after each step.
///
/// Tolerance. The update is lr_eff X; X is the fp32 Polar Express output, which on the two devices
/// differs by the GEMMs' rounding (see the polar_express case).
/// tests/unit/optim/test_optimizers.cpp bounds the CPU's update error against a double reference by
/// 1e-3 of the update's RMS (observed: ~1e-5), so each step may move the two W apart by 1e-3 x
/// RMS(update) per element (accumulated over the steps: a difference, once made, is carried on; the
/// gradients do not depend on W) plus a few ulps of |W| (1e-6 relative).
/// One exception: cautious weight decay masks w where X (.) W >= 0, and where X is within
/// rounding of 0 the two devices may decide differently; the element then differs by up to
/// lr_eff wd |w| (and keeps that difference). Such elements are rare (probability ~ the relative
/// rounding error of X, ~1e-6 per element and step): an element outside the rounding bound but
/// within it plus the accumulated lr_eff wd max|W| counts as a flip; at most max(2, n / 1000)
/// flips per matrix are accepted, and none elsewhere.
struct MuonTrack {
  Twin<2>* t;
  std::vector<char> flipped;
  double tol = 0, flip = 0;
  int bad = 0;

  explicit MuonTrack(Twin<2>& tw) : t(&tw), flipped(static_cast<std::size_t>(tw.numel()), 0) {}

  void check_step(const std::vector<float>& cpu_before, double lr_eff, double wd) {
    const std::vector<float> wc = values(t->cpu.value()), wg = values(t->gpu.value());
    std::vector<double> upd(wc.size());
    double wmax = 0;
    for (std::size_t i = 0; i < wc.size(); ++i) {
      upd[i] = double(wc[i]) - double(cpu_before[i]);
      wmax = std::max(wmax, std::abs(double(cpu_before[i])));
    }
    tol += 1e-3 * rms(upd);
    flip += 1.01 * lr_eff * wd * wmax;
    for (std::size_t i = 0; i < wc.size(); ++i) {
      const double d = std::abs(double(wg[i]) - double(wc[i]));
      const double bound = tol + 1e-6 * std::abs(double(wc[i]));
      if (d <= bound) continue;
      if (d <= bound + flip)
        flipped[i] = 1;
      else
        ++bad;
    }
  }
  std::size_t flips() const { return static_cast<std::size_t>(std::count(flipped.begin(), flipped.end(), char(1))); }
};

TEST_CASE("cuda optim: Muon on the GPU matches the CPU") {
  // Wide, tall and square (per-row statistics, A = X X^T), tall (per-row, A = X^T X), wide
  // (per-column), and two larger ones (several blocks in the norm's first pass).
  std::vector<std::unique_ptr<Twin<2>>> tw;
  tw.push_back(std::make_unique<Twin<2>>("wide", Shape<2>{8, 24}, 21));
  tw.push_back(std::make_unique<Twin<2>>("tall", Shape<2>{24, 8}, 22));
  tw.push_back(std::make_unique<Twin<2>>("square", Shape<2>{16, 16}, 23));
  tw.push_back(std::make_unique<Twin<2>>("big_wide", Shape<2>{96, 200}, 24));
  tw.push_back(std::make_unique<Twin<2>>("big_tall", Shape<2>{200, 96}, 25));
  const float lr = 0.02f, base_wd = 0.2f;
  optim::Muon mc(optim::MuonOptions{lr, 0.95f, 5}), mg(optim::MuonOptions{lr, 0.95f, 5});
  std::vector<MuonTrack> tracks;
  for (auto& t : tw) {
    mc.add(optim::ParamRef::of(t->cpu));
    mg.add(optim::ParamRef::of(t->gpu));
    tracks.emplace_back(*t);
  }
  const std::int64_t N = 6;
  for (std::int64_t it = 0; it < N; ++it) {
    CAPTURE(it);
    for (std::size_t k = 0; k < tw.size(); ++k) {
      if (it == 3 && k == 1)
        tw[k]->drop_grad();  // "tall" skips a step: W and state stay put
      else
        tw[k]->set_grad();
    }
    std::vector<std::vector<float>> before;
    for (auto& t : tw) before.push_back(values(t->cpu.value()));
    const std::vector<float> tall_gpu_before = values(tw[1]->gpu.value());
    const float mult = optim::lr_multiplier(it, N), mu = optim::muon_momentum(it);
    const float wd = optim::muon_weight_decay(it, N, base_wd);
    mc.step(mult, mu, wd);
    mg.step(mult, mu, wd);
    if (it == 3) CHECK(same_bits(values(tw[1]->gpu.value()), tall_gpu_before));
    for (std::size_t k = 0; k < tw.size(); ++k) {
      const Shape<2> s = tw[k]->cpu.shape();
      const double lr_eff = double(lr) * double(mult) * std::sqrt(std::max(1.0, double(s[0]) / double(s[1])));
      tracks[k].check_step(before[k], lr_eff, double(wd));
    }
  }
  CHECK(mg.steps() == N);
  for (std::size_t k = 0; k < tw.size(); ++k) {
    CAPTURE(tw[k]->cpu.name());
    CHECK(tracks[k].bad == 0);
    CHECK(tracks[k].flips() <= std::max<std::size_t>(2, static_cast<std::size_t>(tw[k]->numel()) / 1000));
    if (tracks[k].flips() > 0)
      MESSAGE("Muon GPU vs CPU: ", tracks[k].flips(), " cautious-decay mask flip(s) in ", tw[k]->cpu.name());
  }

  // The saved state. Momentum depends only on the gradients, through the same elementwise float
  // operations: bit-identical as for AdamW, bounded like it (relative 2e-6, absolute 1e-7 for
  // values of O(1)). The second moment is an EMA of mean(X^2) over the shorter axis: relative
  // 1e-3, the bound on X's relative error twice over with room (observed ~1e-5).
  std::vector<optim::NamedBuffer> bc, bg;
  std::map<std::string, std::int64_t> cc, cg;
  mc.save(bc, cc);
  mg.save(bg, cg);
  compare_states(bg, cg, bc, cc, [](const std::string& name) {
    return ends_with(name, ".momentum") ? std::pair<double, double>{2e-6, 1e-7} : std::pair<double, double>{1e-3, 1e-9};
  });
  lrt::cuda::synchronize();
}

TEST_CASE("cuda optim: state save/load on the GPU continues bit-identically") {
  // A small model: a rank-1 and a rank-2 AdamW parameter, a tall and a wide Muon matrix.
  struct Model {
    Twin<1> emb{"wte", Shape<1>{40}, 31};
    Twin<2> head{"lm_head", Shape<2>{10, 6}, 32};
    Twin<2> q{"blocks.0.W_q", Shape<2>{12, 7}, 33};
    Twin<2> o{"blocks.0.W_o", Shape<2>{7, 12}, 34};
  };
  struct Opt {
    optim::AdamW adam;
    optim::Muon muon{optim::MuonOptions{0.03f, 0.95f, 5}};
    Opt(ad::Param<float, 1, G>& emb, ad::Param<float, 2, G>& head, ad::Param<float, 2, G>& q,
        ad::Param<float, 2, G>& o) {
      adam.add_group({"embed", 0.3f, 0.8f, 0.95f, 1e-10f, 0.f, {optim::ParamRef::of(emb)}});
      adam.add_group({"head", 0.004f, 0.8f, 0.95f, 1e-10f, 0.01f, {optim::ParamRef::of(head)}});
      muon.add(optim::ParamRef::of(q));
      muon.add(optim::ParamRef::of(o));
    }
    void step(std::int64_t it) {
      const std::int64_t N = 6;
      adam.step(optim::lr_multiplier(it, N));
      muon.step(optim::lr_multiplier(it, N), optim::muon_momentum(it), optim::muon_weight_decay(it, N, 0.1f));
    }
  };
  // The GPU parameters' values as host tensors, and fresh GPU parameters holding them.
  auto grads = [](Model& m) {
    m.emb.set_grad();
    m.head.set_grad();
    m.q.set_grad();
    m.o.set_grad();
  };

  Model m1;
  Opt o1(m1.emb.gpu, m1.head.gpu, m1.q.gpu, m1.o.gpu);
  for (std::int64_t it = 0; it < 3; ++it) {
    grads(m1);
    o1.step(it);
  }
  std::vector<optim::NamedBuffer> bufs;
  std::map<std::string, std::int64_t> ctr;
  o1.adam.save(bufs, ctr);
  o1.muon.save(bufs, ctr);
  CHECK(bufs.size() == 8);
  CHECK(ctr.at("adamw.steps") == 3);
  CHECK(ctr.at("adamw.wte.step") == 3);
  CHECK(ctr.at("muon.steps") == 3);
  for (const auto& b : bufs) {
    CAPTURE(b.name);
    CHECK(std::any_of(b.data.begin(), b.data.end(), [](float v) { return v != 0.f; }));
  }
  // Checkpoint: parameter values and the gradient streams' positions.
  Model m2;
  m2.emb.gpu.value() = m1.emb.gpu.value();
  m2.head.gpu.value() = m1.head.gpu.value();
  m2.q.gpu.value() = m1.q.gpu.value();
  m2.o.gpu.value() = m1.o.gpu.value();
  m2.emb.gen = m1.emb.gen;
  m2.head.gen = m1.head.gen;
  m2.q.gen = m1.q.gen;
  m2.o.gen = m1.o.gen;

  for (std::int64_t it = 3; it < 6; ++it) {
    grads(m1);
    o1.step(it);
  }

  Opt o2(m2.emb.gpu, m2.head.gpu, m2.q.gpu, m2.o.gpu);
  // A bad checkpoint is refused and changes nothing.
  auto bad = bufs;
  for (auto& b : bad)
    if (b.name == "muon.blocks.0.W_q.momentum") b.shape = {7, 12};
  CHECK_THROWS_AS(o2.muon.load(bad, ctr), lrt::Error);
  CHECK(o2.muon.steps() == 0);
  bad = bufs;
  for (auto& b : bad)
    if (b.name == "adamw.wte.v") b.data.pop_back();
  CHECK_THROWS_AS(o2.adam.load(bad, ctr), lrt::Error);
  CHECK(o2.adam.steps() == 0);

  o2.adam.load(bufs, ctr);
  o2.muon.load(bufs, ctr);
  CHECK(o2.adam.steps() == 3);
  CHECK(o2.muon.steps() == 3);
  // What was loaded is what was saved (through device memory and back).
  std::vector<optim::NamedBuffer> again;
  std::map<std::string, std::int64_t> again_ctr;
  o2.adam.save(again, again_ctr);
  o2.muon.save(again, again_ctr);
  CHECK(again_ctr == ctr);
  REQUIRE(again.size() == bufs.size());
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    CAPTURE(bufs[i].name);
    CHECK(again[i].name == bufs[i].name);
    CHECK(again[i].shape == bufs[i].shape);
    CHECK(same_bits(again[i].data, bufs[i].data));
  }
  for (std::int64_t it = 3; it < 6; ++it) {
    grads(m2);
    o2.step(it);
  }
  // Same GPU, same inputs, deterministic kernels (no atomics) and cuBLAS: the same bits.
  CHECK(same_bits(values(m1.emb.gpu.value()), values(m2.emb.gpu.value())));
  CHECK(same_bits(values(m1.head.gpu.value()), values(m2.head.gpu.value())));
  CHECK(same_bits(values(m1.q.gpu.value()), values(m2.q.gpu.value())));
  CHECK(same_bits(values(m1.o.gpu.value()), values(m2.o.gpu.value())));

  // A GPU checkpoint loads into the CPU optimizers as well (the state format has no device).
  optim::AdamW ac;
  ac.add_group({"embed", 0.3f, 0.8f, 0.95f, 1e-10f, 0.f, {optim::ParamRef::of(m1.emb.cpu)}});
  ac.add_group({"head", 0.004f, 0.8f, 0.95f, 1e-10f, 0.01f, {optim::ParamRef::of(m1.head.cpu)}});
  optim::Muon mc(optim::MuonOptions{0.03f, 0.95f, 5});
  mc.add(optim::ParamRef::of(m1.q.cpu));
  mc.add(optim::ParamRef::of(m1.o.cpu));
  ac.load(bufs, ctr);
  mc.load(bufs, ctr);
  std::vector<optim::NamedBuffer> from_cpu;
  std::map<std::string, std::int64_t> from_cpu_ctr;
  ac.save(from_cpu, from_cpu_ctr);
  mc.save(from_cpu, from_cpu_ctr);
  REQUIRE(from_cpu.size() == bufs.size());
  for (std::size_t i = 0; i < bufs.size(); ++i) CHECK(same_bits(from_cpu[i].data, bufs[i].data));
  lrt::cuda::synchronize();
}

}  // namespace lrt_cuda_optim_test
