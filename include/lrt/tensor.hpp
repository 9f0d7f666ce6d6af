// lrt/tensor.hpp: the tensor layer on the CPU, with fmt formatting: <lrt/cpu.hpp> plus tensor/format.hpp.
// Safe with any C++20 compiler (no CUDA headers). <lrt/lrt.hpp> is the whole library.
//
//   #include <lrt/tensor.hpp>
//   lrt::Tensor<float, 2> a({2, 3}), b({2, 3});
//   a = lrt::uniform<float>(a.shape(), /*seed=*/1);
//   b = a * 2.f + lrt::exp(a);            // one fused pass, no temporaries
//   auto c = lrt::matmul(a, b.t());        // (2, 2), Eigen or OpenBLAS
//   fmt::print("{}\n", c);
//
// Shape letters used in comments: B batch, T time, C channels, H heads, Dh head dim, V vocab,
// L layers, S subsets.
#pragma once

#include "cpu.hpp"
#include "tensor/format.hpp"
