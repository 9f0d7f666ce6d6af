// tests/emu/test_cuda_emu.cpp: lrt's CUDA kernels, compiled by the host compiler and run on the
// CPU emulator of tests/emu/fake (no nvcc, no GPU), against the CPU backend.
//
// The CUDA headers are the real ones, unmodified; only <cuda_runtime.h> and <cublas_v2.h> are the
// emulator's (tests/emu/fake comes first on the include path). Every CUDA thread is a fiber,
// blocks and threads run in shuffled orders, barriers and warp shuffles are exact, device memory
// is registered host memory and copies are checked for direction: see fake/cuda_runtime.h.
//
// Covered: every member of NnBackend<cuda::Device> for float and double (strided, transposed and
// padded views, in-place row kernels and RoPE, GQA, subset queries, windows 0 / small / huge,
// head dims 8..256, KV-cache slices, empty shapes, the error messages); the optimizers of
// optim/cuda.cuh (AdamW, Muon, polar_express, state save/load: the GPU cases of
// tests/cuda/optim_cases.hpp, plus bit-identity of AdamW) with cuBLAS emulated by plain loops;
// GEMM through backend/cuda/gemm.cuh; the elementwise executor; the launch check; and the
// emulator's own semantics (indices, barriers, shuffles).
//
// Tolerances (CPU reference vs emulated kernels, both in the same precision): the kernels differ
// from the CPU only in summation order, so elementwise |a - b| <= tol (1 + |b|) with tol 2e-5
// (float) or 1e-12 (double) for the row kernels, ten times that for cross-entropy (exp/tanh of
// softcapped logits up to 30) and attention (online softmax vs two-pass); embedding is exact.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#if !defined(LRT_CUDA_EMULATOR)
#error "tests/emu/fake must come first on the include path (the real CUDA headers were found)"
#endif

#include <lrt/cuda.hpp>  // first, as in the two CUDA test programs included at the end

#include <lrt/cpu.hpp>  // the CPU backend: the reference

#include <lrt/backend/cuda/check.cuh>
#include <lrt/backend/cuda/device.cuh>
#include <lrt/backend/cuda/executor.cuh>
#include <lrt/backend/cuda/gemm.cuh>
#include <lrt/backend/cuda/launch.cuh>
#include <lrt/backend/cuda/nn.cuh>

#include <lrt/autodiff/graph.hpp>
#include <lrt/optim/adamw.hpp>
#include <lrt/optim/muon.hpp>
#include <lrt/optim/lr_schedule.hpp>

#include <lrt/optim/cuda.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

// The GPU-vs-CPU optimizer cases, run here on the emulator.
#include "../cuda/optim_cases.hpp"

namespace emu_test {

using lrt::index_t;
using lrt::Shape;
using lrt::Strides;
using lrt::TensorView;
using G = lrt::cuda::Device;
using C = lrt::cpu::Device;
using NB = lrt::NnBackend<G>;

template <class T>
constexpr double tol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

template <class T>
const char* type_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}

template <class T>
std::vector<T> random_vector(std::mt19937_64& rng, std::size_t n, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

/// A buffer twice: exactly n elements of (emulated) device memory from cudaMalloc, so that
/// AddressSanitizer reports any access past its end, and a host copy with the same layout for
/// the CPU reference. Views of both take the same shape, strides and offset.
template <class T>
class Buf {
 public:
  explicit Buf(std::vector<T> h) : host(std::move(h)) {
    REQUIRE(cudaMalloc(&dev_, bytes()) == cudaSuccess);
    upload();
  }
  Buf(std::size_t n, T fill) : Buf(std::vector<T>(n, fill)) {}
  ~Buf() { (void)cudaFree(dev_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;

  std::size_t bytes() const { return host.size() * sizeof(T); }
  T* dev() const { return dev_; }
  void upload() {
    if (bytes()) REQUIRE(cudaMemcpy(dev_, host.data(), bytes(), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> h(host.size());
    if (bytes()) REQUIRE(cudaMemcpy(h.data(), dev_, bytes(), cudaMemcpyDeviceToHost) == cudaSuccess);
    return h;
  }
  template <int R>
  TensorView<T, R, G> gpu(const Shape<R>& s, const Strides<R>& st, index_t off = 0) const {
    return TensorView<T, R, G>(dev_ + off, s, st);
  }
  template <int R>
  TensorView<T, R, G> gpu(const Shape<R>& s) const {
    return TensorView<T, R, G>(dev_, s);
  }
  template <int R>
  TensorView<T, R, C> cpu(const Shape<R>& s, const Strides<R>& st, index_t off = 0) {
    return TensorView<T, R, C>(host.data() + off, s, st);
  }
  template <int R>
  TensorView<T, R, C> cpu(const Shape<R>& s) {
    return TensorView<T, R, C>(host.data(), s);
  }

  std::vector<T> host;

 private:
  T* dev_ = nullptr;
};

/// Compares the whole device buffer (padding included: the GPU must not write outside its
/// views either) with the host copy the CPU reference wrote: |a - b| <= t (1 + |b|), NaN == NaN.
template <class T>
void check_buffer(const Buf<T>& b, double t, const std::string& what) {
  const std::vector<T> got = b.download();
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double x = static_cast<double>(got[i]), y = static_cast<double>(b.host[i]);
    double e = std::abs(x - y) / (1 + std::abs(y));
    if (std::isnan(x) || std::isnan(y)) e = std::isnan(x) && std::isnan(y) ? 0 : INFINITY;
    if (e > worst || (t == 0 && e != 0 && worst == 0)) worst = e, at = i;
  }
  INFO(what << ": worst relative error " << worst << " at element " << at << " of " << got.size() << " (device "
            << (got.empty() ? 0.0 : double(got[at])) << ", host " << (got.empty() ? 0.0 : double(b.host[at])) << ")");
  CHECK(worst <= t);
}

/// Emulated launches since the last call.
inline std::uint64_t launches_since(std::uint64_t& mark) {
  const std::uint64_t d = lrt_cuda_emu::stats.launches - mark;
  mark = lrt_cuda_emu::stats.launches;
  return d;
}

// ---------------------------------------------------------------------------------------------
// Row kernels: RMSNorm and softmax, forward and backward, out of place and in place

template <class T>
void check_rows(index_t N, index_t Cn, bool transposed) {
  CAPTURE(N);
  CAPTURE(Cn);
  CAPTURE(transposed);
  std::mt19937_64 rng(static_cast<std::uint64_t>(N * 1000 + Cn));
  // x, y, gy, gx: padded rows (ld = C + 3) or column-major; rinv with stride 2.
  const index_t ld = Cn + 3;
  const std::size_t n2 = static_cast<std::size_t>(std::max(N * ld, Cn * N));
  const Shape<2> s{N, Cn};
  const Strides<2> st = transposed ? Strides<2>{1, N} : Strides<2>{ld, 1};
  const T eps = T(1e-6);
  Buf<T> x(random_vector<T>(rng, n2)), y(n2, T(7)), rinv(static_cast<std::size_t>(2 * N), T(7));
  NB::rmsnorm_forward<T>(x.gpu(s, st), y.gpu(s, st), rinv.gpu(Shape<1>{N}, Strides<1>{2}), eps);
  lrt::cpu::rmsnorm_forward<T>(x.cpu(s, st), y.cpu(s, st), rinv.cpu(Shape<1>{N}, Strides<1>{2}), eps);
  check_buffer(y, tol<T>(), "rmsnorm_forward y");
  check_buffer(rinv, tol<T>(), "rmsnorm_forward rinv");

  // Backward from the CPU's y and rinv (uploaded), into a fresh contiguous gx.
  y.upload();
  rinv.upload();
  Buf<T> gy(random_vector<T>(rng, n2)), gx(static_cast<std::size_t>(N * Cn), T(9));
  const Shape<1> sr{N};
  const Strides<1> str{2};
  NB::rmsnorm_backward<T>(y.gpu(s, st), rinv.gpu(sr, str), gy.gpu(s, st), gx.gpu(s));
  lrt::cpu::rmsnorm_backward<T>(y.cpu(s, st), rinv.cpu(sr, str), gy.cpu(s, st), gx.cpu(s));
  check_buffer(gx, tol<T>(), "rmsnorm_backward gx");

  // Softmax forward into y, backward into gx.
  NB::softmax_forward<T>(x.gpu(s, st), y.gpu(s, st));
  lrt::cpu::softmax_forward<T>(x.cpu(s, st), y.cpu(s, st));
  check_buffer(y, tol<T>(), "softmax_forward y");
  y.upload();
  NB::softmax_backward<T>(y.gpu(s, st), gy.gpu(s, st), gx.gpu(s));
  lrt::cpu::softmax_backward<T>(y.cpu(s, st), gy.cpu(s, st), gx.cpu(s));
  check_buffer(gx, tol<T>(), "softmax_backward gx");

  // In place: y = f(x) with y == x, and gx == gy in the backwards.
  Buf<T> a(random_vector<T>(rng, n2));
  NB::softmax_forward<T>(a.gpu(s, st), a.gpu(s, st));
  lrt::cpu::softmax_forward<T>(a.cpu(s, st), a.cpu(s, st));
  check_buffer(a, tol<T>(), "softmax_forward in place");
  a.upload();
  Buf<T> g(random_vector<T>(rng, n2));
  NB::softmax_backward<T>(a.gpu(s, st), g.gpu(s, st), g.gpu(s, st));
  lrt::cpu::softmax_backward<T>(a.cpu(s, st), g.cpu(s, st), g.cpu(s, st));
  check_buffer(g, tol<T>(), "softmax_backward in place (gx == gy)");
  Buf<T> r(random_vector<T>(rng, n2));
  NB::rmsnorm_forward<T>(r.gpu(s, st), r.gpu(s, st), rinv.gpu(sr, str), eps);
  lrt::cpu::rmsnorm_forward<T>(r.cpu(s, st), r.cpu(s, st), rinv.cpu(sr, str), eps);
  check_buffer(r, tol<T>(), "rmsnorm_forward in place");
  check_buffer(rinv, tol<T>(), "rmsnorm_forward in place rinv");
  r.upload();
  rinv.upload();
  Buf<T> g2(random_vector<T>(rng, n2));
  NB::rmsnorm_backward<T>(r.gpu(s, st), rinv.gpu(sr, str), g2.gpu(s, st), g2.gpu(s, st));
  lrt::cpu::rmsnorm_backward<T>(r.cpu(s, st), rinv.cpu(sr, str), g2.cpu(s, st), g2.cpu(s, st));
  check_buffer(g2, tol<T>(), "rmsnorm_backward in place (gx == gy)");
}

TEST_CASE_TEMPLATE("cuda emu: rmsnorm and softmax rows", T, float, double) {
  check_rows<T>(7, 5, false);     // 32 threads, most idle
  check_rows<T>(5, 100, true);    // column-major views
  check_rows<T>(4, 300, false);   // 256 threads, some with two elements
  check_rows<T>(3, 1000, false);  // 256 threads, four elements each
  check_rows<T>(40, 33, true);    // 64 threads; many blocks
  check_rows<T>(2, 1, false);     // a single column
}

TEST_CASE("cuda emu: row kernels on empty shapes launch nothing") {
  std::uint64_t mark = lrt_cuda_emu::stats.launches;
  Buf<double> b(8, 1.0);
  NB::rmsnorm_forward<double>(b.gpu(Shape<2>{0, 4}), b.gpu(Shape<2>{0, 4}), b.gpu(Shape<1>{0}), 1e-6);
  NB::softmax_forward<double>(b.gpu(Shape<2>{0, 4}), b.gpu(Shape<2>{0, 4}));
  NB::embedding_forward<double>(TensorView<const index_t, 1, G>(nullptr, Shape<1>{0}), b.gpu(Shape<2>{2, 4}),
                                b.gpu(Shape<2>{0, 4}));
  CHECK(launches_since(mark) == 0);
}

// ---------------------------------------------------------------------------------------------
// RoPE

template <class T>
void check_rope(index_t B, index_t Tt, index_t H, index_t Dh, bool inverse) {
  CAPTURE(B);
  CAPTURE(Tt);
  CAPTURE(H);
  CAPTURE(Dh);
  CAPTURE(inverse);
  std::mt19937_64 rng(static_cast<std::uint64_t>(B * 131 + Tt * 17 + H * 5 + Dh));
  const index_t half = Dh / 2;
  const auto n = [](index_t v) { return static_cast<std::size_t>(v); };
  // x: a (B, T, H, Dh) slice of (B, T + 2, H, Dh); cos, sin: (T, half) with a padded row.
  Buf<T> x(random_vector<T>(rng, n(B * (Tt + 2) * H * Dh))), cs(random_vector<T>(rng, n(Tt * (half + 1)))),
      sn(random_vector<T>(rng, n(Tt * (half + 1)))), y(n(B * Tt * H * Dh), T(5));
  const Shape<4> s{B, Tt, H, Dh};
  const Strides<4> xs{(Tt + 2) * H * Dh, H * Dh, Dh, 1};
  const Shape<2> ts{Tt, half};
  const Strides<2> tst{half + 1, 1};
  NB::rope_apply<T>(x.gpu(s, xs), cs.gpu(ts, tst), sn.gpu(ts, tst), y.gpu(s), inverse);
  lrt::cpu::rope_apply<T>(x.cpu(s, xs), cs.cpu(ts, tst), sn.cpu(ts, tst), y.cpu(s), inverse);
  check_buffer(y, tol<T>(), "rope_apply");
  // In place on the slice of x.
  NB::rope_apply<T>(x.gpu(s, xs), cs.gpu(ts, tst), sn.gpu(ts, tst), x.gpu(s, xs), !inverse);
  lrt::cpu::rope_apply<T>(x.cpu(s, xs), cs.cpu(ts, tst), sn.cpu(ts, tst), x.cpu(s, xs), !inverse);
  check_buffer(x, tol<T>(), "rope_apply in place");
}

TEST_CASE_TEMPLATE("cuda emu: rope", T, float, double) {
  check_rope<T>(2, 3, 2, 8, false);
  check_rope<T>(2, 3, 3, 6, true);
  // 2 * 40 * 4 * 32 = 10240 pairs: more than one sweep of the grid-stride loop (the emulated
  // device has one multiprocessor: 32 blocks of 256 threads).
  check_rope<T>(2, 40, 4, 64, false);
}

/// The fused RoPE + RMSNorm against the CPU's, forward and backward, on a strided x slice, with
/// padding between rows that must stay untouched (y, gx are prefilled with 5).
template <class T>
void check_rope_rmsnorm(index_t B, index_t Tt, index_t H, index_t Dh) {
  CAPTURE(B);
  CAPTURE(Tt);
  CAPTURE(H);
  CAPTURE(Dh);
  std::mt19937_64 rng(static_cast<std::uint64_t>(B * 37 + Tt * 11 + H * 3 + Dh));
  const index_t half = Dh / 2, rows = B * Tt * H;
  const auto n = [](index_t v) { return static_cast<std::size_t>(v); };
  Buf<T> x(random_vector<T>(rng, n(B * (Tt + 2) * H * Dh))), cs(random_vector<T>(rng, n(Tt * (half + 1)))),
      sn(random_vector<T>(rng, n(Tt * (half + 1)))), y(n(B * Tt * H * (Dh + 1)), T(5)), rinv(n(rows), T(5)),
      gy(random_vector<T>(rng, n(B * Tt * H * Dh))), gx(n(B * Tt * H * (Dh + 1)), T(5));
  const Shape<4> s{B, Tt, H, Dh};
  const Strides<4> xs{(Tt + 2) * H * Dh, H * Dh, Dh, 1}, ps{Tt * H * (Dh + 1), H * (Dh + 1), Dh + 1, 1};
  const Shape<2> ts{Tt, half};
  const Strides<2> tst{half + 1, 1};
  const Shape<1> rs{rows};
  const double eps = 1.1920929e-07;
  NB::rope_rmsnorm_forward<T>(x.gpu(s, xs), cs.gpu(ts, tst), sn.gpu(ts, tst), y.gpu(s, ps), rinv.gpu(rs), eps);
  lrt::cpu::rope_rmsnorm_forward<T>(x.cpu(s, xs), cs.cpu(ts, tst), sn.cpu(ts, tst), y.cpu(s, ps), rinv.cpu(rs), eps);
  check_buffer(y, tol<T>(), "rope_rmsnorm_forward y");
  check_buffer(rinv, tol<T>(), "rope_rmsnorm_forward rinv");
  y.upload();
  rinv.upload();
  NB::rope_rmsnorm_backward<T>(y.gpu(s, ps), rinv.gpu(rs), gy.gpu(s), cs.gpu(ts, tst), sn.gpu(ts, tst), gx.gpu(s, ps));
  lrt::cpu::rope_rmsnorm_backward<T>(y.cpu(s, ps), rinv.cpu(rs), gy.cpu(s), cs.cpu(ts, tst), sn.cpu(ts, tst),
                                     gx.cpu(s, ps));
  check_buffer(gx, tol<T>(), "rope_rmsnorm_backward gx");
}

TEST_CASE_TEMPLATE("cuda emu: fused rope + rmsnorm", T, float, double) {
  check_rope_rmsnorm<T>(2, 3, 2, 8);    // 4 pairs: most lanes idle
  check_rope_rmsnorm<T>(1, 2, 3, 130);  // 65 pairs: lanes with three pairs
  check_rope_rmsnorm<T>(2, 40, 4, 64);  // 320 rows: several rows per warp (grid-stride)
  std::uint64_t mark = lrt_cuda_emu::stats.launches;
  Buf<T> b(8, T(1));
  NB::rope_rmsnorm_forward<T>(b.gpu(Shape<4>{0, 2, 1, 4}), b.gpu(Shape<2>{2, 2}), b.gpu(Shape<2>{2, 2}),
                              b.gpu(Shape<4>{0, 2, 1, 4}), b.gpu(Shape<1>{0}), 1e-6);
  CHECK(launches_since(mark) == 0);
}

// ---------------------------------------------------------------------------------------------
// Softcapped cross-entropy

template <class T>
void check_xent(index_t N, index_t V, index_t Vp, T cap, bool transposed) {
  CAPTURE(N);
  CAPTURE(V);
  CAPTURE(Vp);
  CAPTURE(cap);
  CAPTURE(transposed);
  std::mt19937_64 rng(static_cast<std::uint64_t>(N * 7 + V));
  const auto n = [](index_t v) { return static_cast<std::size_t>(v); };
  const index_t ignore = -100;
  std::vector<index_t> tv(n(2 * N));  // targets with stride 2
  std::uniform_int_distribution<index_t> d(0, V - 1);
  for (index_t i = 0; i < N; ++i) tv[n(2 * i)] = i % 4 == 3 ? ignore : d(rng);
  tv[n(2 * (N - 1))] = V - 1;  // the last column
  Buf<T> logits(random_vector<T>(rng, n(N * Vp), -30, 30)), loss(n(N), T(7)), lse(n(2 * N), T(7));
  Buf<index_t> targets(tv);
  const Shape<2> ls{N, Vp};
  const Strides<2> lst = transposed ? Strides<2>{1, N} : Strides<2>{Vp, 1};
  const Shape<1> s1{N};
  const Strides<1> st2{2};
  NB::softcap_xent_forward<T>(logits.gpu(ls, lst), targets.gpu(s1, st2), V, cap, ignore, loss.gpu(s1),
                              lse.gpu(s1, st2));
  lrt::cpu::softcap_xent_forward<T>(logits.cpu(ls, lst), targets.cpu(s1, st2), V, cap, ignore, loss.cpu(s1),
                                    lse.cpu(s1, st2));
  check_buffer(loss, 10 * tol<T>(), "softcap_xent_forward loss");
  check_buffer(lse, 10 * tol<T>(), "softcap_xent_forward lse");
  lse.upload();
  std::vector<T> gv = random_vector<T>(rng, n(N));
  if (N > 2) gv[1] = T(0);  // a row with zero upstream gradient
  Buf<T> g(gv), dl(n(N * Vp), T(7));
  NB::softcap_xent_backward<T>(logits.gpu(ls, lst), targets.gpu(s1, st2), V, cap, ignore, lse.gpu(s1, st2), g.gpu(s1),
                               dl.gpu(ls, lst));
  lrt::cpu::softcap_xent_backward<T>(logits.cpu(ls, lst), targets.cpu(s1, st2), V, cap, ignore, lse.cpu(s1, st2),
                                     g.cpu(s1), dl.cpu(ls, lst));
  check_buffer(dl, 10 * tol<T>(), "softcap_xent_backward dlogits");
}

TEST_CASE_TEMPLATE("cuda emu: softcapped cross-entropy", T, float, double) {
  check_xent<T>(9, 50, 64, T(15), false);   // padded vocabulary: zeros beyond V
  check_xent<T>(4, 700, 700, T(0), false);  // no cap; 256 threads, several columns each
  check_xent<T>(6, 37, 40, T(30), true);    // transposed logits
}

TEST_CASE("cuda emu: cross-entropy treats targets out of [0, V) as ignored, reading nothing") {
  // The caller validates targets; the kernels must still never read out of range.
  Buf<float> logits(std::vector<float>{1, 2, 3, 4, 5, 6}), loss(2, 7.f), lse(2, 7.f), g(2, 1.f), dl(6, 7.f);
  Buf<index_t> t(std::vector<index_t>{3, -5});
  NB::softcap_xent_forward<float>(logits.gpu(Shape<2>{2, 3}), t.gpu(Shape<1>{2}), 3, 0.f, -1, loss.gpu(Shape<1>{2}),
                                  lse.gpu(Shape<1>{2}));
  CHECK(loss.download() == std::vector<float>{0.f, 0.f});
  NB::softcap_xent_backward<float>(logits.gpu(Shape<2>{2, 3}), t.gpu(Shape<1>{2}), 3, 0.f, -1, lse.gpu(Shape<1>{2}),
                                   g.gpu(Shape<1>{2}), dl.gpu(Shape<2>{2, 3}));
  CHECK(dl.download() == std::vector<float>(6, 0.f));
}

// ---------------------------------------------------------------------------------------------
// Embedding

template <class T>
void check_embedding(index_t N, index_t V, index_t Cn) {
  CAPTURE(N);
  CAPTURE(V);
  CAPTURE(Cn);
  std::mt19937_64 rng(static_cast<std::uint64_t>(N * 3 + V * 11 + Cn));
  const auto n = [](index_t v) { return static_cast<std::size_t>(v); };
  std::vector<index_t> iv(n(2 * N));
  std::uniform_int_distribution<index_t> d(0, std::max<index_t>(1, V / 3) - 1);  // many repeats
  for (auto& x : iv) x = d(rng);
  iv[0] = V - 1;
  Buf<index_t> ids(iv);
  const Shape<1> is{N};
  const Strides<1> ist{2};
  // table: (V, C) with padded rows; out, gout: contiguous.
  const Shape<2> ts{V, Cn};
  const Strides<2> tst{Cn + 2, 1};
  Buf<T> table(random_vector<T>(rng, n(V * (Cn + 2)))), out(n(N * Cn), T(7));
  NB::embedding_forward<T>(ids.gpu(is, ist), table.gpu(ts, tst), out.gpu(Shape<2>{N, Cn}));
  lrt::cpu::embedding_forward<T>(ids.cpu(is, ist), table.cpu(ts, tst), out.cpu(Shape<2>{N, Cn}));
  check_buffer(out, 0, "embedding_forward (exact)");
  // Backward accumulates into the table's gradient (rows of one id in row order): exact.
  Buf<T> gout(random_vector<T>(rng, n(N * Cn))), gt(random_vector<T>(rng, n(V * (Cn + 2))));
  NB::embedding_backward<T>(ids.gpu(is, ist), gout.gpu(Shape<2>{N, Cn}), gt.gpu(ts, tst));
  lrt::cpu::embedding_backward<T>(ids.cpu(is, ist), gout.cpu(Shape<2>{N, Cn}), gt.cpu(ts, tst));
  check_buffer(gt, 0, "embedding_backward (exact)");
}

TEST_CASE_TEMPLATE("cuda emu: embedding", T, float, double) {
  check_embedding<T>(40, 30, 7);
  check_embedding<T>(20, 9, 300);
  check_embedding<T>(1, 1, 3);
}

TEST_CASE("cuda emu: embedding ids out of range") {
  Buf<index_t> bad(std::vector<index_t>{0, 9});
  Buf<double> gout(6, 1.0), gt(15, 0.0), out(6, 7.0), table(15, 2.0);
  // Checked on the device: raised at the next wait for it; the bad row adds nothing.
  NB::embedding_backward<double>(bad.gpu(Shape<1>{2}), gout.gpu(Shape<2>{2, 3}), gt.gpu(Shape<2>{5, 3}));
  CHECK_THROWS_WITH_AS(lrt::cuda::synchronize(),
                       "[embedding_backward] id 9 at position 1 out of range for table (5, 3)", lrt::Error);
  CHECK(gt.download() == std::vector<double>{1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // The forward does not validate (the caller does) but never reads out of range: a zero row.
  NB::embedding_forward<double>(bad.gpu(Shape<1>{2}), table.gpu(Shape<2>{5, 3}), out.gpu(Shape<2>{2, 3}));
  CHECK(out.download() == std::vector<double>{2, 2, 2, 0, 0, 0});
}

// ---------------------------------------------------------------------------------------------
// Attention

template <class T>
void check_attention(index_t B, index_t Tk, index_t H, index_t Hkv, index_t Dh, index_t window,
                     const std::vector<index_t>& qp, index_t Tmax) {
  const index_t Tq = static_cast<index_t>(qp.size());
  CAPTURE(B);
  CAPTURE(Tq);
  CAPTURE(Tk);
  CAPTURE(H);
  CAPTURE(Hkv);
  CAPTURE(Dh);
  CAPTURE(window);
  std::mt19937_64 rng(static_cast<std::uint64_t>(B * 7 + Tk * 13 + H * 17 + Dh));
  const auto n = [](index_t v) { return static_cast<std::size_t>(v); };
  // q contiguous; k, v: (B, Tk, Hkv, Dh) slices of a (B, Tmax, Hkv, Dh) cache; out in a
  // (B, H, Tq, Dh) layout viewed as (B, Tq, H, Dh); qpos with stride 3.
  const Shape<4> qs{B, Tq, H, Dh}, ks{B, Tk, Hkv, Dh};
  const Strides<4> kst{Tmax * Hkv * Dh, Hkv * Dh, Dh, 1}, ost{H * Tq * Dh, Dh, Tq * Dh, 1};
  std::vector<index_t> pv(n(3 * Tq + 1), -7);
  for (index_t i = 0; i < Tq; ++i) pv[n(3 * i)] = qp[n(i)];
  Buf<index_t> qpos(pv);
  const Shape<1> ps{Tq};
  const Strides<1> pst{3};
  Buf<T> q(random_vector<T>(rng, n(B * Tq * H * Dh))), k(random_vector<T>(rng, n(B * Tmax * Hkv * Dh))),
      v(random_vector<T>(rng, n(B * Tmax * Hkv * Dh))), out(n(B * Tq * H * Dh), T(7)), lse(n(B * H * Tq), T(7));
  const T scale = T(1) / std::sqrt(T(Dh));
  NB::attention_forward<T>(q.gpu(qs), k.gpu(ks, kst), v.gpu(ks, kst), qpos.gpu(ps, pst), window, scale,
                           out.gpu(qs, ost), lse.gpu(Shape<3>{B, H, Tq}));
  lrt::cpu::attention_forward<T>(q.cpu(qs), k.cpu(ks, kst), v.cpu(ks, kst), qpos.cpu(ps, pst), window, scale,
                                 out.cpu(qs, ost), lse.cpu(Shape<3>{B, H, Tq}));
  check_buffer(out, 10 * tol<T>(), "attention_forward out");
  check_buffer(lse, 10 * tol<T>(), "attention_forward lse");

  // Backward from the CPU's out and lse; dq contiguous, dk contiguous, dv a cache slice.
  out.upload();
  lse.upload();
  Buf<T> dout(random_vector<T>(rng, n(B * Tq * H * Dh))), dq(n(B * Tq * H * Dh), T(7)), dk(n(B * Tk * Hkv * Dh), T(7)),
      dv(n(B * Tmax * Hkv * Dh), T(7));
  NB::attention_backward<T>(q.gpu(qs), k.gpu(ks, kst), v.gpu(ks, kst), qpos.gpu(ps, pst), window, scale,
                            out.gpu(qs, ost), lse.gpu(Shape<3>{B, H, Tq}), dout.gpu(qs), dq.gpu(qs), dk.gpu(ks),
                            dv.gpu(ks, kst));
  lrt::cpu::attention_backward<T>(q.cpu(qs), k.cpu(ks, kst), v.cpu(ks, kst), qpos.cpu(ps, pst), window, scale,
                                  out.cpu(qs, ost), lse.cpu(Shape<3>{B, H, Tq}), dout.cpu(qs), dq.cpu(qs), dk.cpu(ks),
                                  dv.cpu(ks, kst));
  check_buffer(dq, 10 * tol<T>(), "attention_backward dq");
  check_buffer(dk, 10 * tol<T>(), "attention_backward dk");
  check_buffer(dv, 10 * tol<T>(), "attention_backward dv");

  // Keys that no query sees get exact zeros.
  const std::vector<T> dkh = dk.download(), dvh = dv.download();
  bool zeros = true;
  index_t unseen = 0;
  for (index_t b = 0; b < B; ++b)
    for (index_t j = 0; j < Tk; ++j) {
      bool seen = false;
      for (const index_t p : qp) seen = seen || (j <= p && p - j <= window);
      if (seen) continue;
      ++unseen;
      for (index_t g = 0; g < Hkv; ++g)
        for (index_t e = 0; e < Dh; ++e)
          zeros = zeros && dkh[n(((b * Tk + j) * Hkv + g) * Dh + e)] == T(0) &&
                  dvh[n(b * kst[0] + j * kst[1] + g * kst[2] + e)] == T(0);
    }
  CAPTURE(unseen);
  CHECK(zeros);
}

TEST_CASE_TEMPLATE("cuda emu: attention", T, float, double) {
  const index_t huge = std::numeric_limits<index_t>::max();
  SUBCASE("causal, GQA 4/2, Dh 8, every position") {
    check_attention<T>(2, 13, 4, 2, 8, 1000, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 13);
  }
  SUBCASE("window 3, subset queries, Dh 33 (two dims per lane, one partial), KV slice") {
    check_attention<T>(2, 13, 4, 2, 33, 3, {0, 2, 3, 7, 9}, 16);
  }
  SUBCASE("window 0, MQA 2/1, Dh 64") { check_attention<T>(1, 9, 2, 1, 64, 0, {1, 4, 5}, 12); }
  SUBCASE("window = max index, Dh 100") { check_attention<T>(1, 17, 3, 3, 100, huge, {3, 8, 9, 10, 16}, 20); }
  SUBCASE("one query, Dh 256") { check_attention<T>(2, 6, 2, 2, 256, 2, {5}, 9); }
  SUBCASE("window 4, GQA 6/2, Dh 40") {
    check_attention<T>(1, 11, 6, 2, 40, 4, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 11);
  }
  SUBCASE("decode-like: one query at the end of a long cache, Dh 128") {
    check_attention<T>(1, 70, 4, 1, 128, huge, {69}, 80);
  }
}

TEST_CASE("cuda emu: attention errors and empty shapes") {
  Buf<double> buf(1000, 0.5);
  Buf<index_t> qp(std::vector<index_t>{0, 2, 2});
  const TensorView<const double, 4, G> q = buf.gpu(Shape<4>{1, 3, 2, 4}), kv = buf.gpu(Shape<4>{1, 5, 1, 4});
  const TensorView<double, 4, G> o(buf.dev() + 100, Shape<4>{1, 3, 2, 4});
  const TensorView<double, 3, G> l(buf.dev() + 200, Shape<3>{1, 2, 3});
  const auto fwd = [&](TensorView<double, 3, G> lse) {
    NB::attention_forward<double>(q, kv, kv, qp.gpu(Shape<1>{3}), 4, 0.5, o, lse);
  };
  CHECK_THROWS_WITH_AS(fwd(l), "[attention] qpos must be strictly increasing: qpos[2] = 2 after qpos[1] = 2",
                       lrt::Error);
  qp.host = {0, 2, 5};
  qp.upload();
  CHECK_THROWS_WITH_AS(fwd(l), "[attention] qpos[2] = 5 is not < Tk = 5 (k (1, 5, 1, 4))", lrt::Error);
  qp.host = {-1, 2, 3};
  qp.upload();
  CHECK_THROWS_WITH_AS(fwd(l), "[attention] qpos[0] = -1 is negative", lrt::Error);
  qp.host = {0, 1, 2};
  qp.upload();
  CHECK_THROWS_WITH_AS(fwd(TensorView<double, 3, G>(buf.dev() + 200, Shape<3>{1, 3, 2})),
                       "[attention] lse (1, 3, 2) must be (B, H, Tq) = (1, 2, 3)", lrt::Error);
  CHECK_THROWS_WITH_AS(NB::attention_forward<double>(buf.gpu(Shape<4>{1, 1, 1, 300}), buf.gpu(Shape<4>{1, 1, 1, 300}),
                                                     buf.gpu(Shape<4>{1, 1, 1, 300}), qp.gpu(Shape<1>{1}), 4, 0.5,
                                                     buf.gpu(Shape<4>{1, 1, 1, 300}), buf.gpu(Shape<3>{1, 1, 1})),
                       "[attention] head dim 300 of q (1, 1, 1, 300) is larger than the CUDA kernels' limit of 256",
                       lrt::Error);
  CHECK_THROWS_WITH_AS(NB::attention_backward<double>(q, kv, kv, qp.gpu(Shape<1>{3}), -1, 0.5, q, l, q, o, o, o),
                       "[attention_backward] window must be >= 0, got -1", lrt::Error);
  CHECK_THROWS_WITH_AS(
      NB::rmsnorm_forward<double>(buf.gpu(Shape<2>{3, 4}), buf.gpu(Shape<2>{4, 3}), buf.gpu(Shape<1>{3}), 1e-6),
      "[rmsnorm] shapes x (3, 4), y (4, 3), rinv (3,) do not match", lrt::Error);

  // Tq = 0: the forward launches nothing; the backward only zeroes dk and dv.
  std::uint64_t mark = lrt_cuda_emu::stats.launches;
  const Shape<4> q0{1, 0, 2, 4};
  NB::attention_forward<double>(buf.gpu(q0), kv, kv, qp.gpu(Shape<1>{0}), 4, 0.5, buf.gpu(q0),
                                buf.gpu(Shape<3>{1, 2, 0}));
  CHECK(launches_since(mark) == 0);
  Buf<double> dk(20, 7.0), dv(20, 7.0);
  NB::attention_backward<double>(buf.gpu(q0), kv, kv, qp.gpu(Shape<1>{0}), 4, 0.5, buf.gpu(q0),
                                 buf.gpu(Shape<3>{1, 2, 0}), buf.gpu(q0), buf.gpu(q0), dk.gpu(Shape<4>{1, 5, 1, 4}),
                                 dv.gpu(Shape<4>{1, 5, 1, 4}));
  CHECK(launches_since(mark) == 1);
  CHECK(dk.download() == std::vector<double>(20, 0.0));
  CHECK(dv.download() == std::vector<double>(20, 0.0));
}

// ---------------------------------------------------------------------------------------------
// GEMM (backend/cuda/gemm.cuh on the emulated cuBLAS) and the elementwise executor

template <class T>
void check_gemm(index_t M, index_t N, index_t K, bool ta, bool tb, bool tc, T alpha, T beta) {
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(tc);
  std::mt19937_64 rng(static_cast<std::uint64_t>(M * 100 + N * 10 + K));
  const auto n = [](index_t v) { return static_cast<std::size_t>(v); };
  Buf<T> a(random_vector<T>(rng, n(M * K))), b(random_vector<T>(rng, n(K * N))), c(random_vector<T>(rng, n(M * N)));
  if (beta == T(0)) {  // C's old contents must be ignored, NaN included
    std::fill(c.host.begin(), c.host.end(), std::numeric_limits<T>::quiet_NaN());
    c.upload();
  }
  const auto av = ta ? a.gpu(Shape<2>{K, M}).t() : a.gpu(Shape<2>{M, K});
  const auto bv = tb ? b.gpu(Shape<2>{N, K}).t() : b.gpu(Shape<2>{K, N});
  const auto cv = tc ? c.gpu(Shape<2>{N, M}).t() : c.gpu(Shape<2>{M, N});
  const auto ah = ta ? a.cpu(Shape<2>{K, M}).t() : a.cpu(Shape<2>{M, K});
  const auto bh = tb ? b.cpu(Shape<2>{N, K}).t() : b.cpu(Shape<2>{K, N});
  const auto ch = tc ? c.cpu(Shape<2>{N, M}).t() : c.cpu(Shape<2>{M, N});
  lrt::gemm(cv, av, bv, alpha, beta);
  lrt::gemm(ch, ah, bh, alpha, beta);
  check_buffer(c, std::is_same_v<T, float> ? 1e-5 : 1e-13, "gemm C");
}

TEST_CASE_TEMPLATE("cuda emu: gemm through cuBLAS", T, float, double) {
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const bool tc : {false, true}) check_gemm<T>(5, 7, 3, ta, tb, tc, T(1), T(0));
  check_gemm<T>(9, 4, 11, false, true, false, T(0.5), T(2));
  check_gemm<T>(4, 6, 0, false, false, false, T(1), T(0.5));  // K = 0: C = beta C by a kernel
  check_gemm<T>(4, 6, 0, false, false, false, T(1), T(0));    // K = 0, beta = 0: zeros
  // Batched, with a non-BLAS output layout (a temporary and the strided executor).
  std::mt19937_64 rng(5);
  Buf<T> a(random_vector<T>(rng, 3 * 4 * 5)), b(random_vector<T>(rng, 3 * 5 * 2)), c(3 * 4 * 2 + 8, T(7));
  const auto cg = c.gpu(Shape<3>{3, 4, 2}, Strides<3>{1, 6, 3});  // batch innermost
  const auto ch = c.cpu(Shape<3>{3, 4, 2}, Strides<3>{1, 6, 3});
  lrt::gemm_batched(cg, a.gpu(Shape<3>{3, 4, 5}), b.gpu(Shape<3>{3, 5, 2}));
  lrt::gemm_batched(ch, a.cpu(Shape<3>{3, 4, 5}), b.cpu(Shape<3>{3, 5, 2}));
  check_buffer(c, std::is_same_v<T, float> ? 1e-5 : 1e-13, "gemm_batched C");
}

TEST_CASE("cuda emu: elementwise kernels and device copies") {
  using lrt::Tensor;
  const Tensor<double, 2, C> h(lrt::uniform<double>(Shape<2>{37, 300}, 3, 0, -1.0, 1.0));
  Tensor<double, 2, G> d = lrt::to<G>(h);
  Tensor<double, 2, G> e(Shape<2>{300, 37});
  e = d.t();  // strided kernel
  Tensor<double, 2, G> f(Shape<2>{37, 300});
  f = d * 2.0 + 1.0;  // linear kernel, 11100 elements: more than one grid-stride sweep
  const Tensor<double, 2, C> eh = lrt::to<C>(e), fh = lrt::to<C>(f);
  bool ok = true;
  for (index_t i = 0; i < 37; ++i)
    for (index_t j = 0; j < 300; ++j) ok = ok && eh(j, i) == h(i, j) && fh(i, j) == h(i, j) * 2.0 + 1.0;
  CHECK(ok);
}

// ---------------------------------------------------------------------------------------------
// The launch helper and the emulator itself

template <class T>
__global__ void __launch_bounds__(256) probe_kernel(T* out, index_t per_block) {
  const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int lane = static_cast<int>(t & 31);
  __shared__ T sh[256];
  sh[t] = T(1000 * b + t);
  __syncthreads();
  const T next = sh[(t + 1) % nt];  // another thread's value: needs the barrier
  __syncthreads();
  T* o = out + b * per_block + t * 6;
  o[0] = next;
  o[1] = __shfl_xor_sync(0xffffffffu, T(lane), 5);
  o[2] = __shfl_down_sync(0xffffffffu, T(lane), 3u);
  o[3] = __shfl_up_sync(0xffffffffu, T(lane), 2u, 16);
  o[4] = __shfl_sync(0xffffffffu, T(lane), 7, 8);
  __syncwarp();
  o[5] = __shfl_xor_sync(0xffffffffu, T(lane), 16, 8);  // lanes < 16: a later group, own value
}

TEST_CASE("cuda emu: indices, barriers and shuffles follow CUDA") {
  const dim3 grid(3, 2, 1), block(32, 2, 2);
  const unsigned nt = 128, nb = 6;
  const index_t per_block = index_t{nt} * 6;
  Buf<double> out(static_cast<std::size_t>(per_block * nb), -1.0);
  lrt::cuda::detail::launch(probe_kernel<double>, grid, block, 0, "probe kernel launch", out.dev(), per_block);
  const std::vector<double> r = out.download();
  bool ok = true;
  for (unsigned b = 0; b < nb; ++b)
    for (unsigned t = 0; t < nt; ++t) {
      const double* o = r.data() + b * per_block + t * 6;
      const int lane = static_cast<int>(t & 31);
      const double want[6] = {
          double(1000 * b + (t + 1) % nt),          double(lane ^ 5),         double(lane + 3 < 32 ? lane + 3 : lane),
          double(lane % 16 >= 2 ? lane - 2 : lane), double(lane / 8 * 8 + 7), double(lane < 16 ? lane : lane - 16)};
      for (int k = 0; k < 6; ++k) {
        if (o[k] == want[k]) continue;
        if (ok) MESSAGE("block " << b << " thread " << t << " value " << k << ": " << o[k] << ", want " << want[k]);
        ok = false;
      }
    }
  CHECK(ok);
}

TEST_CASE("cuda emu: the launch check reports a bad configuration with the site's text") {
  Buf<double> out(8, 0.0);
  const std::uint64_t before = lrt_cuda_emu::stats.launches;
  CHECK_THROWS_WITH_AS(lrt::cuda::detail::launch(probe_kernel<double>, dim3(1), dim3(2048), 0, "probe kernel launch",
                                                 out.dev(), index_t{0}),
                       "[cuda] probe kernel launch failed: invalid configuration argument", lrt::Error);
  CHECK(lrt_cuda_emu::stats.launches == before);
  CHECK(cudaGetLastError() == cudaSuccess);  // the check cleared it
}

TEST_CASE("cuda emu: the caching allocator's out-of-memory retry and message") {
  lrt::cuda::empty_cache();
  const std::size_t base = lrt_cuda_emu::device_bytes();
  lrt_cuda_emu::memory_limit = base + (std::size_t{3} << 20);
  {
    // Two 1 MiB blocks cached, then a 2 MiB request that only fits once the cache is emptied.
    { lrt::Tensor<float, 1, G> a(Shape<1>{1 << 18}), b(Shape<1>{(1 << 18) + 1}); }
    CHECK(lrt::cuda::allocator_stats().cached_bytes > 0);
    lrt::Tensor<float, 1, G> c(Shape<1>{1 << 19});
    CHECK(lrt::cuda::allocator_stats().cached_bytes == 0);
    std::string msg;
    try {
      lrt::Tensor<float, 1, G> d(Shape<1>{1 << 20});
    } catch (const lrt::Error& e) {
      msg = e.what();
    }
    CHECK(msg.find("[cuda] cudaMalloc(4194304 bytes) failed: out of memory") == 0);
  }
  lrt_cuda_emu::memory_limit = 0;
  lrt::cuda::empty_cache();
}

TEST_CASE("cuda emu: copies are checked for direction") {
  Buf<float> d(4, 1.f);
  std::vector<float> h(8, 2.f);
  CHECK(cudaMemcpyAsync(d.dev(), h.data(), 16, cudaMemcpyDeviceToHost, nullptr) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyAsync(h.data(), d.dev(), 16, cudaMemcpyHostToDevice, nullptr) == cudaErrorInvalidValue);
  CHECK(cudaMemcpyAsync(d.dev(), h.data(), 20, cudaMemcpyHostToDevice, nullptr) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
  CHECK_THROWS_WITH_AS(lrt::DeviceTraits<G>::copy_to_host(h.data(), h.data(), 16),
                       "[cuda] cudaMemcpyAsync(16 bytes, device to host) failed: invalid argument", lrt::Error);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// ---------------------------------------------------------------------------------------------
// Optimizers: beyond tests/cuda/optim_cases.hpp (included above), AdamW's kernel must give the
// CPU's bits exactly (it spells out the CPU loop with round-to-nearest intrinsics, and this
// build contracts no multiply-adds).

TEST_CASE("cuda emu: AdamW on the device is bit-identical to the CPU") {
  using lrt_cuda_optim_test::Twin;
  using lrt_cuda_optim_test::values;
  namespace optim = lrt::optim;
  Twin<1> vec("vec", Shape<1>{10000}, 41);
  Twin<2> mat("mat", Shape<2>{12, 30}, 42);
  optim::AdamW oc, og;
  oc.add_group({"v", 0.05f, 0.8f, 0.95f, 1e-10f, 0.f, {optim::ParamRef::of(vec.cpu)}});
  og.add_group({"v", 0.05f, 0.8f, 0.95f, 1e-10f, 0.f, {optim::ParamRef::of(vec.gpu)}});
  oc.add_group({"m", 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f, {optim::ParamRef::of(mat.cpu)}});
  og.add_group({"m", 0.01f, 0.9f, 0.99f, 1e-8f, 0.1f, {optim::ParamRef::of(mat.gpu)}});
  for (std::int64_t it = 0; it < 4; ++it) {
    CAPTURE(it);
    vec.set_grad();
    mat.set_grad();
    oc.step(optim::lr_multiplier(it, 4));
    og.step(optim::lr_multiplier(it, 4));
    CHECK(lrt_cuda_optim_test::same_bits(values(vec.gpu.value()), values(vec.cpu.value())));
    CHECK(lrt_cuda_optim_test::same_bits(values(mat.gpu.value()), values(mat.cpu.value())));
  }
}

}  // namespace emu_test

// The CUDA test program's two files, unchanged, in this same unit (as tests/cuda/cuda_tests.cu
// has them for nvcc): tests/cuda/test_cuda.cu (the tensor layer: every conformance body, stream,
// cuBLAS handle, error messages, caching allocator) and tests/cuda/test_cuda_model.cu (fused ops,
// autodiff, whole models, schedules, decoder, optimizers, trainer), so the whole CUDA path runs
// in CI without a GPU. One unit compiles the emulated kernels, the CPU references and the headers
// once for the three (they were three programs). CTest runs each file's cases apart with
// doctest's --source-file, as bench/gpu_check.sh does on a GPU.
#include "../cuda/test_cuda.cu"
#include "../cuda/test_cuda_model.cu"

// The emulator reports one device, so there is no "no GPU found" skip: every case runs.
int main(int argc, char** argv) {
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
