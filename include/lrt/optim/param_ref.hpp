// lrt/optim/param_ref.hpp: what the optimizers see of a parameter, and how their state is
// handed to (and taken from) a checkpoint without depending on any file format.
//
// A ParamRef is a type-erased handle to one float parameter of rank 1 or 2: its name, its matrix
// shape (rank 1: rows = 1, cols = n), where it lives and two functions that return, at step time,
// the value's storage and the gradient's storage (nullptr when there is no gradient this step: the
// optimizer then leaves the parameter and its state alone). ParamRef::of(p) builds one from an
// ad::Param; it holds the parameter's node, so it stays valid when the Param object is moved but
// not after the Param is destroyed.
//
// Devices: `device` is nullptr for a parameter in host memory (the optimizers then run their CPU
// code on lrt's thread pool). Otherwise it points to the DeviceOps table of the device holding the
// parameter: value() and grad() return device pointers, the optimizer keeps its state in that
// device's memory, and every update runs through the table (nothing is copied to the host except
// by save()). A backend provides its table by specialising DeviceOpsOf<D> (the CUDA one is in
// lrt/optim/cuda.cuh), which is what makes ParamRef::of accept its parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../autodiff/graph.hpp"
#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace optim {

/// AdamW's per-element update of one parameter on a device (see adamw.hpp): for i < n,
///   wi = wd ? w[i] decay : w[i];  m[i] += c1 (g[i] - m[i]);  v[i] += c2 (g[i]^2 - v[i])
///   w[i] = wi - step_size (m[i] / (sqrt(v[i] / bias2) + eps))
/// with the CPU code's float operations, each rounded once. All pointers are device pointers.
struct AdamWDeviceArgs {
  float* w;
  const float* g;
  float* m;
  float* v;
  index_t n;
  bool wd;
  float decay, c1, c2, step_size, bias2, eps;
};

/// One Muon update of a rows x cols matrix on a device (see muon.hpp): Nesterov momentum into
/// buf, normalisation and ns_steps Polar Express iterations, variance normalisation with the
/// second moment sm (rows x 1 if rows >= cols, else 1 x cols; beta2 its EMA coefficient), and
/// the update w <- w - lr_eff X - lr_wd (w (.) mask). g, w, buf, sm and scratch are device
/// pointers; scratch holds at least DeviceOps::muon_scratch_bytes(rows, cols) bytes.
struct MuonDeviceArgs {
  index_t rows, cols;
  const float* g;
  float* w;
  float* buf;
  float* sm;
  float mu, beta2;
  int ns_steps;
  float lr_eff, lr_wd;
  void* scratch;
  std::size_t scratch_bytes;
};

/// What the optimizers need of a device that holds parameters: memory for their state and the
/// two updates. Every operation is queued in the device's order of work (no host sync) except
/// allocate_zeroed, upload, download and copy, which return when they are done.
struct DeviceOps {
  const char* name;                             // "cuda", for messages
  void* (*allocate_zeroed)(std::size_t bytes);  // zero-filled; throws on failure
  void (*deallocate)(void* p, std::size_t bytes) noexcept;
  void (*upload)(float* dev, const float* host, index_t n);    // host -> device
  void (*download)(float* host, const float* dev, index_t n);  // device -> host
  void (*copy)(float* dst, const float* src, index_t n);       // device -> device
  void (*adamw_update)(const AdamWDeviceArgs& a);
  std::size_t (*muon_scratch_bytes)(index_t rows, index_t cols);
  void (*muon_update)(const MuonDeviceArgs& a);
};

/// The optimizer table of device D: nullptr for the host; backends specialise it with a
/// `static const DeviceOps* get() noexcept` returning theirs.
template <class D>
struct DeviceOpsOf {
  static_assert(lrt::detail::always_false<D>,
                "no optimizer support for parameters on this device: for lrt::cuda::Device include "
                "lrt/optim/cuda.cuh (nvcc)");
};
template <>
struct DeviceOpsOf<cpu::Device> {
  static constexpr const DeviceOps* get() noexcept { return nullptr; }
};

/// One parameter as an optimizer sees it (float, row-major contiguous rows x cols, on the host
/// when device is nullptr, else on that device).
struct ParamRef {
  std::string name;
  index_t rows = 1, cols = 1;  // rank-1 parameters: rows = 1, cols = n
  int rank = 2;                // 1 or 2: the shape saved with its state, and Muon takes only 2
  std::function<float*()> value;
  std::function<const float*()> grad;  // nullptr: no gradient this step (skip, keep state)
  const DeviceOps* device = nullptr;   // nullptr: host memory; else value()/grad() are device pointers

  index_t numel() const noexcept { return rows * cols; }
  /// The parameter's shape as saved with its state: {cols} for rank 1, {rows, cols} for rank 2.
  std::vector<std::int64_t> shape() const {
    if (rank == 1) return {cols};
    return {rows, cols};
  }

  /// A handle to p (R == 1 or 2) on the host or on a device with a DeviceOpsOf table. Its
  /// gradient counts as present when p.has_grad().
  template <int R, Device D>
  static ParamRef of(ad::Param<float, R, D>& p) {
    static_assert(R == 1 || R == 2, "optimizers take parameters of rank 1 or 2");
    ParamRef r;
    r.name = p.name();
    r.rank = R;
    r.device = DeviceOpsOf<D>::get();
    if constexpr (R == 1) {
      r.cols = p.shape()[0];
    } else {
      r.rows = p.shape()[0];
      r.cols = p.shape()[1];
    }
    check(!r.name.empty(), "optim", "a parameter of shape ", p.shape(),
          " has no name: optimizer state is keyed by parameter name");
    ad::VarNode<float, R, D>* n = p.var().node();
    r.value = [n] { return n->value.data(); };
    r.grad = [n]() -> const float* { return n->grad_ready ? n->grad.data() : nullptr; };
    return r;
  }
};

/// One named float buffer of optimizer state (row-major, shape as listed).
struct NamedBuffer {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

namespace detail {

inline std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

/// Checks that a parameter is usable by an optimizer: named, sane shape, both functions set.
inline void check_param(const ParamRef& p, const char* op) {
  check(!p.name.empty(), op, "a parameter of shape (", p.rows, ", ", p.cols, ") has no name");
  check(p.rank == 1 || p.rank == 2, op, "parameter '", p.name, "' has rank ", p.rank, ": optimizers take rank 1 or 2");
  check(p.rows >= 1 && p.cols >= 1 && (p.rank == 2 || p.rows == 1), op, "parameter '", p.name, "' has a bad shape (",
        p.rows, ", ", p.cols, ")");
  check(static_cast<bool>(p.value) && static_cast<bool>(p.grad), op, "parameter '", p.name,
        "' lacks a value or grad accessor");
  if (const DeviceOps* d = p.device)
    check(d->allocate_zeroed && d->deallocate && d->upload && d->download && d->copy && d->adamw_update &&
              d->muon_scratch_bytes && d->muon_update,
          op, "parameter '", p.name, "': the operations table of device '", d->name ? d->name : "?", "' is incomplete");
}

/// Device memory from a DeviceOps table, freed with it (move-only; empty when bytes == 0).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// bytes zero-filled bytes on ops' device.
  DeviceBuffer(const DeviceOps* ops, std::size_t bytes) : ops_(ops) {
    if (bytes == 0) return;
    p_ = ops->allocate_zeroed(bytes);
    bytes_ = bytes;
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ops_(o.ops_), p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ops_ = o.ops_;
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  void* get() const noexcept { return p_; }
  std::size_t bytes() const noexcept { return bytes_; }
  const DeviceOps* ops() const noexcept { return ops_; }

 private:
  void release() noexcept {
    if (p_) ops_->deallocate(p_, bytes_);
    p_ = nullptr;
    bytes_ = 0;
  }
  const DeviceOps* ops_ = nullptr;
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

/// n floats of optimizer state where its parameter lives: a std::vector on the host (device ==
/// nullptr), device memory otherwise. Copies are deep.
class StateBuffer {
 public:
  StateBuffer() = default;
  /// n zeros.
  StateBuffer(const DeviceOps* device, index_t n) : device_(device), n_(n) {
    if (!device)
      host_.assign(static_cast<std::size_t>(n), 0.f);
    else
      mem_ = DeviceBuffer(device, bytes());
  }
  /// A copy of values (n = values.size()).
  StateBuffer(const DeviceOps* device, const std::vector<float>& values)
      : device_(device), n_(static_cast<index_t>(values.size())) {
    if (!device) {
      host_ = values;
    } else {
      mem_ = DeviceBuffer(device, bytes());
      if (n_ > 0) device->upload(static_cast<float*>(mem_.get()), values.data(), n_);
    }
  }
  StateBuffer(StateBuffer&&) noexcept = default;
  StateBuffer& operator=(StateBuffer&&) noexcept = default;
  StateBuffer(const StateBuffer& o) : device_(o.device_), n_(o.n_), host_(o.host_) {
    if (device_) {
      mem_ = DeviceBuffer(device_, bytes());
      if (n_ > 0) device_->copy(data(), o.data(), n_);
    }
  }
  StateBuffer& operator=(const StateBuffer& o) {
    if (this != &o) *this = StateBuffer(o);
    return *this;
  }

  const DeviceOps* device() const noexcept { return device_; }
  index_t size() const noexcept { return n_; }
  /// The storage: a host pointer, or a device pointer when device() is set.
  float* data() noexcept { return device_ ? static_cast<float*>(mem_.get()) : host_.data(); }
  const float* data() const noexcept { return device_ ? static_cast<const float*>(mem_.get()) : host_.data(); }
  /// The values, on the host.
  std::vector<float> to_vector() const {
    if (!device_) return host_;
    std::vector<float> out(static_cast<std::size_t>(n_));
    if (n_ > 0) device_->download(out.data(), data(), n_);
    return out;
  }

 private:
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(n_) * sizeof(float); }
  const DeviceOps* device_ = nullptr;
  index_t n_ = 0;
  std::vector<float> host_;
  DeviceBuffer mem_;
};

/// Finds the buffer `name` in `in` with exactly `shape`, or throws naming `param`.
inline const NamedBuffer& find_buffer(const std::map<std::string, const NamedBuffer*>& by_name, const std::string& name,
                                      const std::vector<std::int64_t>& shape, const std::string& param,
                                      const char* op) {
  const auto it = by_name.find(name);
  check(it != by_name.end(), op, "state of parameter '", param, "': no buffer named '", name, "'");
  const NamedBuffer& b = *it->second;
  check(b.shape == shape, op, "state of parameter '", param, "': buffer '", name, "' has shape ", shape_str(b.shape),
        ", expected ", shape_str(shape));
  std::int64_t n = 1;
  for (const auto e : shape) n *= e;
  check(static_cast<std::int64_t>(b.data.size()) == n, op, "state of parameter '", param, "': buffer '", name,
        "' holds ", b.data.size(), " values for shape ", shape_str(shape));
  return b;
}

/// Indexes buffers by name, throwing on duplicates among those starting with `prefix`.
inline std::map<std::string, const NamedBuffer*> index_buffers(const std::vector<NamedBuffer>& in,
                                                               const std::string& prefix, const char* op) {
  std::map<std::string, const NamedBuffer*> m;
  for (const auto& b : in) {
    if (b.name.rfind(prefix, 0) != 0) continue;
    check(m.emplace(b.name, &b).second, op, "duplicate state buffer '", b.name, "'");
  }
  return m;
}

/// Sum of squares of x[0..n) in double, in one fixed order (independent of the thread count).
inline double sum_squares(const float* x, index_t n) {
  double acc[4] = {0, 0, 0, 0};
  index_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += double(x[i + k]) * double(x[i + k]);
  for (; i < n; ++i) acc[0] += double(x[i]) * double(x[i]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/// Elements per chunk of an elementwise optimizer loop on the thread pool.
inline constexpr index_t elementwise_grain = index_t{1} << 15;

}  // namespace detail
}  // namespace optim
}  // namespace v0
}  // namespace lrt
