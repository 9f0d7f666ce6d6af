// expect-error: (none: this control must compile, so a broken compiler command cannot make the
// must-not-compile tests pass vacuously)
#include <lrt/tensor.hpp>
int main() {
  lrt::Tensor<float, 2> a(lrt::Shape<2>{2, 3}), b(lrt::Shape<2>{2, 3});
  lrt::TensorView<float, 1, lrt::cuda::Device> v(nullptr, lrt::Shape<1>{3});  // a view allocates nothing
  a = a + b * 2.f;
  return static_cast<int>(a.numel() + v.numel()) - 9;
}
