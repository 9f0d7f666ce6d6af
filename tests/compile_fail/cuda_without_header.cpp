// expect-error: no backend for this device: include <lrt/cuda.hpp> and compile with nvcc
#include <lrt/tensor.hpp>
int main() {
  lrt::Tensor<float, 1, lrt::cuda::Device> t(lrt::Shape<1>{3});
  return static_cast<int>(t.numel());
}
