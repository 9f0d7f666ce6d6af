// expect-error: cannot assign to a view of const elements
#include <lrt/tensor.hpp>
int main() {
  const lrt::Tensor<float, 1> a(lrt::Shape<1>{3});
  lrt::Tensor<float, 1> b(lrt::Shape<1>{3});
  a.view() = b * 2.f;
}
