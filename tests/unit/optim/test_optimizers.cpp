// Optimizers and schedules (LRT-SPEC §8): AdamW against the update formula written out in double,
// Polar Express singular values against Eigen's SVD, Muon against a naive double implementation
// of the spec's pseudocode, schedules at their boundaries, and state save/load.
#include "../test_util.hpp"

#include <Eigen/SVD>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <lrt/autodiff.hpp>
#include <lrt/optim.hpp>
#include <lrt/train/optimizer_groups.hpp>

namespace test_optimizers {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;
namespace optim = lrt::optim;
namespace ad = lrt::ad;

namespace {

/// A parameter held in plain vectors; has_grad = false makes grad() return nullptr.
struct VecParam {
  std::string name;
  index_t rows = 1, cols = 1;
  int rank = 2;
  std::vector<float> w, g;
  bool has_grad = true;

  optim::ParamRef ref() {
    optim::ParamRef r;
    r.name = name;
    r.rows = rows;
    r.cols = cols;
    r.rank = rank;
    r.value = [this] { return w.data(); };
    r.grad = [this]() -> const float* { return has_grad ? g.data() : nullptr; };
    return r;
  }
};

std::vector<float> random_vec(std::size_t n, std::mt19937& rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

std::vector<float> gaussian_vec(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<double> d(0, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(d(rng));
  return v;
}

/// Max over i of |a - b| / (atol + rtol |b|).
double worst_rel(const std::vector<float>& a, const std::vector<double>& b, double rtol, double atol) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - b[i]) / (atol + rtol * std::abs(b[i])));
  return worst;
}

// ---- naive double reference of the spec's Muon --------------------------------------------

using VecD = std::vector<double>;

VecD mm(const VecD& a, index_t m, index_t k, const VecD& b, index_t n) {
  VecD c(static_cast<std::size_t>(m * n), 0.0);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double acc = 0;
      for (index_t l = 0; l < k; ++l) acc += a[i * k + l] * b[l * n + j];
      c[i * n + j] = acc;
    }
  return c;
}

VecD transpose(const VecD& a, index_t m, index_t n) {
  VecD t(a.size());
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) t[j * m + i] = a[i * n + j];
  return t;
}

const double kPE[5][3] = {
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323},
};

VecD ref_polar_express(VecD X, index_t r, index_t c, int steps) {
  double nrm = 0;
  for (double v : X) nrm += v * v;
  nrm = std::sqrt(nrm);
  for (double& v : X) v /= 1.02 * nrm + 1e-6;
  for (int s = 0; s < steps; ++s) {
    const double a = kPE[s][0], b = kPE[s][1], e = kPE[s][2];
    if (r > c) {  // tall: A = X^T X, X = aX + X(bA + eA^2)
      const VecD A = mm(transpose(X, r, c), c, r, X, c);
      const VecD A2 = mm(A, c, c, A, c);
      VecD B(A.size());
      for (std::size_t i = 0; i < B.size(); ++i) B[i] = b * A[i] + e * A2[i];
      const VecD XB = mm(X, r, c, B, c);
      for (std::size_t i = 0; i < X.size(); ++i) X[i] = a * X[i] + XB[i];
    } else {  // wide or square: A = X X^T, X = aX + (bA + eA^2)X
      const VecD A = mm(X, r, c, transpose(X, r, c), r);
      const VecD A2 = mm(A, r, r, A, r);
      VecD B(A.size());
      for (std::size_t i = 0; i < B.size(); ++i) B[i] = b * A[i] + e * A2[i];
      const VecD BX = mm(B, r, r, X, c);
      for (std::size_t i = 0; i < X.size(); ++i) X[i] = a * X[i] + BX[i];
    }
  }
  return X;
}

struct RefMuon {
  index_t r, c;
  VecD buf, sm;
  RefMuon(index_t rows, index_t cols)
      : r(rows),
        c(cols),
        buf(static_cast<std::size_t>(rows * cols), 0.0),
        sm(static_cast<std::size_t>(rows >= cols ? rows : cols), 0.0) {}

  void step(VecD& W, const std::vector<float>& G, double lr, double mu, double wd, double beta2) {
    const std::size_t n = W.size();
    VecD U(n);
    for (std::size_t i = 0; i < n; ++i) {
      buf[i] = buf[i] + (1 - mu) * (G[i] - buf[i]);
      U[i] = G[i] + mu * (buf[i] - G[i]);
    }
    VecD X = ref_polar_express(U, r, c, 5);
    // vm: mean over the columns (one per row) if r >= c, else over the rows (one per column).
    VecD vm(sm.size(), 0.0);
    for (index_t i = 0; i < r; ++i)
      for (index_t j = 0; j < c; ++j) {
        const double x2 = X[i * c + j] * X[i * c + j];
        if (r >= c)
          vm[i] += x2 / double(c);
        else
          vm[j] += x2 / double(r);
      }
    double nx = 0;
    for (double v : X) nx += v * v;
    nx = std::sqrt(nx);
    VecD st(sm.size());
    for (std::size_t k = 0; k < sm.size(); ++k) {
      sm[k] = sm[k] + (1 - beta2) * (vm[k] - sm[k]);
      st[k] = 1 / std::sqrt(std::max(sm[k], 1e-10));
    }
    VecD Xs(n);
    double ns = 0;
    for (index_t i = 0; i < r; ++i)
      for (index_t j = 0; j < c; ++j) {
        Xs[i * c + j] = X[i * c + j] * st[r >= c ? i : j];
        ns += Xs[i * c + j] * Xs[i * c + j];
      }
    ns = std::sqrt(ns);
    for (double& v : Xs) v = v * nx / std::max(ns, 1e-10);
    const double lr_eff = lr * std::sqrt(std::max(1.0, double(r) / double(c)));
    for (std::size_t i = 0; i < n; ++i) {
      const double mask = Xs[i] * W[i] >= 0 ? 1.0 : 0.0;
      W[i] = W[i] - lr_eff * Xs[i] - lr_eff * wd * (W[i] * mask);
    }
  }
};

Eigen::MatrixXd to_eigen(const float* p, index_t r, index_t c) {
  Eigen::MatrixXd m(r, c);
  for (index_t i = 0; i < r; ++i)
    for (index_t j = 0; j < c; ++j) m(i, j) = p[i * c + j];
  return m;
}

}  // namespace

// ---- AdamW ----------------------------------------------------------------------------------

TEST_CASE("AdamW: one and two steps match the spec formula in double; no grad, no change") {
  // p <- p(1 - lr wd); m <- m + (1-b1)(g - m); v <- v + (1-b2)(g^2 - v);
  // p <- p - (lr / (1 - b1^t)) m / (sqrt(v / (1 - b2^t)) + eps)
  const double lr0 = 0.1, b1 = 0.8, b2 = 0.95, eps = 1e-10, wd = 0.05;
  VecParam a{"a", 1, 3, 1, {0.5f, -1.25f, 2.0f}, {0.3f, -0.7f, 1e-3f}};
  VecParam b{"b", 1, 2, 1, {1.5f, -0.5f}, {9.f, 9.f}};
  b.has_grad = false;
  VecParam c{"c", 2, 2, 2, {0.1f, 0.2f, -0.3f, 0.4f}, {-2.f, 0.f, 0.5f, 1.f}};
  optim::AdamW opt;
  opt.add_group({"g1", float(lr0), float(b1), float(b2), float(eps), float(wd), {a.ref(), b.ref()}});
  opt.add_group({"g2", 0.01f, 0.96f, 0.95f, 1e-10f, 0.f, {c.ref()}});

  // Reference, in double.
  std::vector<double> pa(a.w.begin(), a.w.end()), ma(3, 0.0), va(3, 0.0);
  std::vector<double> pc(c.w.begin(), c.w.end()), mc(4, 0.0), vc(4, 0.0);
  const std::vector<float> b0 = b.w;
  auto ref = [](std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, const std::vector<float>& g,
                double lr, double beta1, double beta2, double e, double decay, int t) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = p[i] * (1 - lr * decay);
      m[i] = m[i] + (1 - beta1) * (g[i] - m[i]);
      v[i] = v[i] + (1 - beta2) * (double(g[i]) * g[i] - v[i]);
      p[i] = p[i] - (lr / (1 - std::pow(beta1, t))) * m[i] / (std::sqrt(v[i] / (1 - std::pow(beta2, t))) + e);
    }
  };

  opt.step(1.0f);
  ref(pa, ma, va, a.g, lr0 * 1.0, b1, b2, eps, wd, 1);
  ref(pc, mc, vc, c.g, 0.01f * 1.0, 0.96f, 0.95f, 1e-10f, 0.0, 1);
  CHECK(opt.steps() == 1);
  CHECK(worst_rel(a.w, pa, 1e-6, 1e-7) <= 1.0);
  CHECK(worst_rel(c.w, pc, 1e-6, 1e-7) <= 1.0);
  CHECK(b.w == b0);  // missing gradient: untouched

  // Step 1 by hand for a[0]: m = 0.2*0.3 = 0.06, v = 0.05*0.09 = 0.0045, m_hat = 0.3,
  // sqrt(v_hat) = 0.3, so p = 0.5*(1 - 0.005) - 0.1*1 = 0.3975.
  CHECK(a.w[0] == doctest::Approx(0.3975).epsilon(1e-6));

  a.g = {-0.1f, 0.2f, 0.5f};
  c.g = {1.f, -1.f, 0.25f, 0.f};
  opt.step(0.5f);
  ref(pa, ma, va, a.g, lr0 * 0.5, b1, b2, eps, wd, 2);
  ref(pc, mc, vc, c.g, double(0.01f) * 0.5, double(0.96f), double(0.95f), double(1e-10f), 0.0, 2);
  CHECK(opt.steps() == 2);
  CHECK(worst_rel(a.w, pa, 1e-6, 1e-7) <= 1.0);
  CHECK(worst_rel(c.w, pc, 1e-6, 1e-7) <= 1.0);
  CHECK(b.w == b0);

  // b gets its first gradient at the third call: its own t starts at 1.
  b.has_grad = true;
  b.g = {0.25f, -4.f};
  std::vector<double> pb(b.w.begin(), b.w.end()), mb(2, 0.0), vb(2, 0.0);
  a.has_grad = false;
  c.has_grad = false;
  const std::vector<float> a2 = a.w;
  opt.step(1.0f);
  ref(pb, mb, vb, b.g, lr0, b1, b2, eps, wd, 1);
  CHECK(worst_rel(b.w, pb, 1e-6, 1e-7) <= 1.0);
  CHECK(a.w == a2);
}

TEST_CASE("AdamW and Muon through ParamRef::of(ad::Param)") {
  ad::Param<float, 1> bias(Tensor<float, 1>::full(Shape<1>{4}, 1.f), "bias");
  ad::Param<float, 2> w(Tensor<float, 2>::full(Shape<2>{3, 2}, 0.5f), "w");
  const auto rb = optim::ParamRef::of(bias);
  const auto rw = optim::ParamRef::of(w);
  CHECK(rb.rank == 1);
  CHECK(rb.rows == 1);
  CHECK(rb.cols == 4);
  CHECK(rb.shape() == std::vector<std::int64_t>{4});
  CHECK(rw.rows == 3);
  CHECK(rw.cols == 2);
  CHECK(rb.grad() == nullptr);  // no gradient accumulated yet

  optim::AdamW adam;
  adam.add_group({"s", 0.1f, 0.8f, 0.95f, 1e-10f, 0.f, {rb}});
  optim::Muon muon;
  muon.add(rw);
  CHECK_THROWS_AS(muon.add(rb), lrt::Error);  // rank 1
  CHECK_THROWS_AS(muon.add(rw), lrt::Error);  // duplicate name

  adam.step(1.f);
  muon.step(1.f, 0.9f, 0.f);
  for (index_t i = 0; i < 4; ++i) CHECK(bias.value()(i) == 1.f);
  for (index_t i = 0; i < 3; ++i)
    for (index_t j = 0; j < 2; ++j) CHECK(w.value()(i, j) == 0.5f);

  ad::grad_slot(bias.var())->fill(2.f);
  {
    Tensor<float, 2>& g = *ad::grad_slot(w.var());
    std::mt19937 rng(3);
    fill_random(g, rng);
  }
  adam.step(1.f);
  muon.step(1.f, 0.9f, 0.f);
  for (index_t i = 0; i < 4; ++i) CHECK(bias.value()(i) == doctest::Approx(0.9).epsilon(1e-6));
  double moved = 0;
  for (index_t i = 0; i < 3; ++i)
    for (index_t j = 0; j < 2; ++j) moved += std::abs(w.value()(i, j) - 0.5f);
  CHECK(moved > 0.01);

  // A moved Param keeps working (the handle holds the node, not the Param object).
  ad::Param<float, 1> moved_bias = std::move(bias);
  adam.step(1.f);
  CHECK(moved_bias.value()(0) < 0.9f);

  // Unnamed parameters are refused.
  ad::Param<float, 1> anon(Tensor<float, 1>(Shape<1>{2}));
  CHECK_THROWS_AS(optim::ParamRef::of(anon), lrt::Error);
  // Duplicate names across groups are refused.
  CHECK_THROWS_AS(adam.add_group({"t", 0.1f, 0.8f, 0.95f, 1e-10f, 0.f, {rb}}), lrt::Error);
}

// ---- Polar Express --------------------------------------------------------------------------

/// The scalar map Polar Express applies to each singular value s of the normalised input.
double pe_scalar(double s) {
  for (const auto& c : kPE) s = c[0] * s + c[1] * s * s * s + c[2] * s * s * s * s * s;
  return s;
}

TEST_CASE("Muon's Gram products: lower blocks only, mirrored, equal to the full product") {
  // detail::gram multiplies row blocks of 128 against the rows before them and copies the lower
  // triangle up: sizes across block boundaries, tall and wide, alpha/beta, exact symmetry.
  std::mt19937 rng(77);
  for (auto [rows, cols] :
       {std::pair<index_t, index_t>{5, 3}, {128, 40}, {129, 17}, {300, 70}, {70, 300}, {257, 256}, {40, 129}}) {
    for (bool tall : {false, true}) {
      CAPTURE(rows);
      CAPTURE(cols);
      CAPTURE(tall);
      const index_t s = tall ? cols : rows;
      const auto x = gaussian_vec(static_cast<std::size_t>(rows * cols), rng);
      std::vector<float> c0 = gaussian_vec(static_cast<std::size_t>(s * s), rng), c = c0;
      optim::detail::gram(c.data(), x.data(), rows, cols, tall, 0.75f, -0.5f);
      double worst = 0;
      for (index_t i = 0; i < s; ++i)
        for (index_t j = 0; j < s; ++j) {
          double g = 0;
          if (tall)
            for (index_t r = 0; r < rows; ++r) g += double(x[r * cols + i]) * x[r * cols + j];
          else
            for (index_t k = 0; k < cols; ++k) g += double(x[i * cols + k]) * x[j * cols + k];
          // The lower triangle holds alpha G + beta C0 of its own entry; the upper is a mirror.
          const index_t lo_i = std::max(i, j), lo_j = std::min(i, j);
          const double want = 0.75 * g - 0.5 * double(c0[lo_i * s + lo_j]);
          worst = std::max(worst, std::abs(double(c[i * s + j]) - want) / (1.0 + std::abs(want)));
          if (j > i) REQUIRE(c[i * s + j] == c[j * s + i]);
        }
      CHECK(worst < 2e-5);
    }
  }
}

TEST_CASE("polar_express: singular values near 1, direction of the exact polar factor") {
  // PE acts on singular values one by one: sigma_out = p(sigma_in / (1.02 ||U||_F + 1e-6)),
  // p the composition of the five odd quintics. p maps [1e-3, 1] into [0.8589, 1.1411]; below
  // ~5e-4 it falls short of 0.5 (p(1e-4) = 0.099), which square Gaussian matrices (whose
  // smallest singular value is ~ ||U||_F / n^1.5) can reach.
  struct Case {
    index_t r, c;
  };
  std::mt19937 rng(2024);
  double lo = 1e9, hi = 0, lo_all = 1e9;
  int small_inputs = 0;
  for (const Case cs : {Case{32, 32}, Case{64, 64}, Case{64, 16}, Case{16, 64}, Case{96, 40}, Case{7, 3}}) {
    for (int rep = 0; rep < 4; ++rep) {
      CAPTURE(cs.r);
      CAPTURE(cs.c);
      CAPTURE(rep);
      const auto u = gaussian_vec(static_cast<std::size_t>(cs.r * cs.c), rng);
      std::vector<float> x(u.size());
      optim::polar_express(u.data(), cs.r, cs.c, x.data());
      const Eigen::MatrixXd X = to_eigen(x.data(), cs.r, cs.c);
      const Eigen::MatrixXd Uin = to_eigen(u.data(), cs.r, cs.c);
      Eigen::JacobiSVD<Eigen::MatrixXd> sx(X);
      Eigen::JacobiSVD<Eigen::MatrixXd> su(Uin, Eigen::ComputeThinU | Eigen::ComputeThinV);
      std::vector<double> out(sx.singularValues().data(), sx.singularValues().data() + sx.singularValues().size());
      std::vector<double> pred;
      const double denom = 1.02 * Uin.norm() + 1e-6;
      for (index_t k = 0; k < su.singularValues().size(); ++k) {
        const double s_in = su.singularValues()(k) / denom;
        pred.push_back(pe_scalar(s_in));
        if (s_in < 1e-3) ++small_inputs;
      }
      std::sort(out.begin(), out.end());
      std::sort(pred.begin(), pred.end());
      for (std::size_t k = 0; k < out.size(); ++k) {
        CHECK(std::abs(out[k] - pred[k]) <= 1e-4);
        lo_all = std::min(lo_all, out[k]);
      }
      // All singular values in [0.5, 1.5] whenever every normalised input one is >= 1e-3
      // (always so for the rectangular cases), and then in fact within [0.85, 1.15].
      const double s_min = su.singularValues().minCoeff() / denom;
      if (cs.r != cs.c) CHECK(s_min >= 1e-3);
      if (s_min >= 1e-3) {
        CHECK(out.front() >= 0.5);
        CHECK(out.back() <= 1.5);
        CHECK(out.front() >= 0.85);
        CHECK(out.back() <= 1.15);
        lo = std::min(lo, out.front());
        hi = std::max(hi, out.back());
      }
      // Direction: the Frobenius cosine with the exact polar factor U V^T of the input.
      const Eigen::MatrixXd P = su.matrixU() * su.matrixV().transpose();
      const double cosine = (X.array() * P.array()).sum() / (X.norm() * P.norm());
      CHECK(cosine > 0.95);

      // In place (out == u) gives the same bits.
      std::vector<float> y = u;
      optim::polar_express(y.data(), cs.r, cs.c, y.data());
      CHECK(std::memcmp(x.data(), y.data(), sizeof(float) * x.size()) == 0);
    }
  }
  MESSAGE("Polar Express (5 steps, fp32) singular values: [", lo, ", ", hi,
          "] when all normalised inputs >= 1e-3; smallest over all cases ", lo_all, " (", small_inputs,
          " input singular values below 1e-3, all in square cases)");

  // fp32 result follows the double reference.
  const auto u = gaussian_vec(24 * 10, rng);
  std::vector<float> x(u.size());
  optim::polar_express(u.data(), 24, 10, x.data());
  const VecD ref = ref_polar_express(VecD(u.begin(), u.end()), 24, 10, 5);
  CHECK(worst_rel(x, ref, 1e-4, 1e-5) <= 1.0);

  CHECK_THROWS_AS(optim::polar_express(u.data(), 24, 10, x.data(), 6), lrt::Error);
  CHECK_THROWS_AS(optim::polar_express(u.data(), 0, 10, x.data()), lrt::Error);
}

// ---- Muon -----------------------------------------------------------------------------------

TEST_CASE("Muon: two steps match a naive double implementation of the spec") {
  struct Case {
    index_t r, c;
  };
  std::mt19937 rng(77);
  double worst_w = 0, worst_upd = 0;
  for (const Case cs : {Case{12, 5}, Case{5, 12}, Case{8, 8}, Case{300, 40}, Case{40, 300}}) {
    CAPTURE(cs.r);
    CAPTURE(cs.c);
    const auto n = static_cast<std::size_t>(cs.r * cs.c);
    VecParam p{"m", cs.r, cs.c, 2, random_vec(n, rng, -0.5, 0.5), random_vec(n, rng)};
    optim::MuonOptions o;
    o.lr = 0.05f;
    optim::Muon muon(o);
    muon.add(p.ref());
    RefMuon ref(cs.r, cs.c);
    VecD w(p.w.begin(), p.w.end());
    const float mults[2] = {1.0f, 0.75f}, mus[2] = {0.85f, 0.9f}, wds[2] = {0.2f, 0.15f};
    int masked = 0;
    for (int s = 0; s < 2; ++s) {
      CAPTURE(s);
      if (s == 1) p.g = random_vec(n, rng);
      const std::vector<float> before = p.w;
      const VecD wbefore = w;
      muon.step(mults[s], mus[s], wds[s]);
      ref.step(w, p.g, double(o.lr) * double(mults[s]), double(mus[s]), double(wds[s]), double(o.beta2));
      const double ww = worst_rel(p.w, w, 1e-5, 1e-6);
      CHECK(ww <= 1.0);
      worst_w = std::max(worst_w, ww);
      // The update itself (W_new - W_old), relative to its own RMS.
      double rms = 0, err = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double du = w[i] - wbefore[i];
        rms += du * du;
        err = std::max(err, std::abs((double(p.w[i]) - double(before[i])) - du));
      }
      rms = std::sqrt(rms / double(n));
      worst_upd = std::max(worst_upd, err / rms);
      CHECK(err / rms < 1e-3);
      // Cautious decay: how many entries had the mask on.
      for (std::size_t i = 0; i < n; ++i) masked += (w[i] - wbefore[i]) * wbefore[i] < 0;
    }
    CHECK(masked > 0);
    CHECK(muon.steps() == 2);
    // The states follow the reference too.
    std::vector<optim::NamedBuffer> bufs;
    std::map<std::string, std::int64_t> ctr;
    muon.save(bufs, ctr);
    REQUIRE(bufs.size() == 2);
    CHECK(bufs[0].name == "muon.m.momentum");
    CHECK(worst_rel(bufs[0].data, ref.buf, 1e-6, 1e-7) <= 1.0);
    CHECK(bufs[1].name == "muon.m.second_moment");
    CHECK(bufs[1].shape == (cs.r >= cs.c ? std::vector<std::int64_t>{cs.r, 1} : std::vector<std::int64_t>{1, cs.c}));
    CHECK(worst_rel(bufs[1].data, ref.sm, 1e-4, 1e-7) <= 1.0);
    CHECK(ctr.at("muon.steps") == 2);
  }
  MESSAGE("Muon vs double reference: worst W error ", worst_w,
          " (units of 1e-5 rel + 1e-6 abs); worst update error / update RMS ", worst_upd);
}

TEST_CASE("Muon: a matrix without a gradient keeps its value and state") {
  std::mt19937 rng(5);
  VecParam a{"a", 6, 4, 2, random_vec(24, rng), random_vec(24, rng)};
  VecParam b{"b", 4, 6, 2, random_vec(24, rng), random_vec(24, rng)};
  optim::Muon muon;
  muon.add(a.ref());
  muon.add(b.ref());
  b.has_grad = false;
  const auto b0 = b.w;
  muon.step(1.f, 0.85f, 0.1f);
  CHECK(b.w == b0);
  std::vector<optim::NamedBuffer> bufs;
  std::map<std::string, std::int64_t> ctr;
  muon.save(bufs, ctr);
  REQUIRE(bufs.size() == 4);
  CHECK(bufs[2].name == "muon.b.momentum");
  CHECK(std::all_of(bufs[2].data.begin(), bufs[2].data.end(), [](float v) { return v == 0.f; }));
  CHECK(std::all_of(bufs[3].data.begin(), bufs[3].data.end(), [](float v) { return v == 0.f; }));
  CHECK(std::any_of(bufs[0].data.begin(), bufs[0].data.end(), [](float v) { return v != 0.f; }));
}

// ---- Schedules ------------------------------------------------------------------------------

TEST_CASE("lr schedule with warm-up and a final LR (nanochat's rule), worked by hand") {
  // N = 10, U = round(2) = 2, W = round(4) = 4, final 0.1: (it+1)/2 for it < 2, 1 up to it = 6,
  // then r + (1 - r) 0.1 with r = (10 - it) / 4.
  CHECK(optim::lr_multiplier(0, 10, 0.4, 0.2, 0.1) == doctest::Approx(0.5));
  CHECK(optim::lr_multiplier(1, 10, 0.4, 0.2, 0.1) == 1.f);
  CHECK(optim::lr_multiplier(6, 10, 0.4, 0.2, 0.1) == 1.f);
  CHECK(optim::lr_multiplier(7, 10, 0.4, 0.2, 0.1) == doctest::Approx(0.75 + 0.25 * 0.1));
  CHECK(optim::lr_multiplier(9, 10, 0.4, 0.2, 0.1) == doctest::Approx(0.25 + 0.75 * 0.1));
  CHECK(optim::lr_multiplier(10, 10, 0.4, 0.2, 0.1) == doctest::Approx(0.1));  // past N: the floor
  // No warm-up and no floor: the two-argument rule, every step.
  for (int it = 0; it < 13; ++it) CHECK(optim::lr_multiplier(it, 13, 0.5, 0, 0) == optim::lr_multiplier(it, 13));
  // N = 5, U = round(2.5) = 2 (ties to even).
  CHECK(optim::lr_multiplier(1, 5, 0.0, 0.5, 0) == 1.f);
  CHECK(optim::lr_multiplier(0, 5, 0.0, 0.5, 0) == doctest::Approx(0.5));
  CHECK_THROWS_WITH_AS(optim::lr_multiplier(0, 10, 0.6, 0.5, 0), doctest::Contains("warmup_frac + warmdown_frac"),
                       lrt::Error);
  CHECK_THROWS_WITH_AS(optim::lr_multiplier(0, 10, 0.5, 0, 1.5), doctest::Contains("final_frac"), lrt::Error);
  lrt::TrainOptions o;
  o.steps = 10, o.warmup_frac = 0.2, o.warmdown_frac = 0.4, o.final_lr_frac = 0.1;
  CHECK(o.lr_multiplier(0) == doctest::Approx(0.5));
  CHECK(o.to_json().at("warmup_frac").as_number() == doctest::Approx(0.2));
  CHECK(o.to_json().at("final_lr_frac").as_number() == doctest::Approx(0.1));
}

TEST_CASE("schedules at their boundaries") {
  // N = 10, W = round(5) = 5: 1 up to it = N - W = 5, then (10 - it) / 5.
  CHECK(optim::lr_multiplier(0, 10) == 1.f);
  CHECK(optim::lr_multiplier(5, 10) == 1.f);
  CHECK(optim::lr_multiplier(6, 10) == doctest::Approx(0.8));
  CHECK(optim::lr_multiplier(9, 10) == doctest::Approx(0.2));
  // N = 7: W = round(3.5) = 4 (Python's round, ties to even), N - W = 3.
  CHECK(optim::warmdown_steps(7) == 4);
  CHECK(optim::lr_multiplier(3, 7) == 1.f);
  CHECK(optim::lr_multiplier(4, 7) == doctest::Approx(0.75));
  CHECK(optim::lr_multiplier(6, 7) == doctest::Approx(0.25));
  // N = 5: W = round(2.5) = 2.
  CHECK(optim::warmdown_steps(5) == 2);
  CHECK(optim::lr_multiplier(3, 5) == 1.f);
  CHECK(optim::lr_multiplier(4, 5) == doctest::Approx(0.5));
  // N = 2000, W = 1000.
  CHECK(optim::lr_multiplier(1000, 2000) == 1.f);
  CHECK(optim::lr_multiplier(1001, 2000) == doctest::Approx(0.999));
  CHECK(optim::lr_multiplier(1999, 2000) == doctest::Approx(0.001));
  // Other fractions; W == 0 means no warm-down at all.
  CHECK(optim::lr_multiplier(9, 10, 0.0) == 1.f);
  CHECK(optim::lr_multiplier(0, 1, 0.4) == 1.f);   // W = round(0.4) = 0
  CHECK(optim::lr_multiplier(0, 10, 1.0) == 1.f);  // it <= N - W = 0
  CHECK(optim::lr_multiplier(1, 10, 1.0) == doctest::Approx(0.9));
  CHECK(optim::lr_multiplier(8, 10, 0.2) == 1.f);
  CHECK(optim::lr_multiplier(9, 10, 0.2) == doctest::Approx(0.5));
  CHECK_THROWS_AS(optim::lr_multiplier(0, 0), lrt::Error);
  CHECK_THROWS_AS(optim::lr_multiplier(0, 10, 1.5), lrt::Error);

  CHECK(optim::muon_momentum(0) == doctest::Approx(0.85));
  CHECK(optim::muon_momentum(150) == doctest::Approx(0.90));
  CHECK(optim::muon_momentum(299) == doctest::Approx(0.85 + 0.10 * 299.0 / 300.0));
  CHECK(optim::muon_momentum(300) == doctest::Approx(0.95));
  CHECK(optim::muon_momentum(5000) == doctest::Approx(0.95));

  CHECK(optim::muon_weight_decay(0, 10, 0.1f) == doctest::Approx(0.1));
  CHECK(optim::muon_weight_decay(5, 10, 0.1f) == doctest::Approx(0.05));
  CHECK(optim::muon_weight_decay(9, 10, 0.1f) == doctest::Approx(0.01));
  CHECK(optim::release_muon_weight_decay(12) == doctest::Approx(0.2));
  CHECK(optim::release_muon_weight_decay(20) == doctest::Approx(0.072));
  CHECK(optim::release_muon_weight_decay(24) == doctest::Approx(0.05));
  CHECK(optim::cpu_muon_weight_decay == 0.1f);
}

// ---- State save / load ----------------------------------------------------------------------

namespace {
struct Model {
  VecParam emb{"wte", 1, 10, 1, {}, {}};
  VecParam q{"blocks.0.W_q", 9, 6, 2, {}, {}};
  VecParam o{"blocks.0.W_o", 6, 9, 2, {}, {}};
  void init(std::mt19937& rng) {
    emb.w = random_vec(10, rng);
    q.w = random_vec(54, rng);
    o.w = random_vec(54, rng);
  }
  void grads(std::mt19937& rng) {
    emb.g = random_vec(10, rng);
    q.g = random_vec(54, rng);
    o.g = random_vec(54, rng);
  }
};
struct Opt {
  optim::AdamW adam;
  optim::Muon muon;
  explicit Opt(Model& m) {
    adam.add_group({"embed", 0.3f, 0.8f, 0.95f, 1e-10f, 0.f, {m.emb.ref()}});
    muon.add(m.q.ref());
    muon.add(m.o.ref());
  }
  void step(std::int64_t it) {
    const std::int64_t N = 6;
    adam.step(optim::lr_multiplier(it, N));
    muon.step(optim::lr_multiplier(it, N), optim::muon_momentum(it), optim::muon_weight_decay(it, N, 0.1f));
  }
};
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lrt::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("optimizer state: save/load continues bit-identically; bad state is refused") {
  std::mt19937 rng(11);
  Model m1;
  m1.init(rng);
  Opt o1(m1);
  std::mt19937 grng(12);
  for (std::int64_t it = 0; it < 3; ++it) {
    m1.grads(grng);
    o1.step(it);
  }
  std::vector<optim::NamedBuffer> bufs;
  std::map<std::string, std::int64_t> ctr;
  o1.adam.save(bufs, ctr);
  o1.muon.save(bufs, ctr);
  CHECK(bufs.size() == 6);
  CHECK(ctr.at("adamw.steps") == 3);
  CHECK(ctr.at("adamw.wte.step") == 3);
  CHECK(ctr.at("muon.steps") == 3);
  const Model at_ckpt = m1;  // parameter values at the checkpoint
  Model m2 = at_ckpt;
  const std::mt19937 grng_at_ckpt = grng;

  for (std::int64_t it = 3; it < 6; ++it) {
    m1.grads(grng);
    o1.step(it);
  }

  Opt o2(m2);
  o2.adam.load(bufs, ctr);
  o2.muon.load(bufs, ctr);
  CHECK(o2.adam.steps() == 3);
  CHECK(o2.muon.steps() == 3);
  grng = grng_at_ckpt;
  for (std::int64_t it = 3; it < 6; ++it) {
    m2.grads(grng);
    o2.step(it);
  }
  CHECK(same_bits(m1.emb.w, m2.emb.w));
  CHECK(same_bits(m1.q.w, m2.q.w));
  CHECK(same_bits(m1.o.w, m2.o.w));

  // Errors name the parameter; a failed load changes nothing.
  Model m3 = at_ckpt;
  Opt o3(m3);
  auto bad = bufs;
  for (auto& b : bad)
    if (b.name == "muon.blocks.0.W_q.momentum") b.shape = {6, 9};
  std::string msg = error_of([&] { o3.muon.load(bad, ctr); });
  CHECK(msg.find("blocks.0.W_q") != std::string::npos);
  CHECK(msg.find("(6, 9)") != std::string::npos);
  CHECK(msg.find("(9, 6)") != std::string::npos);
  CHECK(o3.muon.steps() == 0);

  bad = bufs;
  for (auto& b : bad)
    if (b.name == "muon.blocks.0.W_o.second_moment") b.shape = {6, 1};
  msg = error_of([&] { o3.muon.load(bad, ctr); });
  CHECK(msg.find("blocks.0.W_o") != std::string::npos);

  bad = bufs;
  std::erase_if(bad, [](const optim::NamedBuffer& b) { return b.name == "adamw.wte.v"; });
  msg = error_of([&] { o3.adam.load(bad, ctr); });
  CHECK(msg.find("wte") != std::string::npos);
  CHECK(msg.find("adamw.wte.v") != std::string::npos);

  bad = bufs;
  for (auto& b : bad)
    if (b.name == "adamw.wte.m") b.data.pop_back();
  msg = error_of([&] { o3.adam.load(bad, ctr); });
  CHECK(msg.find("wte") != std::string::npos);

  bad = bufs;
  bad.push_back({"muon.blocks.9.W_q.momentum", {9, 6}, std::vector<float>(54, 0.f)});
  msg = error_of([&] { o3.muon.load(bad, ctr); });
  CHECK(msg.find("blocks.9.W_q") != std::string::npos);

  bad = bufs;
  bad.push_back(bufs[0]);
  msg = error_of([&] { o3.adam.load(bad, ctr); });
  CHECK(msg.find("duplicate") != std::string::npos);

  auto bad_ctr = ctr;
  bad_ctr.erase("adamw.wte.step");
  msg = error_of([&] { o3.adam.load(bufs, bad_ctr); });
  CHECK(msg.find("wte") != std::string::npos);
  bad_ctr = ctr;
  bad_ctr.erase("muon.steps");
  msg = error_of([&] { o3.muon.load(bufs, bad_ctr); });
  CHECK(msg.find("muon.steps") != std::string::npos);
  CHECK(o3.adam.steps() == 0);

  // After the failed loads, a good load still continues bit-identically.
  o3.adam.load(bufs, ctr);
  o3.muon.load(bufs, ctr);
  grng = grng_at_ckpt;
  for (std::int64_t it = 3; it < 6; ++it) {
    m3.grads(grng);
    o3.step(it);
  }
  CHECK(same_bits(m1.q.w, m3.q.w));
  CHECK(same_bits(m1.emb.w, m3.emb.w));
}

}  // namespace test_optimizers
