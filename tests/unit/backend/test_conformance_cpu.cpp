// tests/unit/backend/test_conformance_cpu.cpp: the device-generic conformance bodies
// (conformance.hpp, beside this file; tests/cuda/test_cuda.cu runs them on the GPU) on
// lrt::cpu::Device, so the bodies (and their host references) are checked on every machine, GPU
// or not. Plain C++; no main: link it into a doctest runner (e.g. lrt_tests).
#include <lrt/lrt.hpp>

#include "conformance.hpp"

namespace test_conformance_cpu {

LRT_CONFORMANCE_TEST_CASES(lrt::cpu::Device, "conformance cpu")

}  // namespace test_conformance_cpu
