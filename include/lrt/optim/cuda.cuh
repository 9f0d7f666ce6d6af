// lrt/optim/cuda.cuh: AdamW and Muon for parameters on lrt::cuda::Device.
//
// With this header, optim::ParamRef::of(ad::Param<float, R, cuda::Device>&) gives a handle whose
// `device` is the CUDA table below: AdamW and Muon then keep that parameter's state in device
// memory and update it with the kernels here, all queued on lrt's stream (no host sync in a step;
// save() and load() copy the state through the host).
//
// - AdamW: one grid-stride kernel per parameter. Every float operation is the CPU loop's, written
//   with the round-to-nearest intrinsics (__fadd_rn, __fmul_rn, __fdiv_rn, __fsqrt_rn), so that
//   nvcc cannot contract a mul and an add into an FMA nor -use_fast_math change a division: a
//   step gives the CPU's bits (given the same inputs and a host build without FMA contraction).
// - Muon: Nesterov momentum fused with the first pass of ||U||_F^2 (fp64 block partials, a
//   fixed number of blocks that depends only on the size), a one-block pass that combines them
//   in a fixed tree into the normaliser 1.02 ||U||_F + 1e-6, the division, five Polar Express
//   iterations in fp32 through lrt::gemm (cuBLAS, at the process's float GEMM precision: see
//   backend/cuda/gemm.cuh) with the CPU's
//   coefficients and transposition rule, per-row / per-column fp64 sums of squares (one thread
//   per output, in the CPU's order), a one-block kernel for the second moment and the rescaling
//   (fixed tree), and the cautious-weight-decay update. No atomics: every step is deterministic
//   on a given GPU. Differences from the CPU come from the GEMMs (cuBLAS's summation order and
//   FMAs) and from the order of the two fp64 norms.
// - cuda::polar_express(u, rows, cols, out, steps): the orthogonalisation alone on device
//   pointers, like optim::polar_express on the host.
// nvcc only; no fmt, no Eigen.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "param_ref.hpp"
#include "polar_express_coeffs.hpp"
#include "../tensor/linalg.hpp"
#include "../backend/cuda/check.cuh"
#include "../backend/cuda/device.cuh"
#include "../backend/cuda/executor.cuh"
#include "../backend/cuda/gemm.cuh"
#include "../backend/cuda/launch.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

// The kernels are templates, instantiated for float only, so that this header can be included by
// several translation units of one program (as the backend's other kernels are).

/// Threads per block of the optimizer reductions (a power of two: the fixed trees halve it).
inline constexpr int optim_threads = 256;
/// Most blocks (fp64 partial sums) of the first pass of a Frobenius norm.
inline constexpr index_t optim_max_partials = 256;
/// Least elements per thread before that pass uses another block.
inline constexpr index_t optim_min_per_thread = 8;

/// Blocks of the first pass of a sum of squares over n elements: a function of n only (never of
/// the GPU), so that the sum's order is the same on every GPU.
inline index_t sumsq_blocks(index_t n) {
  const index_t per_block = index_t{optim_threads} * optim_min_per_thread;
  return std::clamp<index_t>((n + per_block - 1) / per_block, 1, optim_max_partials);
}

/// The sum of the block's values (blockDim.x == optim_threads) in a fixed tree, returned to every
/// thread. sh holds optim_threads doubles. Every thread must call it; ends with a barrier.
__device__ inline double optim_block_sum(double v, double* sh) {
  const int t = threadIdx.x;
  sh[t] = v;
  __syncthreads();
  for (int w = optim_threads / 2; w > 0; w >>= 1) {
    if (t < w) sh[t] = __dadd_rn(sh[t], sh[t + w]);
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();  // sh may be reused right after
  return r;
}

/// AdamW on one parameter: the CPU loop of optim::AdamW::step, operation for operation.
template <class T>
__global__ void __launch_bounds__(assign_threads) adamw_kernel(optim::AdamWDeviceArgs a) {
  static_assert(std::is_same_v<T, float>, "the optimizers' kernels are float only");
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.n; i += step) {
    const float g = a.g[i];
    float wi = a.w[i];
    if (a.wd) wi = __fmul_rn(wi, a.decay);
    const float m0 = a.m[i], v0 = a.v[i];
    const float mi = __fadd_rn(m0, __fmul_rn(a.c1, __fsub_rn(g, m0)));
    const float vi = __fadd_rn(v0, __fmul_rn(a.c2, __fsub_rn(__fmul_rn(g, g), v0)));
    a.m[i] = mi;
    a.v[i] = vi;
    const float den = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, a.bias2)), a.eps);
    a.w[i] = __fsub_rn(wi, __fmul_rn(a.step_size, __fdiv_rn(mi, den)));
  }
}

/// With g: Nesterov momentum, buf[i] += c (g[i] - buf[i]) and x[i] = g[i] + mu (buf[i] - g[i]).
/// Without (g == nullptr): x is only read. Either way block b writes partial[b] = the fp64 sum of
/// x[i]^2 over its elements (i = b*T + t + k*gridDim.x*T). Launch with optim_threads threads.
template <class T>
__global__ void __launch_bounds__(optim_threads)
    nesterov_sumsq_kernel(index_t n, const float* g, float* buf, float* x, float c, float mu, double* partial) {
  __shared__ double sh[optim_threads];
  const index_t step = index_t{blockDim.x} * gridDim.x;
  double acc = 0;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) {
    float xi;
    if (g) {
      const float gi = g[i];
      const float bi = __fadd_rn(buf[i], __fmul_rn(c, __fsub_rn(gi, buf[i])));
      buf[i] = bi;
      xi = __fadd_rn(gi, __fmul_rn(mu, __fsub_rn(bi, gi)));
      x[i] = xi;
    } else {
      xi = x[i];
    }
    acc = __dadd_rn(acc, __dmul_rn(double(xi), double(xi)));
  }
  const double s = optim_block_sum(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

/// One block (optim_threads threads): *denom = float(1.02 sqrt(sum of partial[0..parts)) + 1e-6).
template <class T>
__global__ void __launch_bounds__(optim_threads)
    frobenius_denom_kernel(const double* partial, index_t parts, float* denom) {
  __shared__ double sh[optim_threads];
  double acc = 0;
  for (index_t k = threadIdx.x; k < parts; k += blockDim.x) acc = __dadd_rn(acc, partial[k]);
  const double s = optim_block_sum(acc, sh);
  if (threadIdx.x == 0) *denom = static_cast<float>(__dadd_rn(__dmul_rn(1.02, __dsqrt_rn(s)), 1e-6));
}

/// x[i] /= *denom for i < n.
template <class T>
__global__ void __launch_bounds__(assign_threads) divide_kernel(index_t n, float* x, const float* denom) {
  const float d = *denom;
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t i = index_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step) x[i] = __fdiv_rn(x[i], d);
}

/// sums[k] = fp64 sum of squares of row k of r (rows x cols) if per_row, else of column k, in
/// index order (the CPU's order), one thread per output.
template <class T>
__global__ void __launch_bounds__(optim_threads)
    square_sums_kernel(const float* r, index_t rows, index_t cols, bool per_row, double* sums) {
  const index_t len = per_row ? rows : cols;
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t k = index_t{blockIdx.x} * blockDim.x + threadIdx.x; k < len; k += step) {
    double acc = 0;
    if (per_row) {
      const float* p = r + k * cols;
      for (index_t j = 0; j < cols; ++j) acc = __dadd_rn(acc, __dmul_rn(double(p[j]), double(p[j])));
    } else {
      for (index_t i = 0; i < rows; ++i) {
        const double v = r[i * cols + k];
        acc = __dadd_rn(acc, __dmul_rn(v, v));
      }
    }
    sums[k] = acc;
  }
}

/// One block (optim_threads threads): for k < len, vm = float(sums[k] / red),
/// sm[k] += c2 (vm - sm[k]), st = 1 / sqrt(max(sm[k], 1e-10)); then
/// scale[k] = float(st * ||X||_F / max(||X (.) st||_F, 1e-10)), both norms in fp64 from sums.
template <class T>
__global__ void __launch_bounds__(optim_threads)
    second_moment_kernel(const double* sums, index_t len, index_t red, float* sm, float c2, float* scale) {
  __shared__ double sh[optim_threads];
  double n2 = 0, s2 = 0;
  for (index_t k = threadIdx.x; k < len; k += blockDim.x) {
    const double sk = sums[k];
    const float vm = static_cast<float>(__ddiv_rn(sk, double(red)));
    const float s0 = sm[k];
    const float smk = __fadd_rn(s0, __fmul_rn(c2, __fsub_rn(vm, s0)));
    sm[k] = smk;
    const float clamped = smk < 1e-10f ? 1e-10f : smk;  // std::max(smk, 1e-10f)
    const float stk = __fdiv_rn(1.f, __fsqrt_rn(clamped));
    scale[k] = stk;
    n2 = __dadd_rn(n2, sk);
    s2 = __dadd_rn(s2, __dmul_rn(__dmul_rn(double(stk), double(stk)), sk));
  }
  const double tn = optim_block_sum(n2, sh);
  const double ts = optim_block_sum(s2, sh);
  const double rs = __dsqrt_rn(ts);
  const double ratio = __ddiv_rn(__dsqrt_rn(tn), rs < 1e-10 ? 1e-10 : rs);  // std::max(rs, 1e-10)
  // Each thread rescales the entries it wrote above (same k sequence): no barrier needed.
  for (index_t k = threadIdx.x; k < len; k += blockDim.x)
    scale[k] = static_cast<float>(__dmul_rn(double(scale[k]), ratio));
}

/// w <- w - le X - lwd (w (.) mask), X = r (.) scale (per row if per_row, else per column),
/// mask = X (.) w >= 0: the CPU's update, operation for operation.
template <class T>
__global__ void __launch_bounds__(assign_threads)
    muon_apply_kernel(const float* r, const float* scale, float* w, index_t rows, index_t cols, bool per_row, float le,
                      float lwd) {
  const index_t n = rows * cols, step = index_t{blockDim.x} * gridDim.x;
  for (index_t k = index_t{blockIdx.x} * blockDim.x + threadIdx.x; k < n; k += step) {
    const index_t i = k / cols, j = k - i * cols;
    const float xv = __fmul_rn(r[k], scale[per_row ? i : j]), wv = w[k];
    const float moved = __fsub_rn(wv, __fmul_rn(le, xv));
    w[k] = __fmul_rn(xv, wv) >= 0.f ? __fsub_rn(moved, __fmul_rn(lwd, wv)) : moved;
  }
}

/// Muon's device scratch for a rows x cols matrix, carved from one buffer (each piece aligned
/// to 256 bytes; the fp64 pieces first). With base == nullptr only `bytes` is meaningful.
struct MuonScratch {
  double* sums = nullptr;     // len = max(rows, cols)
  double* partial = nullptr;  // optim_max_partials
  float* denom = nullptr;     // 1
  float* x = nullptr;         // rows * cols
  float* xn = nullptr;        // rows * cols
  float* a = nullptr;         // s * s, s = min(rows, cols)
  float* b = nullptr;         // s * s
  float* scale = nullptr;     // len
  std::size_t bytes = 0;
};

inline MuonScratch muon_scratch(void* base, index_t rows, index_t cols) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const auto s = static_cast<std::size_t>(std::min(rows, cols));
  const auto len = static_cast<std::size_t>(std::max(rows, cols));
  std::size_t off = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t at = off;
    off += (bytes + 255) / 256 * 256;
    return at;
  };
  const std::size_t o_sums = take(len * sizeof(double));
  const std::size_t o_part = take(static_cast<std::size_t>(optim_max_partials) * sizeof(double));
  const std::size_t o_den = take(sizeof(float));
  const std::size_t o_x = take(n * sizeof(float));
  const std::size_t o_xn = take(n * sizeof(float));
  const std::size_t o_a = take(s * s * sizeof(float));
  const std::size_t o_b = take(s * s * sizeof(float));
  const std::size_t o_scale = take(len * sizeof(float));
  MuonScratch m;
  m.bytes = off;
  if (base) {
    char* c = static_cast<char*>(base);
    m.sums = reinterpret_cast<double*>(c + o_sums);
    m.partial = reinterpret_cast<double*>(c + o_part);
    m.denom = reinterpret_cast<float*>(c + o_den);
    m.x = reinterpret_cast<float*>(c + o_x);
    m.xn = reinterpret_cast<float*>(c + o_xn);
    m.a = reinterpret_cast<float*>(c + o_a);
    m.b = reinterpret_cast<float*>(c + o_b);
    m.scale = reinterpret_cast<float*>(c + o_scale);
  }
  return m;
}

/// Copies n floats within the device, queued on lrt's stream (no sync).
inline void copy_floats_async(float* dst, const float* src, index_t n, const char* what) {
  if (n <= 0 || dst == src) return;
  check_cuda(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream()),
             what);
}

/// x (rows x cols, device) <- x / (1.02 ||x||_F + 1e-6), with the partials and denom of sc.
/// With g, x is first set to the Nesterov blend of g and buf (buf updated): see
/// nesterov_sumsq_kernel.
inline void normalise_async(index_t n, const float* g, float* buf, float* x, float c, float mu, const MuonScratch& sc) {
  const index_t parts = sumsq_blocks(n);
  launch(nesterov_sumsq_kernel<float>, static_cast<unsigned>(parts), optim_threads, 0,
         "Muon kernel launch (momentum and norm)", n, g, buf, x, c, mu, sc.partial);
  launch(frobenius_denom_kernel<float>, 1, optim_threads, 0, "Muon kernel launch (norm)", sc.partial, parts, sc.denom);
  launch(divide_kernel<float>, grid_for(n, assign_threads), assign_threads, 0, "Muon kernel launch (normalisation)", n,
         x, sc.denom);
}

/// `steps` Polar Express iterations on X (rows x cols, device, row-major) held in x; xn, a and b
/// are scratch (rows*cols, s*s, s*s floats). The CPU's detail::polar_express_iterations with
/// device views, except that the Gram products are full cuBLAS GEMMs (the CPU computes one
/// triangle and mirrors it); stream-ordered copies. Returns the buffer with the result.
inline float* polar_express_iterations(float* x, float* xn, float* a, float* b, index_t rows, index_t cols, int steps) {
  using V = TensorView<float, 2, cuda::Device>;
  const bool tall = rows > cols;
  const index_t s = tall ? cols : rows, n = rows * cols;
  const V A(a, Shape<2>{s, s}), B(b, Shape<2>{s, s});
  for (int k = 0; k < steps; ++k) {
    const float ca = static_cast<float>(optim::detail::polar_express_coeffs[k][0]);
    const float cb = static_cast<float>(optim::detail::polar_express_coeffs[k][1]);
    const float ce = static_cast<float>(optim::detail::polar_express_coeffs[k][2]);
    const V X(x, Shape<2>{rows, cols}), Xn(xn, Shape<2>{rows, cols});
    if (tall)
      lrt::gemm(A, X.t(), X);  // A = X^T X (cols x cols)
    else
      lrt::gemm(A, X, X.t());  // A = X X^T (rows x rows)
    copy_floats_async(b, a, s * s, "cudaMemcpyAsync (Polar Express, A)");
    lrt::gemm(B, A, A, ce, cb);  // B = b A + e A^2
    copy_floats_async(xn, x, n, "cudaMemcpyAsync (Polar Express, X)");
    if (tall)
      lrt::gemm(Xn, X, B, 1.f, ca);  // X' = a X + X B
    else
      lrt::gemm(Xn, B, X, 1.f, ca);  // X' = a X + B X
    std::swap(x, xn);
  }
  return x;
}

// ---- the DeviceOps table ----------------------------------------------------------------------

inline void* optim_allocate_zeroed(std::size_t bytes) {
  void* p = DeviceTraits<cuda::Device>::allocate(bytes);
  try {
    DeviceTraits<cuda::Device>::zero(p, bytes);
  } catch (...) {
    DeviceTraits<cuda::Device>::deallocate(p, bytes);
    throw;
  }
  return p;
}
inline void optim_deallocate(void* p, std::size_t bytes) noexcept { DeviceTraits<cuda::Device>::deallocate(p, bytes); }
inline void optim_upload(float* dev, const float* host, index_t n) {
  DeviceTraits<cuda::Device>::copy_from_host(dev, host, static_cast<std::size_t>(n) * sizeof(float));
}
inline void optim_download(float* host, const float* dev, index_t n) {
  DeviceTraits<cuda::Device>::copy_to_host(host, dev, static_cast<std::size_t>(n) * sizeof(float));
}
inline void optim_copy(float* dst, const float* src, index_t n) {
  DeviceTraits<cuda::Device>::copy_within(dst, src, static_cast<std::size_t>(n) * sizeof(float));
}

inline void optim_adamw_update(const optim::AdamWDeviceArgs& a) {
  if (a.n <= 0) return;
  launch(adamw_kernel<float>, grid_for(a.n, assign_threads), assign_threads, 0, "AdamW kernel launch", a);
}

inline std::size_t optim_muon_scratch_bytes(index_t rows, index_t cols) {
  return muon_scratch(nullptr, rows, cols).bytes;
}

inline void optim_muon_update(const optim::MuonDeviceArgs& a) {
  const index_t rows = a.rows, cols = a.cols, n = rows * cols;
  optim::detail::check_pe_args(rows, cols, a.ns_steps, "Muon");
  const MuonScratch sc = muon_scratch(a.scratch, rows, cols);
  check(a.scratch != nullptr && a.scratch_bytes >= sc.bytes, "Muon", "device scratch of ", a.scratch_bytes,
        " bytes for a (", rows, ", ", cols, ") matrix that needs ", sc.bytes);
  // Nesterov momentum, Frobenius normalisation, Polar Express.
  normalise_async(n, a.g, a.buf, sc.x, 1.f - a.mu, a.mu, sc);
  const float* r = polar_express_iterations(sc.x, sc.xn, sc.a, sc.b, rows, cols, a.ns_steps);
  // Variance normalisation: per-row statistics if rows >= cols, else per-column.
  const bool per_row = rows >= cols;
  const index_t len = per_row ? rows : cols, red = per_row ? cols : rows;
  launch(square_sums_kernel<float>, grid_for(len, optim_threads), optim_threads, 0,
         "Muon kernel launch (row/column statistics)", r, rows, cols, per_row, sc.sums);
  launch(second_moment_kernel<float>, 1, optim_threads, 0, "Muon kernel launch (second moment)", sc.sums, len, red,
         a.sm, 1.f - a.beta2, sc.scale);
  // Update with cautious weight decay.
  launch(muon_apply_kernel<float>, grid_for(n, assign_threads), assign_threads, 0, "Muon kernel launch (update)", r,
         sc.scale, a.w, rows, cols, per_row, a.lr_eff, a.lr_wd);
}

/// The optimizers' operations on lrt::cuda::Device (one table per program: an inline variable).
inline constexpr optim::DeviceOps optim_ops{
    "cuda",      &optim_allocate_zeroed, &optim_deallocate,         &optim_upload,      &optim_download,
    &optim_copy, &optim_adamw_update,    &optim_muon_scratch_bytes, &optim_muon_update,
};

}  // namespace cuda::detail

namespace cuda {

/// The orthogonalisation alone, on the GPU, in fp32: out = PE(U / (1.02 ||U||_F + 1e-6)) for U
/// (rows x cols, row-major) at u; u and out are device pointers, out may equal u. Queued on lrt's
/// stream (it returns before the result is ready); allocates its scratch from the caching
/// allocator.
inline void polar_express(const float* u, index_t rows, index_t cols, float* out, int steps = 5) {
  optim::detail::check_pe_args(rows, cols, steps, "polar_express");
  const index_t n = rows * cols;
  const std::size_t bytes = detail::muon_scratch(nullptr, rows, cols).bytes;
  // Freed right after the launches: later work on the one stream runs after them.
  const optim::detail::DeviceBuffer mem(&detail::optim_ops, bytes);
  const detail::MuonScratch sc = detail::muon_scratch(mem.get(), rows, cols);
  detail::copy_floats_async(sc.x, u, n, "cudaMemcpyAsync (polar_express input)");
  detail::normalise_async(n, nullptr, nullptr, sc.x, 0.f, 0.f, sc);
  const float* r = detail::polar_express_iterations(sc.x, sc.xn, sc.a, sc.b, rows, cols, steps);
  detail::copy_floats_async(out, r, n, "cudaMemcpyAsync (polar_express output)");
}

}  // namespace cuda

namespace optim {

/// Parameters on lrt::cuda::Device: ParamRef::of takes them, AdamW and Muon update them on the GPU.
template <>
struct DeviceOpsOf<cuda::Device> {
  static const DeviceOps* get() noexcept { return &cuda::detail::optim_ops; }
};

}  // namespace optim
}  // namespace v0
}  // namespace lrt
