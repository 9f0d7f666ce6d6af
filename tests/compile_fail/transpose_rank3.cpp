// expect-error: is the matrix transpose
#include <lrt/tensor.hpp>
int main() {
  lrt::Tensor<float, 3> a(lrt::Shape<3>{1, 2, 3});
  auto t = a.t();
  (void)t;
}
