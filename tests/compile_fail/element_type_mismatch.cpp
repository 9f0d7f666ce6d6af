// expect-error: operands of an elementwise expression must have the same element type
#include <lrt/tensor.hpp>
int main() {
  lrt::Tensor<float, 1> a(lrt::Shape<1>{3});
  lrt::Tensor<double, 1> b(lrt::Shape<1>{3});
  auto e = a + b;
  (void)e;
}
