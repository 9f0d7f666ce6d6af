// fmt formatting of shapes and tensors; error type and messages.
#include "test_util.hpp"

using lrt::Shape;
using lrt::Tensor;

TEST_CASE("shapes and small tensors format readably") {
  CHECK(fmt::format("{}", Shape<2>{2, 3}) == "(2, 3)");
  CHECK(fmt::format("{}", Shape<1>{4}) == "(4,)");
  CHECK(fmt::format("{}", Shape<0>{}) == "()");
  Tensor<int, 2> t = lrt::iota(Shape<2>{2, 3}, 0);
  CHECK(fmt::format("{}", t) == "[[0, 1, 2],\n [3, 4, 5]]");
  Tensor<float, 1> f = lrt::iota(Shape<1>{3}, 0.5f);
  CHECK(fmt::format("{:.2f}", f) == "[0.50, 1.50, 2.50]");
  CHECK(fmt::format("{}", t.t()) == "[[0, 3],\n [1, 4],\n [2, 5]]");
  Tensor<int, 0> s;
  CHECK(fmt::format("{}", s) == "0");
}

TEST_CASE("large tensors are summarised") {
  Tensor<int, 1> t = lrt::iota(Shape<1>{100}, 0);
  CHECK(fmt::format("{}", t) == "[0, 1, 2, ..., 97, 98, 99]");
  Tensor<int, 2> m = lrt::iota(Shape<2>{8, 2}, 0);
  CHECK(fmt::format("{}", m) ==
        "[[0, 1],\n [2, 3],\n [4, 5],\n ...,\n [10, 11],\n [12, 13],\n [14, 15]]");
}

TEST_CASE("lrt::check builds '[op] message' errors") {
  try {
    lrt::check(false, "matmul", "inner dims differ: ", lrt::to_string(Shape<2>{2, 3}), " vs ",
               lrt::to_string(Shape<2>{4, 5}));
    FAIL("no throw");
  } catch (const lrt::Error& e) {
    CHECK(std::string(e.what()) == "[matmul] inner dims differ: (2, 3) vs (4, 5)");
    CHECK(e.op() == "matmul");
    const std::runtime_error& base = e;  // catchable as a standard exception
    CHECK(std::string(base.what()).size() > 0);
  }
}
