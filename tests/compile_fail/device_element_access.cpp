// expect-error: element access on a device tensor
#include <lrt/tensor.hpp>
int main() {
  lrt::TensorView<float, 1, lrt::cuda::Device> v(nullptr, lrt::Shape<1>{3});
  return static_cast<int>(v(0));
}
