// lrt/optim/polar_express_coeffs.hpp: the Polar Express coefficients of LRT-SPEC §8 and the check
// of its arguments, shared by the CPU Muon (muon.hpp) and the device ones
// (optim/cuda.cuh). No Eigen, no fmt: nvcc takes it.
#pragma once

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace optim {
namespace detail {

/// Polar Express coefficients (a, b, e) of LRT-SPEC §8, in order.
inline constexpr double polar_express_coeffs[5][3] = {
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323},
};
inline constexpr int polar_express_max_steps = 5;

inline void check_pe_args(index_t rows, index_t cols, int steps, const char* op) {
  check(rows >= 1 && cols >= 1, op, "matrix shape (", rows, ", ", cols, ") is empty");
  check(steps >= 0 && steps <= polar_express_max_steps, op, "ns_steps must be in [0, ", polar_express_max_steps,
        "], got ", steps);
}

}  // namespace detail
}  // namespace optim
}  // namespace v0
}  // namespace lrt
