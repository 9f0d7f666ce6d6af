// tests/cuda/cuda_tests.cu: the CUDA test program, lrt_cuda_tests: tests/cuda/test_cuda.cu (the
// tensor layer) and tests/cuda/test_cuda_model.cu (the model layer) in one nvcc unit, so that the
// headers, the kernels both use and the CPU references are compiled once. CTest (and
// bench/gpu_check.sh) run each file's cases apart with doctest's --source-file.
// Without a GPU (or driver) it prints "CUDA: no GPU found, N CUDA tests compiled and skipped"
// and exits 0; set LRT_REQUIRE_GPU=1 to make that a failure (for GPU machines). Compiled apart,
// the two files took 57 + 140 s of CPU, together 144 s (nvcc 13, -O1 host code, sm_90).
// Build by hand: nvcc -std=c++20 -arch=sm_90 -DEIGEN_NO_CUDA --extended-lambda
//   --expt-relaxed-constexpr -Iinclude -isystem /usr/include/eigen3 tests/cuda/cuda_tests.cu -lcublas -lfmt
#include "test_cuda.cu"
#include "test_cuda_model.cu"

int main(int argc, char** argv) {
  const std::size_t n = doctest::detail::getRegisteredTests().size();
  if (lrt::cuda::device_count() == 0) {
    std::printf("CUDA: no GPU found, %zu CUDA tests compiled and skipped\n", n);
    const char* req = std::getenv("LRT_REQUIRE_GPU");
    return (req && *req && std::strcmp(req, "0") != 0) ? 1 : 0;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
