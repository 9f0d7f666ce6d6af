// tests/cuda/test_cuda.cu: the CUDA backend's tests, compiled with test_cuda_model.cu in one unit
// (tests/cuda/cuda_tests.cu with nvcc; tests/emu/test_cuda_emu.cpp on the CPU emulator), which
// brings main(); its cases are those of `lrt_cuda_tests --source-file=*/cuda/test_cuda.cu`.
// Every conformance body (tests/unit/backend/conformance.hpp, which the CPU backend's tests run
// too) runs on lrt::cuda::Device against plain host loops, plus the CUDA-only checks below
// (stream, cuBLAS handle, error messages, caching allocator).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <lrt/cuda.hpp>

#include "../unit/backend/conformance.hpp"

namespace cuda_tensor_test {  // named: tests/emu/test_cuda_emu.cpp compiles this file in its unit

using G = lrt::cuda::Device;
using lrt::Shape;

LRT_CONFORMANCE_TEST_CASES(G, "cuda")

// ---------------------------------------------------------------------------------------------
// CUDA-only checks
// ---------------------------------------------------------------------------------------------

TEST_CASE("cuda: device memory, stream and cuBLAS handle") {
  CHECK(lrt::cuda::device_count() >= 1);
  unsigned flags = 0;
  LRT_CUDA_CHECK(cudaStreamGetFlags(lrt::cuda::stream(), &flags));
  CHECK(flags == unsigned{cudaStreamNonBlocking});
  CHECK(lrt::cuda::stream() == lrt::cuda::stream());
  cudaStream_t on = nullptr;
  LRT_CUBLAS_CHECK(cublasGetStream(lrt::cuda::cublas_handle(), &on));
  CHECK(on == lrt::cuda::stream());

  lrt::Tensor<float, 2, G> t(Shape<2>{3, 4});
  cudaPointerAttributes attr{};
  LRT_CUDA_CHECK(cudaPointerGetAttributes(&attr, t.data()));
  CHECK(attr.type == cudaMemoryTypeDevice);
  lrt::cuda::synchronize();
}

namespace {
/// Runs f; checks that it throws lrt::Error with op `op` whose message starts with `prefix` and
/// contains `part`.
template <class F>
void check_message(F&& f, const char* op, const std::string& prefix, const std::string& part) {
  try {
    f();
  } catch (const lrt::Error& e) {
    const std::string w = e.what();
    INFO("message: " << w);
    CHECK(e.op() == op);
    CHECK(w.rfind(prefix, 0) == 0);
    CHECK(w.find(part) != std::string::npos);
    return;
  }
  FAIL((std::string("expected lrt::Error starting with ") + prefix));
}
}  // namespace

TEST_CASE("cuda: failures throw lrt::Error naming the call") {
  check_message([] { LRT_CUDA_CHECK(cudaSetDevice(1 << 20)); }, "cuda",
                "[cuda] cudaSetDevice(1 << 20) failed: ", "invalid device ordinal");

  lrt::Tensor<float, 1, G> buf(Shape<1>{4});
  check_message(
      [&] {
        const float one = 1.f, zero = 0.f;
        LRT_CUBLAS_CHECK(cublasSgemm(lrt::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1, &one, buf.data(),
                                     1, buf.data(), 1, &zero, buf.data(), 1));
      },
      "cublas", "[cublas] cublasSgemm(", " failed: ");

  // 2^44 floats (64 TiB): the allocator reports the rounded request and the CUDA error.
  check_message([] { lrt::Tensor<float, 1, G> huge(Shape<1>{lrt::index_t{1} << 44}); }, "cuda",
                "[cuda] cudaMalloc(70368744177664 bytes) failed: ", "out of memory");

  // The failures left no error behind: ordinary work still runs.
  lrt::Tensor<float, 1, G> ok(Shape<1>{10});
  ok.fill(1.f);
  CHECK(lrt::sum(ok) == 10.f);
  lrt::cuda::synchronize();
}

TEST_CASE("cuda: caching allocator") {
  using A = lrt::cuda::detail::CachingAllocator;
  CHECK(A::round_size(1) == 512);
  CHECK(A::round_size(512) == 512);
  CHECK(A::round_size(513) == 1024);
  CHECK(A::round_size(std::size_t{1} << 20) == std::size_t{1} << 20);
  constexpr std::size_t MiB = std::size_t{1} << 20;
  CHECK(A::round_size(MiB + 1) == MiB + MiB / 4);  // 4 classes per power of two
  CHECK(A::round_size(3 * MiB + 1) == 3 * MiB + MiB / 2);

  lrt::cuda::empty_cache();
  const auto s0 = lrt::cuda::allocator_stats();
  CHECK(s0.cached_bytes == 0);
  { lrt::Tensor<float, 1, G> t(Shape<1>{1000}); }  // 4000 bytes: class 4096
  const auto s1 = lrt::cuda::allocator_stats();
  CHECK(s1.device_mallocs == s0.device_mallocs + 1);
  CHECK(s1.in_use_bytes == s0.in_use_bytes);
  CHECK(s1.cached_bytes == 4096);
  { lrt::Tensor<float, 1, G> t(Shape<1>{1001}); }  // same class: served from the cache
  const auto s2 = lrt::cuda::allocator_stats();
  CHECK(s2.device_mallocs == s1.device_mallocs);
  CHECK(s2.cache_hits == s1.cache_hits + 1);
  CHECK(s2.peak_reserved >= s0.in_use_bytes + 4096);
  lrt::cuda::empty_cache();
  const auto s3 = lrt::cuda::allocator_stats();
  CHECK(s3.cached_bytes == 0);
  CHECK(s3.device_frees == s2.device_frees + 1);
}

namespace {
using namespace lrt_conformance;

/// x with its float encoding rounded to nearest even at `keep` bits (bf16: 16, tf32: 19).
float round_bits(float x, int keep) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  const int drop = 32 - keep;
  u = (u + ((std::uint32_t{1} << (drop - 1)) - 1) + ((u >> drop) & 1u)) & ~((std::uint32_t{1} << drop) - 1);
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

/// Batched (nb, M, K) x (nb, K, N) under precision p against a double reference: the error of
/// each element is within rel * sum_k |a b| (rel = the input rounding's bound, with room for
/// truncation), and (emulator only) equal to a float loop over rounded inputs.
void check_gemm_precision(lrt::cuda::MatmulPrecision p, index_t nb, index_t M, index_t N, index_t K) {
  const auto va = random_vec<float>(static_cast<std::size_t>(nb * M * K), 91);
  const auto vb = random_vec<float>(static_cast<std::size_t>(nb * K * N), 92);
  std::vector<float> got;
  {
    const lrt::cuda::MatmulPrecisionScope scope(p);
    CHECK(lrt::cuda::matmul_precision() == p);
    if (nb == 1)
      got = download(lrt::matmul(upload<G>(Shape<2>{M, K}, va), upload<G>(Shape<2>{K, N}, vb)));
    else
      got = download(lrt::matmul(upload<G>(Shape<3>{nb, M, K}, va), upload<G>(Shape<3>{nb, K, N}, vb)));
  }
  CHECK(lrt::cuda::matmul_precision() == lrt::cuda::MatmulPrecision::fp32);  // restored
  const bool bf16 = p == lrt::cuda::MatmulPrecision::bf16;
  const double rel = bf16 ? 0x1p-6 : 0x1p-9;  // 2 x the truncation bound of one input, + fp32 sums
  const int keep = bf16 ? 16 : 19;
  std::size_t bad = 0, inexact = 0, differs_from_fp32 = 0;
  for (index_t b = 0; b < nb; ++b)
    for (index_t i = 0; i < M; ++i)
      for (index_t j = 0; j < N; ++j) {
        double exact = 0, mag = 0;
        float rounded = 0;
        for (index_t k = 0; k < K; ++k) {
          const float x = va[static_cast<std::size_t>((b * M + i) * K + k)];
          const float y = vb[static_cast<std::size_t>((b * K + k) * N + j)];
          exact += double(x) * double(y);
          mag += std::abs(double(x) * double(y));
          rounded += round_bits(x, keep) * round_bits(y, keep);
        }
        const float g = got[static_cast<std::size_t>((b * M + i) * N + j)];
        bad += !(std::abs(double(g) - exact) <= rel * mag + 1e-6);
        inexact += g != rounded;
        differs_from_fp32 += std::abs(double(g) - exact) > 1e-5 * mag + 1e-7;
      }
  INFO(lrt::cuda::to_string(p) << " (" << nb << ", " << M << ", " << N << ", " << K << ")");
  CHECK(bad == 0);
#if defined(LRT_CUDA_EMULATOR)
  CHECK(inexact == 0);  // the emulator rounds to nearest even, as the reference loop does
  CHECK(differs_from_fp32 > 0);
#else
  MESSAGE(lrt::cuda::to_string(p) << ": " << differs_from_fp32 << " of " << got.size()
                                  << " elements differ from fp32 beyond 1e-5 (cuBLAS may or may not down-convert)");
#endif
}
}  // namespace

TEST_CASE("cuda: float GEMMs in tf32 and bf16 (fp32 in and out), scoped and restored") {
  using P = lrt::cuda::MatmulPrecision;
  CHECK(lrt::cuda::matmul_precision() == P::fp32);
  CHECK(lrt::cuda::parse_matmul_precision("bf16") == P::bf16);
  CHECK(lrt::cuda::parse_matmul_precision("tf32") == P::tf32);
  CHECK(std::string(lrt::cuda::to_string(P::fp32)) == "fp32");
  check_message([] { (void)lrt::cuda::parse_matmul_precision("fp16"); }, "cuda",
                "[cuda] unknown matmul precision 'fp16'", "fp32, tf32 or bf16");
  for (P p : {P::bf16, P::tf32}) {
    check_gemm_precision(p, 1, 37, 53, 29);
    check_gemm_precision(p, 3, 16, 24, 40);  // strided-batched
  }
  {  // double GEMMs ignore the setting
    const lrt::cuda::MatmulPrecisionScope scope(P::bf16);
    const auto va = random_vec<double>(6 * 5, 3), vb = random_vec<double>(5 * 4, 4);
    const auto got = download(lrt::matmul(upload<G>(Shape<2>{6, 5}, va), upload<G>(Shape<2>{5, 4}, vb)));
    const auto want = ref_matmul(
        6, 4, 5, [&](index_t i, index_t k) { return va[i * 5 + k]; },
        [&](index_t k, index_t j) { return vb[k * 4 + j]; });
    check_close(got, want, 1e-12, "double under bf16");
  }
}

TEST_CASE("cuda: StepGraph records lrt's work once and replays it on new inputs") {
  lrt::Tensor<float, 1, G> in(Shape<1>{64}), out(Shape<1>{64});
  auto fill_in = [&](float base) {
    std::vector<float> h(64);
    for (int i = 0; i < 64; ++i) h[static_cast<std::size_t>(i)] = base + static_cast<float>(i);
    lrt::DeviceTraits<G>::copy_from_host(in.data(), h.data(), h.size() * sizeof(float));
  };
  lrt::cuda::StepGraph g;
  CHECK_FALSE(g.ready());
  fill_in(1.f);
  const auto before = lrt::cuda::allocator_stats();
  g.capture([&] {
    const lrt::Tensor<float, 1, G> tmp = lrt::exp(in * 0.f) + in;  // a temporary, freed inside
    out = tmp * 2.f;                                               // written in place
  });
  CHECK(g.ready());
  CHECK(lrt::cuda::allocator_stats().graph_bytes > before.graph_bytes);  // the temporary's block is the graph's
  for (float base : {1.f, 10.f, -3.f}) {
    fill_in(base);
    g.launch();
    const auto h = download(out);
    for (int i = 0; i < 64; ++i) CHECK(h[static_cast<std::size_t>(i)] == 2.f * (1.f + base + static_cast<float>(i)));
  }
  g.reset();
  CHECK(lrt::cuda::allocator_stats().graph_bytes == before.graph_bytes);
  // A capture that waits for the device fails with an lrt::Error and leaves the stream usable.
  lrt::cuda::StepGraph bad;
  CHECK_THROWS_AS(bad.capture([&] { (void)lrt::sum(in); }), lrt::Error);  // sum copies back: a wait
  CHECK_FALSE(bad.ready());
  lrt::cuda::StepGraph leak;
  lrt::Tensor<float, 1, G> kept;
  check_message([&] { leak.capture([&] { kept = in * 1.f; }); }, "cuda graph", "[cuda graph] 1 block(s)",
                "must free what it allocates");
  CHECK(lrt::sum(in) == doctest::Approx(64 * -3.0 + 2016.0));  // ordinary work still runs
  CHECK_THROWS_AS(leak.launch(), lrt::Error);
}

namespace {
const lrt::cuda::ProfileRow* find_row(const std::vector<lrt::cuda::ProfileRow>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.name == name) return &r;
  return nullptr;
}
}  // namespace

TEST_CASE("cuda: Profiler times kernels, GEMMs and copies per name, and leaves graph captures alone") {
  using lrt::cuda::Profiler;
  const auto va = random_vec<float>(64 * 16, 5), vb = random_vec<float>(16 * 32, 6);
  const auto a = upload<G>(Shape<2>{64, 16}, va), b = upload<G>(Shape<2>{16, 32}, vb);
  lrt::Tensor<float, 2, G> d(Shape<2>{64, 32});
  lrt::cuda::synchronize();
  {
    const lrt::cuda::MatmulPrecisionScope fp32(lrt::cuda::MatmulPrecision::fp32);
    Profiler prof;
    const auto c1 = lrt::matmul(a, b);
    const auto c2 = lrt::matmul(a, b);
    d = c1 * 2.f + c2;                        // one elementwise kernel
    lrt::DeviceTraits<G>::zero(d.data(), 0);  // zero bytes: no work, no row
    lrt::DeviceTraits<G>::copy_within(d.data(), c1.data(), 64 * 32 * sizeof(float));
    const auto rows = prof.stop();
    std::string listing;
    for (const auto& r : rows) listing += r.name + ": " + std::to_string(r.calls) + " calls; ";
    INFO("rows: " << listing);
    const auto* g = find_row(rows, "gemm fp32 64x32x16");
    REQUIRE(g != nullptr);
    CHECK(g->calls == 2);
    CHECK(g->flops == 2.0 * 2 * 64 * 32 * 16);
    const auto* cp = find_row(rows, "copy device to device");
    REQUIRE(cp != nullptr);
    CHECK(cp->calls == 1);
    CHECK(cp->flops == 0);
    CHECK(find_row(rows, "memset") == nullptr);
    std::int64_t calls = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i].ms >= 0);
      if (i > 0) CHECK(rows[i - 1].ms >= rows[i].ms);  // slowest first
      calls += rows[i].calls;
    }
    CHECK(calls >= 4);  // 2 GEMMs, the elementwise kernel(s), the copy
    CHECK(prof.span_ms() >= 0);
    CHECK_THROWS_AS((void)prof.stop(), lrt::Error);
  }
  {  // one at a time; after stop (or destruction) a new one may start, and it sees only its own work
    auto p1 = std::make_unique<Profiler>();
    CHECK_THROWS_AS(Profiler(), lrt::Error);
    p1.reset();
    Profiler p2;
    const auto rows = p2.stop();
    CHECK(rows.empty());
    CHECK(p2.span_ms() == 0);
  }
  {  // work recorded into a graph is not profiled; the capture and the replay still work
    lrt::cuda::StepGraph graph;
    Profiler prof;
    graph.capture([&] { d = d * 0.f + 1.f; });
    const auto rows = prof.stop();
    CHECK(rows.empty());
    graph.launch();
    CHECK(lrt::sum(d) == 64.f * 32.f);
  }
}

// ---------------------------------------------------------------------------------------------
// Device primitives (primitives.cuh) against host std::stable_sort / std::partial_sum
// ---------------------------------------------------------------------------------------------

namespace {
/// n elements of device memory from lrt's allocator, filled from / read back to the host.
template <class T>
struct DevBuf {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DevBuf(std::size_t count) : n(count) {
    p = static_cast<T*>(lrt::DeviceTraits<G>::allocate(std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  explicit DevBuf(const std::vector<T>& h) : DevBuf(h.size()) {
    lrt::DeviceTraits<G>::copy_from_host(p, h.data(), n * sizeof(T));
  }
  ~DevBuf() { lrt::DeviceTraits<G>::deallocate(p, n * sizeof(T)); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  std::vector<T> get() const {
    std::vector<T> h(n);
    lrt::DeviceTraits<G>::copy_to_host(h.data(), p, n * sizeof(T));
    return h;
  }
};

template <class K>
void check_sort_pairs(std::size_t n, K key_range, std::uint32_t seed) {
  CAPTURE(n);
  CAPTURE(key_range);
  std::mt19937 rng(seed);
  std::vector<K> keys(n);
  std::vector<lrt::index_t> vals(n);
  for (std::size_t i = 0; i < n; ++i) {
    keys[i] = static_cast<K>(((std::uint64_t{rng()} << 32) | rng()) % static_cast<std::uint64_t>(key_range));
    vals[i] = static_cast<lrt::index_t>(rng() % 1000000);
  }
  // The expected order: a host stable sort of the positions by key.
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  std::vector<K> want_k(n);
  std::vector<lrt::index_t> want_v(n);
  for (std::size_t i = 0; i < n; ++i) want_k[i] = keys[order[i]], want_v[i] = vals[order[i]];
  DevBuf<K> ki(keys), ko(n);
  DevBuf<lrt::index_t> vi(vals), vo(n);
  const int bits = std::max(1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(key_range - 1))));
  lrt::cuda::sort_pairs(ki.p, ko.p, vi.p, vo.p, static_cast<lrt::index_t>(n), bits);
  CHECK(ko.get() == want_k);
  CHECK(vo.get() == want_v);
  CHECK(ki.get() == keys);  // the inputs are left alone
}

/// The host's answer for top_k_rows: per row a stable sort of the columns by value, descending.
template <class T>
void check_top_k(lrt::index_t rows, lrt::index_t cols, lrt::index_t stride, lrt::index_t k, std::uint32_t seed) {
  CAPTURE(rows);
  CAPTURE(cols);
  CAPTURE(k);
  std::mt19937 rng(seed);
  const T pool[] = {T(-1.5), T(-0.0), T(0), T(0.25), T(2), T(-1e30), T(7.125), T(0.25) + T(1e-3)};
  const std::size_t extent = rows == 0 ? 0 : static_cast<std::size_t>((rows - 1) * stride + cols);
  std::vector<T> x(extent, T(1e9));  // padding between rows: larger than any value, never used
  for (lrt::index_t r = 0; r < rows; ++r)
    for (lrt::index_t j = 0; j < cols; ++j)
      x[static_cast<std::size_t>(r * stride + j)] = rng() % 3 == 0 ? pool[rng() % 8] : T(rng() % 1000) / T(64) - T(7);
  std::vector<T> want_v;
  std::vector<lrt::index_t> want_i;
  for (lrt::index_t r = 0; r < rows; ++r) {
    std::vector<lrt::index_t> o(static_cast<std::size_t>(cols));
    std::iota(o.begin(), o.end(), lrt::index_t{0});
    const T* xr = x.data() + r * stride;
    std::stable_sort(o.begin(), o.end(), [&](lrt::index_t a, lrt::index_t b) { return xr[a] > xr[b]; });
    for (lrt::index_t j = 0; j < k; ++j) {
      want_i.push_back(o[static_cast<std::size_t>(j)]);
      want_v.push_back(xr[o[static_cast<std::size_t>(j)]]);
    }
  }
  DevBuf<T> dx(x), dv(static_cast<std::size_t>(rows * k));
  DevBuf<lrt::index_t> di(static_cast<std::size_t>(rows * k));
  lrt::cuda::top_k_rows(dx.p, rows, cols, stride, k, dv.p, di.p);
  CHECK(di.get() == want_i);
  CHECK(dv.get() == want_v);  // -0 == +0
}
}  // namespace

TEST_CASE("cuda primitives: sort_pairs is a stable ascending sort by key (many ties), n = 0 and 1") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{1000}, std::size_t{4099}}) {
    check_sort_pairs<lrt::index_t>(n, 37, 1);
    check_sort_pairs<std::uint32_t>(n, 5, 2);
    check_sort_pairs<std::uint32_t>(n, 70000, 3);
  }
  check_sort_pairs<lrt::index_t>(500, lrt::index_t{1} << 40, 4);  // 40-bit keys
  check_sort_pairs<std::uint32_t>(300, 1, 5);                     // all keys equal: order unchanged
  DevBuf<lrt::index_t> k(4), v(4);
  CHECK_THROWS_WITH_AS(lrt::cuda::sort_pairs(k.p, k.p, v.p, v.p, 4, 65),
                       "[sort_pairs] key_bits must be in [1, 64], got 65", lrt::Error);
}

TEST_CASE("cuda primitives: inclusive_scan equals std::partial_sum (also in place)") {
  std::mt19937 rng(7);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{777}, std::size_t{5000}}) {
    CAPTURE(n);
    std::vector<lrt::index_t> x(n);
    for (auto& v : x) v = static_cast<lrt::index_t>(rng() % 200) - 50;
    std::vector<lrt::index_t> want(n);
    std::partial_sum(x.begin(), x.end(), want.begin());
    DevBuf<lrt::index_t> in(x), out(n);
    lrt::cuda::inclusive_scan(in.p, out.p, static_cast<lrt::index_t>(n));
    CHECK(out.get() == want);
    lrt::cuda::inclusive_scan(in.p, in.p, static_cast<lrt::index_t>(n));
    CHECK(in.get() == want);
  }
}

TEST_CASE("cuda primitives: top_k_rows gives each row's k largest, descending, ties to the lower column") {
  for (lrt::index_t k : {lrt::index_t{1}, lrt::index_t{5}, lrt::index_t{37}}) {
    check_top_k<float>(5, 37, 40, k, 11);
    check_top_k<double>(3, 37, 37, k, 12);
  }
  check_top_k<float>(1, 1, 1, 1, 13);
  check_top_k<float>(2, 300, 301, 17, 14);
  check_top_k<float>(0, 5, 5, 2, 15);
  DevBuf<float> x(8), v(8);
  DevBuf<lrt::index_t> i(8);
  CHECK_THROWS_WITH_AS(lrt::cuda::top_k_rows(x.p, 2, 4, 4, 5, v.p, i.p),
                       "[top_k_rows] k = 5 of 2 rows of 4 columns: needs 0 <= k <= cols", lrt::Error);
}

}  // namespace cuda_tensor_test
