// expect-error: rank mismatch: the expression has a higher rank than the destination
#include <lrt/tensor.hpp>
int main() {
  lrt::Tensor<float, 2> a(lrt::Shape<2>{2, 3});
  lrt::Tensor<float, 3> b(lrt::Shape<3>{1, 2, 3});
  a.view() = b * 2.f;
}
