// expect-error: mixing devices in one expression
#include <lrt/tensor.hpp>
int main() {
  lrt::Tensor<float, 1> a(lrt::Shape<1>{3});
  lrt::TensorView<float, 1, lrt::cuda::Device> v(nullptr, lrt::Shape<1>{3});
  auto e = a + v;
  (void)e;
}
