// lrt/optim/muon.hpp: Muon with Nesterov momentum, Polar Express orthogonalisation (fp32),
// variance normalisation and cautious weight decay (LRT-SPEC §8), one matrix at a time.
//
// For gradient G (n_out x n_in = rows x cols) of parameter W, with momentum mu, lr = the
// options' lr x the multiplier, wd as passed to step():
//   buf <- buf + (1 - mu)(G - buf);  U = G + mu (buf - G)                 Nesterov
//   X = U / (1.02 ||U||_F + 1e-6)
//   for (a, b, e) in PE[:ns_steps]:
//     rows > cols:  A = X^T X;  X = a X + X (b A + e A^2)                 tall
//     otherwise:    A = X X^T;  X = a X + (b A + e A^2) X                 wide or square
//   vm = mean of X^2 over the columns (one value per row, rows x 1) if rows >= cols,
//        else over the rows (one value per column, 1 x cols)
//   n = ||X||_F;  sm <- sm + (1 - beta2)(vm - sm)  (sm starts at 0);  st = 1 / sqrt(max(sm, 1e-10))
//   X <- X (.) st * n / max(||X (.) st||_F, 1e-10)                        st broadcast
//   lr_eff = lr sqrt(max(1, rows / cols));  mask = (X (.) W >= 0)
//   W <- W - lr_eff X - lr_eff wd (W (.) mask)                            cautious weight decay
// Reading of "vm = mean(X², over columns if n_out ≥ n_in else over rows)": "over columns" means
// the mean runs along a row, across its columns (the reduced axis is the column axis, of length
// n_in), so vm has one entry per row; this is the release's `mean(dim=-1)` when
// size(-2) >= size(-1), else `mean(dim=-2)`, and the only reading compatible with the stated
// shapes n_out x 1 / 1 x n_in. The reduced axis is thus always the shorter one.
//
// GEMMs go through lrt::gemm, and the symmetric Gram products through cpu::detail::gemm1 on one
// triangle (fixed row blocks, so thread-count independent); sums are in double
// in a fixed order; everything else is elementwise. step() allocates nothing: the scratch is
// sized when parameters are added. A matrix without a gradient this step keeps W and its state.
// State I/O: "muon.<param>.momentum" (rows, cols), "muon.<param>.second_moment" (rows, 1) or
// (1, cols); counter "muon.steps".
// A matrix on a device (ParamRef::device set) keeps its state in that device's memory and is
// updated there in one muon_update of the device's table (same algorithm, fp32 GEMMs of the
// device's BLAS, fp64 sums); its scratch is one device buffer per device, sized in add().
// save() and load() copy its state to and from the host.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../backend/cpu/gemm.hpp"
#include "../core/thread_pool.hpp"
#include "../tensor/linalg.hpp"
#include "param_ref.hpp"
#include "polar_express_coeffs.hpp"

namespace lrt {
inline namespace v0 {
namespace optim {

namespace detail {

/// C (s x s, row-major) = alpha G + beta C with G the Gram matrix of X (rows x cols, row-major):
/// G = X^T X (s = cols) when `tall`, else X X^T (s = rows). G is symmetric, so only the blocks on
/// and below the diagonal are multiplied (row blocks of gram_block rows, each one GEMM against
/// the rows before it: for s = 512, 62.5% of a full product's flops) and the upper triangle is
/// copied from the lower one, which makes C exactly symmetric. The blocks do not depend on the
/// thread count, so neither does the result.
inline constexpr index_t gram_block = 128;
inline void gram(float* c, const float* x, index_t rows, index_t cols, bool tall, float alpha, float beta) {
  const index_t s = tall ? cols : rows, inner = tall ? rows : cols;
  const index_t blocks = (s + gram_block - 1) / gram_block;
  // Block i costs i + 1 units: visit them as 0, n-1, 1, n-2, ... so contiguous chunks balance.
  parallel_for(blocks, 1, [&](index_t b0, index_t b1) {
    for (index_t j = b0; j < b1; ++j) {
      const index_t blk = (j % 2 == 0) ? j / 2 : blocks - 1 - j / 2;
      const index_t r0 = blk * gram_block, r1 = std::min(s, r0 + gram_block);
      // rows r0..r1 of G, columns 0..r1: op(A) = rows r0..r1 of X (or columns, tall), op(B) =
      // the first r1 rows of X transposed (or X's first r1 columns).
      const lrt::MatRef<float> a =
          tall ? lrt::MatRef<float>{x + r0, cols, true} : lrt::MatRef<float>{x + r0 * cols, cols, false};
      const lrt::MatRef<float> b = tall ? lrt::MatRef<float>{x, cols, false} : lrt::MatRef<float>{x, cols, true};
      cpu::detail::gemm1<float>(r1 - r0, r1, inner, alpha, a, b, beta, c + r0 * s, s);
    }
  });
  for (index_t i = 0; i < s; ++i)
    for (index_t j = i + 1; j < s; ++j) c[i * s + j] = c[j * s + i];
}

/// Runs `steps` Polar Express iterations on X (rows x cols, row-major) held in x. xn (rows*cols),
/// a and b (s*s, s = min(rows, cols)) are scratch. Returns the buffer holding the result (x or xn).
/// A = X X^T (or X^T X) and A^2 = A A^T are symmetric: both are Gram products (gram above).
inline float* polar_express_iterations(float* x, float* xn, float* a, float* b, index_t rows, index_t cols, int steps) {
  const bool tall = rows > cols;
  const index_t s = tall ? cols : rows, n = rows * cols;
  const TensorView<float, 2> B(b, Shape<2>{s, s});
  for (int k = 0; k < steps; ++k) {
    const float ca = static_cast<float>(polar_express_coeffs[k][0]);
    const float cb = static_cast<float>(polar_express_coeffs[k][1]);
    const float ce = static_cast<float>(polar_express_coeffs[k][2]);
    const TensorView<float, 2> X(x, Shape<2>{rows, cols}), Xn(xn, Shape<2>{rows, cols});
    gram(a, x, rows, cols, tall, 1.f, 0.f);  // A = X^T X (tall, cols x cols) or X X^T (rows x rows)
    std::memcpy(b, a, sizeof(float) * static_cast<std::size_t>(s * s));
    gram(b, a, s, s, false, ce, cb);  // B = b A + e A A^T (= b A + e A^2: A is symmetric)
    std::memcpy(xn, x, sizeof(float) * static_cast<std::size_t>(n));
    if (tall)
      gemm(Xn, X, B, 1.f, ca);  // X' = a X + X B
    else
      gemm(Xn, B, X, 1.f, ca);  // X' = a X + B X
    std::swap(x, xn);
  }
  return x;
}

}  // namespace detail

/// The orthogonalisation alone, in fp32: out = PE(U / (1.02 ||U||_F + 1e-6)) for U (rows x cols,
/// row-major) at u. out may equal u. Allocates its scratch (Muon::step reuses its own).
inline void polar_express(const float* u, index_t rows, index_t cols, float* out, int steps = 5) {
  detail::check_pe_args(rows, cols, steps, "polar_express");
  const index_t n = rows * cols, s = std::min(rows, cols);
  std::vector<float> x(u, u + n), xn(static_cast<std::size_t>(n)), a(static_cast<std::size_t>(s * s)),
      b(static_cast<std::size_t>(s * s));
  const float denom = static_cast<float>(1.02 * std::sqrt(detail::sum_squares(x.data(), n)) + 1e-6);
  for (auto& v : x) v /= denom;
  const float* r = detail::polar_express_iterations(x.data(), xn.data(), a.data(), b.data(), rows, cols, steps);
  std::memmove(out, r, sizeof(float) * static_cast<std::size_t>(n));
}

struct MuonOptions {
  float lr = 0.02f;
  float beta2 = 0.95f;
  int ns_steps = 5;
};

class Muon {
 public:
  explicit Muon(MuonOptions o = {}) : opt_(o) { check_options(); }

  /// Adds a matrix (rank 2); names must be unique within this optimizer.
  void add(ParamRef p) {
    detail::check_param(p, "Muon");
    check(p.rank == 2, "Muon", "parameter '", p.name, "' has rank ", p.rank, ": Muon takes matrices");
    for (const auto& q : params_)
      check(q.name != p.name, "Muon", "parameter name '", p.name, "' appears twice: optimizer state is keyed by name");
    const index_t n = p.numel(), s = std::min(p.rows, p.cols), len = std::max(p.rows, p.cols);
    if (p.device) {
      add_device(p);
      return;
    }
    state_.push_back({detail::StateBuffer(nullptr, n), detail::StateBuffer(nullptr, len)});
    grow(x_, n);
    grow(xn_, n);
    grow(a_, s * s);
    grow(b_, s * s);
    grow(scale_, len);
    if (static_cast<index_t>(sums_.size()) < len) sums_.resize(static_cast<std::size_t>(len));
    params_.push_back(std::move(p));
  }

  /// One update of every matrix that has a gradient: lr = options().lr x lr_multiplier, Nesterov
  /// momentum `momentum`, weight decay `weight_decay` (see the header comment).
  void step(float lr_multiplier, float momentum, float weight_decay) {
    check_options();
    ++steps_;
    const double lr = double(opt_.lr) * double(lr_multiplier);
    for (std::size_t pi = 0; pi < params_.size(); ++pi) {
      const ParamRef& p = params_[pi];
      const float* g = p.grad();
      if (!g) continue;
      float* w = p.value();
      check(w != nullptr, "Muon", "parameter '", p.name, "' has no value storage");
      if (p.device)
        update_device(p, state_[pi], g, w, lr, momentum, weight_decay);
      else
        update(p, state_[pi], g, w, lr, momentum, weight_decay);
    }
  }

  std::int64_t steps() const noexcept { return steps_; }
  MuonOptions& options() noexcept { return opt_; }
  const MuonOptions& options() const noexcept { return opt_; }
  const std::vector<ParamRef>& params() const noexcept { return params_; }

  /// Appends momentum and second moment of every matrix to `out`, the step count to `counters`.
  void save(std::vector<NamedBuffer>& out, std::map<std::string, std::int64_t>& counters) const {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const ParamRef& p = params_[i];
      out.push_back({"muon." + p.name + ".momentum", p.shape(), state_[i].buf.to_vector()});
      out.push_back({"muon." + p.name + ".second_moment", sm_shape(p), state_[i].sm.to_vector()});
    }
    counters["muon.steps"] = steps_;
  }

  /// Restores the state written by save(). Every matrix's buffers must be present with their
  /// shapes, and no other "muon." buffer may be; on error nothing is changed.
  void load(const std::vector<NamedBuffer>& in, const std::map<std::string, std::int64_t>& counters) {
    const auto by_name = detail::index_buffers(in, "muon.", "Muon::load");
    std::vector<State> next;
    next.reserve(params_.size());
    std::set<std::string> expected;
    for (const ParamRef& p : params_) {
      const std::string base = "muon." + p.name;
      const auto& m = detail::find_buffer(by_name, base + ".momentum", p.shape(), p.name, "Muon::load");
      const auto& s = detail::find_buffer(by_name, base + ".second_moment", sm_shape(p), p.name, "Muon::load");
      next.push_back({detail::StateBuffer(p.device, m.data), detail::StateBuffer(p.device, s.data)});
      expected.insert(base + ".momentum");
      expected.insert(base + ".second_moment");
    }
    for (const auto& kv : by_name)
      check(expected.count(kv.first) != 0, "Muon::load", "buffer '", kv.first,
            "' belongs to no parameter of this optimizer");
    const auto st = counters.find("muon.steps");
    check(st != counters.end() && st->second >= 0, "Muon::load", "missing or negative counter 'muon.steps'");
    state_ = std::move(next);
    steps_ = st->second;
  }

 private:
  struct State {
    detail::StateBuffer buf;  // momentum, rows x cols
    detail::StateBuffer sm;   // second moment, rows x 1 if rows >= cols else 1 x cols
  };

  static std::vector<std::int64_t> sm_shape(const ParamRef& p) {
    if (p.rows >= p.cols) return {p.rows, 1};
    return {1, p.cols};
  }
  static void grow(std::vector<float>& v, index_t n) {
    if (static_cast<index_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  }
  void check_options() const {
    detail::check_pe_args(1, 1, opt_.ns_steps, "Muon");
    check(opt_.lr >= 0 && opt_.beta2 >= 0 && opt_.beta2 < 1, "Muon", "need lr >= 0 and beta2 in [0, 1), got lr ",
          opt_.lr, ", beta2 ", opt_.beta2);
  }

  void update(const ParamRef& p, State& st, const float* g, float* w, double lr, float mu, float wd) {
    const index_t rows = p.rows, cols = p.cols, n = rows * cols;
    const index_t grain = detail::elementwise_grain;
    const index_t row_grain = std::max<index_t>(1, grain / cols);
    float* buf = st.buf.data();
    float* x = x_.data();
    // Nesterov momentum.
    const float c = 1.f - mu;
    parallel_for(n, grain, [&](index_t b, index_t e) {
      for (index_t i = b; i < e; ++i) {
        buf[i] += c * (g[i] - buf[i]);
        x[i] = g[i] + mu * (buf[i] - g[i]);
      }
    });
    // Frobenius normalisation and Polar Express.
    const float denom = static_cast<float>(1.02 * std::sqrt(detail::sum_squares(x, n)) + 1e-6);
    parallel_for(n, grain, [&](index_t b, index_t e) {
      for (index_t i = b; i < e; ++i) x[i] /= denom;
    });
    const float* r = detail::polar_express_iterations(x, xn_.data(), a_.data(), b_.data(), rows, cols, opt_.ns_steps);
    // Variance normalisation: per-row statistics if rows >= cols, else per-column.
    const bool per_row = rows >= cols;
    const index_t len = per_row ? rows : cols, red = per_row ? cols : rows;
    double* sums = sums_.data();
    if (per_row) {
      parallel_for(rows, row_grain, [&](index_t b, index_t e) {
        for (index_t i = b; i < e; ++i) {
          double acc = 0;
          for (index_t j = 0; j < cols; ++j) acc += double(r[i * cols + j]) * double(r[i * cols + j]);
          sums[i] = acc;
        }
      });
    } else {
      parallel_for(cols, std::max<index_t>(1, grain / rows), [&](index_t b, index_t e) {
        for (index_t j = b; j < e; ++j) sums[j] = 0;
        for (index_t i = 0; i < rows; ++i)
          for (index_t j = b; j < e; ++j) sums[j] += double(r[i * cols + j]) * double(r[i * cols + j]);
      });
    }
    float* sm = st.sm.data();
    float* scale = scale_.data();
    const float c2 = 1.f - opt_.beta2;
    double n2 = 0, s2 = 0;  // ||X||_F^2 and ||X (.) st||_F^2, in index order
    for (index_t k = 0; k < len; ++k) {
      const float vm = static_cast<float>(sums[k] / double(red));
      sm[k] += c2 * (vm - sm[k]);
      const float stk = 1.f / std::sqrt(std::max(sm[k], 1e-10f));
      scale[k] = stk;
      n2 += sums[k];
      s2 += double(stk) * double(stk) * sums[k];
    }
    const double ratio = std::sqrt(n2) / std::max(std::sqrt(s2), 1e-10);
    for (index_t k = 0; k < len; ++k) scale[k] = static_cast<float>(double(scale[k]) * ratio);
    // Update with cautious weight decay.
    const double lr_eff = lr * std::sqrt(std::max(1.0, double(rows) / double(cols)));
    const float le = static_cast<float>(lr_eff), lwd = static_cast<float>(lr_eff * double(wd));
    parallel_for(rows, row_grain, [&](index_t b, index_t e) {
      for (index_t i = b; i < e; ++i)
        for (index_t j = 0; j < cols; ++j) {
          const index_t k = i * cols + j;
          const float xv = r[k] * scale[per_row ? i : j], wv = w[k];
          w[k] = xv * wv >= 0.f ? wv - le * xv - lwd * wv : wv - le * xv;
        }
    });
  }

  /// add() for a matrix on a device: state there, and that device's scratch grown to fit it.
  void add_device(ParamRef& p) {
    const DeviceOps* d = p.device;
    const std::size_t need = d->muon_scratch_bytes(p.rows, p.cols);
    std::size_t at = dev_scratch_.size();  // d's entry, or size() when it has none yet
    for (std::size_t k = 0; k < dev_scratch_.size(); ++k)
      if (dev_scratch_[k].mem.ops() == d) at = k;
    State st{detail::StateBuffer(d, p.numel()), detail::StateBuffer(d, std::max(p.rows, p.cols))};
    detail::DeviceBuffer grown;
    if (at == dev_scratch_.size() || dev_scratch_[at].mem.bytes() < need) grown = detail::DeviceBuffer(d, need);
    // Only the reservations can throw from here on, and they come first: a failed add() changes
    // nothing.
    params_.reserve(params_.size() + 1);
    state_.reserve(state_.size() + 1);
    dev_scratch_.reserve(dev_scratch_.size() + 1);
    if (at == dev_scratch_.size())
      dev_scratch_.push_back(DeviceScratch{std::move(grown)});
    else if (grown.get())
      dev_scratch_[at].mem = std::move(grown);
    state_.push_back(std::move(st));
    params_.push_back(std::move(p));
  }

  /// update() for a matrix on a device: the scalars as on the host, the rest on the device.
  void update_device(const ParamRef& p, State& st, const float* g, float* w, double lr, float mu, float wd) {
    const DeviceOps* d = p.device;
    const detail::DeviceBuffer* scratch = nullptr;
    for (const auto& s : dev_scratch_)
      if (s.mem.ops() == d) scratch = &s.mem;
    check(scratch != nullptr && scratch->bytes() >= d->muon_scratch_bytes(p.rows, p.cols), "Muon", "parameter '",
          p.name, "': no scratch on device '", d->name, "'");
    check(st.buf.device() == d && st.buf.size() == p.numel(), "Muon", "parameter '", p.name,
          "' changed size or device after it was added");
    const double lr_eff = lr * std::sqrt(std::max(1.0, double(p.rows) / double(p.cols)));
    d->muon_update({p.rows, p.cols, g, w, st.buf.data(), st.sm.data(), mu, opt_.beta2, opt_.ns_steps,
                    static_cast<float>(lr_eff), static_cast<float>(lr_eff * double(wd)), scratch->get(),
                    scratch->bytes()});
  }

  /// Muon's scratch on one device (contents are not state: a copy gets a buffer of its own).
  struct DeviceScratch {
    detail::DeviceBuffer mem;
    DeviceScratch(detail::DeviceBuffer m) noexcept : mem(std::move(m)) {}
    DeviceScratch(DeviceScratch&&) noexcept = default;
    DeviceScratch& operator=(DeviceScratch&&) noexcept = default;
    DeviceScratch(const DeviceScratch& o) : mem(o.mem.ops(), o.mem.bytes()) {}
    DeviceScratch& operator=(const DeviceScratch& o) {
      if (this != &o) mem = detail::DeviceBuffer(o.mem.ops(), o.mem.bytes());
      return *this;
    }
  };

  MuonOptions opt_;
  std::vector<ParamRef> params_;
  std::vector<State> state_;
  std::vector<DeviceScratch> dev_scratch_;     // one per device holding matrices
  std::vector<float> x_, xn_, a_, b_, scale_;  // scratch, sized for the largest matrix
  std::vector<double> sums_;
  std::int64_t steps_ = 0;
};

}  // namespace optim
}  // namespace v0
}  // namespace lrt
