// Fused CPU attention kernels (lrt/backend/cpu/attention.hpp). The references are written here:
// a naive double forward with an explicit (Tq, Tk) score matrix and boolean mask per (b, h), an
// analytic naive backward from those explicit probabilities, and central finite differences of
// L = sum(out * R). Also: float against double, strided views, exact zeros for masked keys,
// independence from the thread count, and every error message.
//
// Tolerances (float kernel against the double reference, inputs uniform in [-2, 2)):
//   out, lse: elementwise |a - b| <= 1e-5 (1 + |b|);
//   dq, dk, dv: normwise max|a - b| <= 1e-5 max|b| (per tensor; dS = P (dP - D) cancels, so tiny
//   elements carry absolute, not relative, float error).
#include "../test_util.hpp"

#include <lrt/backend/cpu/attention.hpp>

#include <algorithm>
#include <limits>
#include <utility>

namespace test_attention_kernel {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;
using lrt::TensorView;

namespace {

constexpr index_t kHuge = index_t{1} << 40;  // a window far beyond any Tk (plain causal)

/// Positions 0..T-1 (Tq == Tk).
std::vector<index_t> all_positions(index_t T) {
  std::vector<index_t> p;
  for (index_t i = 0; i < T; ++i) p.push_back(i);
  return p;
}

/// One Interleaved subset: the positions p < T with p mod S == i.
std::vector<index_t> subset_positions(index_t T, index_t S, index_t i) {
  std::vector<index_t> p;
  for (index_t x = i; x < T; x += S) p.push_back(x);
  return p;
}

/// A random sorted subset of [0, T) of about a third of the positions (at least one).
std::vector<index_t> irregular_positions(index_t T, std::mt19937& rng) {
  std::vector<index_t> p;
  for (index_t x = 0; x < T; ++x)
    if (rng() % 3 == 0) p.push_back(x);
  if (p.empty()) p.push_back(static_cast<index_t>(rng() % T));
  return p;
}

/// One attention problem in double: inputs, positions, window and a fixed upstream gradient R.
struct Problem {
  index_t window = 0;
  double scale = 1;
  Tensor<index_t, 1> qpos;
  Tensor<double, 4> q, k, v, dout;  // (B, Tq, H, Dh), (B, Tk, Hkv, Dh) x 2, (B, Tq, H, Dh)
};

Problem make_problem(std::mt19937& rng, index_t B, index_t Tk, index_t H, index_t Hkv, index_t Dh,
                     const std::vector<index_t>& pos, index_t window) {
  Problem pb;
  const index_t Tq = static_cast<index_t>(pos.size());
  pb.window = window;
  pb.scale = 1.0 / std::sqrt(double(Dh));
  pb.qpos = Tensor<index_t, 1>(Shape<1>{Tq});
  for (index_t i = 0; i < Tq; ++i) pb.qpos(i) = pos[i];
  pb.q = Tensor<double, 4>(Shape<4>{B, Tq, H, Dh});
  pb.k = Tensor<double, 4>(Shape<4>{B, Tk, Hkv, Dh});
  pb.v = Tensor<double, 4>(Shape<4>{B, Tk, Hkv, Dh});
  pb.dout = Tensor<double, 4>(Shape<4>{B, Tq, H, Dh});
  fill_random(pb.q, rng);
  fill_random(pb.k, rng);
  fill_random(pb.v, rng);
  fill_random(pb.dout, rng);
  return pb;
}

/// Outputs of the kernels (or of the reference) in element type T.
template <class T>
struct Result {
  Tensor<T, 4> out, dq, dk, dv;
  Tensor<T, 3> lse;
};

/// Runs attention_forward (and attention_backward when asked) in precision T.
template <class T>
Result<T> run_kernel(const Problem& pb, bool backward = true) {
  const Tensor<T, 4> q = lrt::cast<T>(pb.q), k = lrt::cast<T>(pb.k), v = lrt::cast<T>(pb.v),
                     dout = lrt::cast<T>(pb.dout);
  const index_t B = q.size(0), Tq = q.size(1), H = q.size(2);
  Result<T> r;
  r.out = Tensor<T, 4>(q.shape());
  r.lse = Tensor<T, 3>(Shape<3>{B, H, Tq});
  lrt::cpu::attention_forward<T>(q, k, v, pb.qpos, pb.window, T(pb.scale), r.out, r.lse);
  if (backward) {
    r.dq = Tensor<T, 4>::full(q.shape(), T(7));  // overwritten, not accumulated
    r.dk = Tensor<T, 4>::full(k.shape(), T(7));
    r.dv = Tensor<T, 4>::full(v.shape(), T(7));
    lrt::cpu::attention_backward<T>(q, k, v, pb.qpos, pb.window, T(pb.scale), r.out, r.lse, dout, r.dq, r.dk, r.dv);
  }
  return r;
}

/// Naive reference in double: per (b, h) an explicit score matrix S (Tq, Tk) and mask M from the
/// spec's rule (j <= p and p - j <= w), softmax over the allowed keys, out = P V; backward from
/// the explicit P: dP = dO V^T, dS = P (dP - rowsum(P dP)), dq = scale dS K, dk = scale dS^T Q,
/// dv = P^T dO, dk and dv summed over the query heads of each KV head.
Result<double> reference(const Problem& pb) {
  const index_t B = pb.q.size(0), Tq = pb.q.size(1), H = pb.q.size(2), Dh = pb.q.size(3);
  const index_t Tk = pb.k.size(1), Hkv = pb.k.size(2);
  Result<double> r;
  r.out = Tensor<double, 4>(pb.q.shape());
  r.lse = Tensor<double, 3>(Shape<3>{B, H, Tq});
  r.dq = Tensor<double, 4>(pb.q.shape());
  r.dk = Tensor<double, 4>(pb.k.shape());
  r.dv = Tensor<double, 4>(pb.v.shape());
  // Offsets of query-side rows (b, i, h) and key-side rows (b, j, g), each Dh long (every tensor
  // here is contiguous).
  auto qrow = [&](index_t b, index_t i, index_t h) { return ((b * Tq + i) * H + h) * Dh; };
  auto krow = [&](index_t b, index_t j, index_t g) { return ((b * Tk + j) * Hkv + g) * Dh; };
  auto dot = [&](const double* x, const double* y) {
    double acc = 0;
    for (index_t e = 0; e < Dh; ++e) acc += x[e] * y[e];
    return acc;
  };
  std::vector<double> S(Tq * Tk), P(Tq * Tk), dP(Tq * Tk);
  std::vector<char> M(Tq * Tk);
  for (index_t b = 0; b < B; ++b)
    for (index_t h = 0; h < H; ++h) {
      const index_t g = h / (H / Hkv);
      for (index_t i = 0; i < Tq; ++i) {
        const index_t p = pb.qpos(i);
        double mx = -std::numeric_limits<double>::infinity();
        for (index_t j = 0; j < Tk; ++j) {
          M[i * Tk + j] = (j <= p && p - j <= pb.window);
          S[i * Tk + j] = pb.scale * dot(pb.q.data() + qrow(b, i, h), pb.k.data() + krow(b, j, g));
          if (M[i * Tk + j]) mx = std::max(mx, S[i * Tk + j]);
        }
        double sum = 0;
        for (index_t j = 0; j < Tk; ++j)
          if (M[i * Tk + j]) sum += std::exp(S[i * Tk + j] - mx);
        for (index_t j = 0; j < Tk; ++j) P[i * Tk + j] = M[i * Tk + j] ? std::exp(S[i * Tk + j] - mx) / sum : 0.0;
        r.lse(b, h, i) = mx + std::log(sum);
        double* o = r.out.data() + qrow(b, i, h);
        for (index_t j = 0; j < Tk; ++j)
          for (index_t e = 0; e < Dh; ++e) o[e] += P[i * Tk + j] * pb.v.data()[krow(b, j, g) + e];
      }
      for (index_t i = 0; i < Tq; ++i) {
        double rowsum = 0;
        for (index_t j = 0; j < Tk; ++j) {
          dP[i * Tk + j] = dot(pb.dout.data() + qrow(b, i, h), pb.v.data() + krow(b, j, g));
          rowsum += P[i * Tk + j] * dP[i * Tk + j];
        }
        double* dq = r.dq.data() + qrow(b, i, h);
        const double *qi = pb.q.data() + qrow(b, i, h), *doi = pb.dout.data() + qrow(b, i, h);
        for (index_t j = 0; j < Tk; ++j) {
          const double pij = P[i * Tk + j], ds = pij * (dP[i * Tk + j] - rowsum) * pb.scale;
          double *dk = r.dk.data() + krow(b, j, g), *dv = r.dv.data() + krow(b, j, g);
          const double* kj = pb.k.data() + krow(b, j, g);
          for (index_t e = 0; e < Dh; ++e) {
            dq[e] += ds * kj[e];
            dk[e] += ds * qi[e];
            dv[e] += pij * doi[e];
          }
        }
      }
    }
  return r;
}

/// max |a - b| / max |b| (normwise relative error; 0 for empty or all-zero b and equal a).
template <class TA, int R>
double rel_err(const Tensor<TA, R>& a, const Tensor<double, R>& b) {
  double num = 0, den = 0;
  for_each_index(b.shape(), [&](const auto& i) {
    num = std::max(num, std::abs(double(elem(a.view(), i)) - elem(b.view(), i)));
    den = std::max(den, std::abs(elem(b.view(), i)));
  });
  return den > 0 ? num / den : num;
}

/// Calls f(problem, description) over the grid of the forward and backward tests: B in {1, 2},
/// T in {1, 9, 70, 131} (70 and 131 cross the 64-query tile), GQA and plain heads, windows
/// from 0 to far beyond T, and four query sets: all positions, the subsets p mod 2 == 1 and
/// p mod 3 == 0 (empty for T = 1 with offset 1), and an irregular sorted list.
template <class F>
void for_each_problem(F&& f) {
  std::mt19937 rng(2024);
  const index_t dims[] = {1, 5, 16};
  int count = 0;
  for (index_t B : {1, 2})
    for (index_t T : {1, 9, 70, 131})
      for (auto [H, Hkv] : {std::pair<index_t, index_t>{4, 2}, {3, 3}, {2, 1}})
        for (index_t w : {index_t{0}, index_t{3}, T / 2, T - 1, kHuge})
          for (int mode = 0; mode < 4; ++mode) {
            const std::vector<index_t> pos = mode == 0   ? all_positions(T)
                                             : mode == 1 ? subset_positions(T, 2, 1)
                                             : mode == 2 ? subset_positions(T, 3, 0)
                                                         : irregular_positions(T, rng);
            const index_t Dh = dims[count++ % 3];
            const Problem pb = make_problem(rng, B, T, H, Hkv, Dh, pos, w);
            const std::string what = "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
                                     " Hkv=" + std::to_string(Hkv) + " Dh=" + std::to_string(Dh) +
                                     " w=" + std::to_string(w) + " mode=" + std::to_string(mode) +
                                     " Tq=" + std::to_string(pos.size());
            f(pb, what);
          }
}

/// L = sum(out * R) in double, from the kernel's forward.
double loss(const Problem& pb) {
  const Result<double> r = run_kernel<double>(pb, /*backward=*/false);
  double l = 0;
  for_each_index(r.out.shape(), [&](const auto& i) { l += elem(r.out.view(), i) * elem(pb.dout.view(), i); });
  return l;
}

/// Valid arguments for both kernels; each error case below breaks one of them.
struct Args {
  Tensor<float, 4> q{Shape<4>{2, 5, 4, 8}}, k{Shape<4>{2, 6, 2, 8}}, v{Shape<4>{2, 6, 2, 8}};
  Tensor<index_t, 1> qpos{Shape<1>{5}};
  Tensor<float, 4> out{Shape<4>{2, 5, 4, 8}}, dout{Shape<4>{2, 5, 4, 8}}, dq{Shape<4>{2, 5, 4, 8}};
  Tensor<float, 4> dk{Shape<4>{2, 6, 2, 8}}, dv{Shape<4>{2, 6, 2, 8}};
  Tensor<float, 3> lse{Shape<3>{2, 4, 5}};
  index_t window = 3;
  Args() {
    for (index_t i = 0; i < 5; ++i) qpos(i) = i;
  }
  void forward() { lrt::cpu::attention_forward<float>(q, k, v, qpos, window, 0.25f, out, lse); }
  void backward() { lrt::cpu::attention_backward<float>(q, k, v, qpos, window, 0.25f, out, lse, dout, dq, dk, dv); }
};

}  // namespace

TEST_CASE("attention forward matches a naive double reference (double and float)") {
  int n = 0;
  double worst_f = 0;
  for_each_problem([&](const Problem& pb, const std::string& what) {
    CAPTURE(what);
    const Result<double> ref = reference(pb);
    const Result<double> d = run_kernel<double>(pb, false);
    check_close(d.out, ref.out, 1e-12, 1e-12);
    check_close(d.lse, ref.lse, 1e-12, 1e-12);
    const Result<float> f = run_kernel<float>(pb, false);
    check_close(f.out, ref.out, 1e-5, 1e-5);
    check_close(f.lse, ref.lse, 1e-5, 1e-5);
    worst_f = std::max({worst_f, rel_err(f.out, ref.out), rel_err(f.lse, ref.lse)});
    ++n;
  });
  CHECK(n == 2 * 4 * 3 * 5 * 4);
  MESSAGE("float forward: worst normwise error " << worst_f);
}

TEST_CASE("attention backward matches an analytic naive backward (double and float)") {
  double worst_f = 0;
  for_each_problem([&](const Problem& pb, const std::string& what) {
    CAPTURE(what);
    const Result<double> ref = reference(pb);
    const Result<double> d = run_kernel<double>(pb);
    check_close(d.dq, ref.dq, 1e-10, 1e-10);
    check_close(d.dk, ref.dk, 1e-10, 1e-10);
    check_close(d.dv, ref.dv, 1e-10, 1e-10);
    const Result<float> f = run_kernel<float>(pb);
    for (double e : {rel_err(f.dq, ref.dq), rel_err(f.dk, ref.dk), rel_err(f.dv, ref.dv)}) {
      CHECK(e <= 1e-5);
      worst_f = std::max(worst_f, e);
    }
  });
  MESSAGE("float backward: worst normwise error " << worst_f);
}

TEST_CASE("attention backward matches central finite differences of sum(out * R)") {
  struct Config {
    index_t B, Tk, H, Hkv, Dh, window;
    std::vector<index_t> pos;
  };
  const Config configs[] = {
      {2, 6, 4, 2, 3, kHuge, all_positions(6)},       // causal, GQA
      {1, 7, 2, 2, 4, 2, all_positions(7)},           // sliding window
      {1, 9, 3, 1, 3, 3, {1, 4, 5, 7}},               // irregular subset, Tk > max(qpos) + 1
      {2, 8, 2, 1, 2, 8, subset_positions(8, 2, 1)},  // Interleaved subset p mod 2 == 1
      {1, 5, 1, 1, 3, 0, all_positions(5)},           // window 0: each query sees itself only
  };
  std::mt19937 rng(77);
  const double h = 1e-6;
  for (const Config& c : configs) {
    Problem pb = make_problem(rng, c.B, c.Tk, c.H, c.Hkv, c.Dh, c.pos, c.window);
    CAPTURE(c.Tk);
    CAPTURE(c.window);
    const Result<double> an = run_kernel<double>(pb);
    auto fd_grad = [&](Tensor<double, 4>& x) {
      Tensor<double, 4> g(x.shape());
      for_each_index(x.shape(), [&](const auto& i) {
        double& xi = elem(x.view(), i);
        const double x0 = xi;
        xi = x0 + h;
        const double lp = loss(pb);
        xi = x0 - h;
        const double lm = loss(pb);
        xi = x0;
        elem(g.view(), i) = (lp - lm) / (2 * h);
      });
      return g;
    };
    check_close(an.dq, fd_grad(pb.q), 1e-6, 1e-8);
    check_close(an.dk, fd_grad(pb.k), 1e-6, 1e-8);
    check_close(an.dv, fd_grad(pb.v), 1e-6, 1e-8);
  }
}

TEST_CASE_TEMPLATE("attention reads and writes arbitrary strided views", T, float, double) {
  // q (every 4th row) and k as head slices of one fused projection (B, Tk, (H + Hkv) Dh); v, dk
  // and dv with a non-unit head-dim stride; out and dq stored (B, H, Tq, Dh) and seen as
  // (B, Tq, H, Dh); lse stored (Tq, B, H); qpos every other entry of a longer list.
  std::mt19937 rng(5);
  const index_t B = 2, Tk = 75, H = 4, Hkv = 2, Dh = 8, w = 20;
  Tensor<T, 4> qk(Shape<4>{B, Tk, H + Hkv, Dh}), v_t(Shape<4>{B, Tk, Dh, Hkv});
  Tensor<T, 4> dout(Shape<4>{B, Tk / 2, H, Dh});
  fill_random(qk, rng);
  fill_random(v_t, rng);
  fill_random(dout, rng);
  const auto pos = subset_positions(Tk, 2, 0);  // 38 entries; we keep the even-indexed ones
  Tensor<index_t, 1> long_pos(Shape<1>{index_t(pos.size())});
  for (index_t i = 0; i < long_pos.size(0); ++i) long_pos(i) = pos[i];
  const TensorView<const index_t, 1> qpos = long_pos.slice(0, 0, long_pos.size(0) - 1, 2);
  const index_t Tq = qpos.size(0);
  REQUIRE(Tq == 19);                                          // positions 0, 4, ..., 72
  const auto q_all = qk.slice(2, 0, H);                       // (B, Tk, H, Dh) strided
  const TensorView<const T, 4> q = q_all.slice(1, 0, Tk, 4);  // rows of positions 0, 4, 8, ...
  const TensorView<const T, 4> k = qk.slice(2, H, H + Hkv);
  const TensorView<const T, 4> v = v_t.transpose(2, 3);
  const TensorView<const T, 4> dO = dout.slice(1, 0, Tq);
  const T scale = T(1) / std::sqrt(T(Dh));

  Tensor<T, 4> out_bhtd(Shape<4>{B, H, Tq, Dh}), dq_bhtd(Shape<4>{B, H, Tq, Dh});
  Tensor<T, 4> dk_t(Shape<4>{B, Tk, Dh, Hkv}), dv_t(Shape<4>{B, Tk, Dh, Hkv});
  Tensor<T, 3> lse_t(Shape<3>{Tq, B, H});
  const auto out = out_bhtd.transpose(1, 2), dq = dq_bhtd.transpose(1, 2);
  const auto dk = dk_t.transpose(2, 3), dv = dv_t.transpose(2, 3);
  const auto lse = lse_t.permute(Shape<3>{1, 2, 0});
  lrt::cpu::attention_forward<T>(q, k, v, qpos, w, scale, out, lse);
  lrt::cpu::attention_backward<T>(q, k, v, qpos, w, scale, out, lse, dO, dq, dk, dv);

  // The same call on contiguous copies.
  const Tensor<T, 4> qc = lrt::contiguous(q), kc = lrt::contiguous(k), vc = lrt::contiguous(v),
                     dOc = lrt::contiguous(dO);
  const Tensor<index_t, 1> qposc = lrt::contiguous(qpos);
  Tensor<T, 4> outc(qc.shape()), dqc(qc.shape()), dkc(kc.shape()), dvc(vc.shape());
  Tensor<T, 3> lsec(Shape<3>{B, H, Tq});
  lrt::cpu::attention_forward<T>(qc, kc, vc, qposc, w, scale, outc, lsec);
  lrt::cpu::attention_backward<T>(qc, kc, vc, qposc, w, scale, outc, lsec, dOc, dqc, dkc, dvc);

  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  check_close(lrt::contiguous(out), outc, tol, tol);
  check_close(lrt::contiguous(lse), lsec, tol, tol);
  check_close(lrt::contiguous(dq), dqc, tol, tol);
  check_close(lrt::contiguous(dk), dkc, tol, tol);
  check_close(lrt::contiguous(dv), dvc, tol, tol);
}

TEST_CASE("keys no query may attend get exact zeros and are never read") {
  // Queries at odd positions with window 1 see keys p-1 and p; keys p >= 9 (after the last
  // query, position 8 is not a query here) are never attended. Window 0 on odd queries: even
  // keys are inside the tiles' key ranges but masked for every row.
  std::mt19937 rng(31);
  const index_t Tk = 14;
  for (index_t w : {index_t{0}, index_t{1}, index_t{4}}) {
    CAPTURE(w);
    const std::vector<index_t> pos = {1, 3, 5, 7};
    Problem pb = make_problem(rng, 2, Tk, 4, 2, 8, pos, w);
    const Result<double> r = run_kernel<double>(pb);
    auto attended = [&](index_t j) {
      for (index_t p : pos)
        if (j <= p && p - j <= w) return true;
      return false;
    };
    for_each_index(r.dk.shape(), [&](const auto& i) {
      if (!attended(i[1])) {
        CHECK(elem(r.dk.view(), i) == 0.0);
        CHECK(elem(r.dv.view(), i) == 0.0);
      }
    });
    // Changing every never-attended key and value (NaN after the last query) changes nothing.
    Problem pb2 = pb;
    for_each_index(pb2.k.shape(), [&](const auto& i) {
      if (attended(i[1])) return;
      const bool after_last = i[1] > pos.back();
      elem(pb2.k.view(), i) = after_last ? std::numeric_limits<double>::quiet_NaN() : 1e3;
      elem(pb2.v.view(), i) = after_last ? std::numeric_limits<double>::quiet_NaN() : -1e3;
    });
    const Result<double> r2 = run_kernel<double>(pb2);
    CHECK(equal(r.out.view(), r2.out.view()));
    CHECK(equal(r.lse.view(), r2.lse.view()));
    CHECK(equal(r.dq.view(), r2.dq.view()));
    CHECK(equal(r.dk.view(), r2.dk.view()));
    CHECK(equal(r.dv.view(), r2.dv.view()));
  }
}

TEST_CASE("a key only changes the queries that may see it (causal and windowed)") {
  std::mt19937 rng(12);
  const index_t T = 70, j0 = 40;
  for (index_t w : {index_t{5}, kHuge}) {
    CAPTURE(w);
    Problem pb = make_problem(rng, 1, T, 2, 1, 8, all_positions(T), w);
    const Result<float> r = run_kernel<float>(pb);
    Problem pb2 = pb;
    for (index_t e = 0; e < 8; ++e) {
      pb2.k(0, j0, 0, e) += 0.5;
      pb2.v(0, j0, 0, e) -= 0.5;
    }
    const Result<float> r2 = run_kernel<float>(pb2);
    for (index_t i = 0; i < T; ++i) {
      const bool sees = i >= j0 && i - j0 <= w;
      bool same = true;
      for (index_t h = 0; h < 2; ++h) {
        same = same && r.lse(0, h, i) == r2.lse(0, h, i);
        for (index_t e = 0; e < 8; ++e)
          same = same && r.out(0, i, h, e) == r2.out(0, i, h, e) && r.dq(0, i, h, e) == r2.dq(0, i, h, e);
      }
      CAPTURE(i);
      CHECK(same == !sees);
    }
  }
}

TEST_CASE("attention results do not depend on the thread count") {
  // The serial run happens inside a pool task, where every parallel_for (ours and GEMM's) runs
  // on one thread; the other run uses the whole pool. B = H = 1 with one query tile and a long
  // key range also makes GEMM split its rows when the call is not inside a task.
  std::mt19937 rng(3);
  struct Config {
    index_t B, Tk, H, Hkv, Dh;
    std::vector<index_t> pos;
  };
  const Config configs[] = {{2, 200, 4, 2, 64, all_positions(200)}, {1, 700, 1, 1, 64, subset_positions(700, 11, 3)}};
  for (const Config& c : configs) {
    const Problem pb = make_problem(rng, c.B, c.Tk, c.H, c.Hkv, c.Dh, c.pos, 300);
    const Result<float> par = run_kernel<float>(pb);
    Result<float> ser;
    lrt::parallel_for(2, 1, [&](index_t b, index_t) {
      if (b == 0) ser = run_kernel<float>(pb);
    });
    CHECK(equal(par.out.view(), ser.out.view()));
    CHECK(equal(par.lse.view(), ser.lse.view()));
    CHECK(equal(par.dq.view(), ser.dq.view()));
    CHECK(equal(par.dk.view(), ser.dk.view()));
    CHECK(equal(par.dv.view(), ser.dv.view()));
  }
  MESSAGE("pool threads: " << lrt::num_threads());
}

TEST_CASE("attention rejects invalid inputs with clear messages") {
  {
    Args a;  // the valid baseline runs
    a.forward();
    a.backward();
  }
  {
    Args a;
    a.k = Tensor<float, 4>(Shape<4>{2, 6, 3, 8});
    a.v = Tensor<float, 4>(Shape<4>{2, 6, 3, 8});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] q (2, 5, 4, 8) and k (2, 6, 3, 8): H % Hkv != 0", lrt::Error);
    CHECK_THROWS_WITH_AS(a.backward(), "[attention_backward] q (2, 5, 4, 8) and k (2, 6, 3, 8): H % Hkv != 0",
                         lrt::Error);
  }
  {
    Args a;
    a.k = Tensor<float, 4>(Shape<4>{2, 6, 0, 8});
    a.v = Tensor<float, 4>(Shape<4>{2, 6, 0, 8});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] k (2, 6, 0, 8) has no heads (Hkv = 0)", lrt::Error);
  }
  {
    Args a;
    a.v = Tensor<float, 4>(Shape<4>{2, 7, 2, 8});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] k (2, 6, 2, 8) and v (2, 7, 2, 8) differ in shape", lrt::Error);
  }
  {
    Args a;
    a.k = Tensor<float, 4>(Shape<4>{3, 6, 2, 8});
    a.v = Tensor<float, 4>(Shape<4>{3, 6, 2, 8});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] q (2, 5, 4, 8) and k (3, 6, 2, 8): batch sizes differ", lrt::Error);
  }
  {
    Args a;
    a.k = Tensor<float, 4>(Shape<4>{2, 6, 2, 4});
    a.v = Tensor<float, 4>(Shape<4>{2, 6, 2, 4});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] q (2, 5, 4, 8) and k (2, 6, 2, 4): head dims differ", lrt::Error);
  }
  {
    Args a;
    a.window = -1;
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] window must be >= 0, got -1", lrt::Error);
  }
  {
    Args a;
    a.qpos = Tensor<index_t, 1>(Shape<1>{4});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] qpos (4,) has 4 entries but q (2, 5, 4, 8) has Tq = 5", lrt::Error);
  }
  {
    Args a;
    a.qpos(2) = 1;
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] qpos must be strictly increasing: qpos[2] = 1 after qpos[1] = 1",
                         lrt::Error);
    a.qpos(2) = 2;
    a.qpos(3) = 2;
    CHECK_THROWS_WITH_AS(a.backward(),
                         "[attention_backward] qpos must be strictly increasing: qpos[3] = 2 after qpos[2] = 2",
                         lrt::Error);
  }
  {
    Args a;
    a.qpos(0) = -1;
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] qpos[0] = -1 is negative", lrt::Error);
  }
  {
    Args a;
    a.qpos(4) = 6;
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] qpos[4] = 6 is not < Tk = 6 (k (2, 6, 2, 8))", lrt::Error);
  }
  {
    Args a;
    a.out = Tensor<float, 4>(Shape<4>{2, 5, 4, 4});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] out (2, 5, 4, 4) must have the shape of q (2, 5, 4, 8)", lrt::Error);
    CHECK_THROWS_WITH_AS(a.backward(), "[attention_backward] out (2, 5, 4, 4) must have the shape of q (2, 5, 4, 8)",
                         lrt::Error);
  }
  {
    Args a;
    a.lse = Tensor<float, 3>(Shape<3>{2, 5, 4});
    CHECK_THROWS_WITH_AS(a.forward(), "[attention] lse (2, 5, 4) must be (B, H, Tq) = (2, 4, 5)", lrt::Error);
  }
  {
    Args a;
    a.dout = Tensor<float, 4>(Shape<4>{2, 5, 4, 7});
    CHECK_THROWS_WITH_AS(a.backward(), "[attention_backward] dout (2, 5, 4, 7) must have the shape of q (2, 5, 4, 8)",
                         lrt::Error);
  }
  {
    Args a;
    a.dq = Tensor<float, 4>(Shape<4>{2, 6, 4, 8});
    CHECK_THROWS_WITH_AS(a.backward(), "[attention_backward] dq (2, 6, 4, 8) must have the shape of q (2, 5, 4, 8)",
                         lrt::Error);
  }
  {
    Args a;
    a.dk = Tensor<float, 4>(Shape<4>{2, 6, 4, 8});
    CHECK_THROWS_WITH_AS(a.backward(), "[attention_backward] dk (2, 6, 4, 8) must have the shape of k (2, 6, 2, 8)",
                         lrt::Error);
  }
  {
    Args a;
    a.dv = Tensor<float, 4>(Shape<4>{1, 6, 2, 8});
    CHECK_THROWS_WITH_AS(a.backward(), "[attention_backward] dv (1, 6, 2, 8) must have the shape of v (2, 6, 2, 8)",
                         lrt::Error);
  }
}

}  // namespace test_attention_kernel
