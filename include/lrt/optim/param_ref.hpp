// lrt/optim/param_ref.hpp: what the optimizers see of a parameter, and how their state is
// handed to (and taken from) a checkpoint without depending on any file format.
//
// A ParamRef is a type-erased handle to one float parameter of rank 1 or 2 on the CPU: its name,
// its matrix shape (rank 1: rows = 1, cols = n) and two functions that return, at step time, the
// value's storage and the gradient's storage (nullptr when there is no gradient this step: the
// optimizer then leaves the parameter and its state alone). ParamRef::of(p) builds one from an
// ad::Param; it holds the parameter's node, so it stays valid when the Param object is moved but
// not after the Param is destroyed.
#pragma once

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

/// One parameter as an optimizer sees it (float, CPU, row-major contiguous rows x cols).
struct ParamRef {
  std::string name;
  index_t rows = 1, cols = 1;  // rank-1 parameters: rows = 1, cols = n
  int rank = 2;                // 1 or 2: the shape saved with its state, and Muon takes only 2
  std::function<float*()> value;
  std::function<const float*()> grad;  // nullptr: no gradient this step (skip, keep state)

  index_t numel() const noexcept { return rows * cols; }
  /// The parameter's shape as saved with its state: {cols} for rank 1, {rows, cols} for rank 2.
  std::vector<std::int64_t> shape() const {
    if (rank == 1) return {cols};
    return {rows, cols};
  }

  /// A handle to p (R == 1 or 2). Its gradient counts as present when p.has_grad().
  template <int R>
  static ParamRef of(ad::Param<float, R, cpu::Device>& p) {
    static_assert(R == 1 || R == 2, "optimizers take parameters of rank 1 or 2");
    ParamRef r;
    r.name = p.name();
    r.rank = R;
    if constexpr (R == 1) {
      r.cols = p.shape()[0];
    } else {
      r.rows = p.shape()[0];
      r.cols = p.shape()[1];
    }
    check(!r.name.empty(), "optim", "a parameter of shape ", p.shape(),
          " has no name: optimizer state is keyed by parameter name");
    ad::VarNode<float, R, cpu::Device>* n = p.var().node();
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
  check(p.rank == 1 || p.rank == 2, op, "parameter '", p.name, "' has rank ", p.rank,
        ": optimizers take rank 1 or 2");
  check(p.rows >= 1 && p.cols >= 1 && (p.rank == 2 || p.rows == 1), op, "parameter '", p.name,
        "' has a bad shape (", p.rows, ", ", p.cols, ")");
  check(static_cast<bool>(p.value) && static_cast<bool>(p.grad), op, "parameter '", p.name,
        "' lacks a value or grad accessor");
}

/// Finds the buffer `name` in `in` with exactly `shape`, or throws naming `param`.
inline const NamedBuffer& find_buffer(const std::map<std::string, const NamedBuffer*>& by_name,
                                      const std::string& name,
                                      const std::vector<std::int64_t>& shape,
                                      const std::string& param, const char* op) {
  const auto it = by_name.find(name);
  check(it != by_name.end(), op, "state of parameter '", param, "': no buffer named '", name, "'");
  const NamedBuffer& b = *it->second;
  check(b.shape == shape, op, "state of parameter '", param, "': buffer '", name, "' has shape ",
        shape_str(b.shape), ", expected ", shape_str(shape));
  std::int64_t n = 1;
  for (const auto e : shape) n *= e;
  check(static_cast<std::int64_t>(b.data.size()) == n, op, "state of parameter '", param,
        "': buffer '", name, "' holds ", b.data.size(), " values for shape ", shape_str(shape));
  return b;
}

/// Indexes buffers by name, throwing on duplicates among those starting with `prefix`.
inline std::map<std::string, const NamedBuffer*> index_buffers(const std::vector<NamedBuffer>& in,
                                                               const std::string& prefix,
                                                               const char* op) {
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
