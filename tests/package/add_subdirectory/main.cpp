// Consumer smoke test: a real (if tiny) use of lrt through its public header.
#include <lrt/lrt.hpp>

int main() {
  lrt::Tensor<float, 2> a({2, 3});
  a = a + 1.f;
  return lrt::sum(a) == 6.f ? 0 : 1;
}
