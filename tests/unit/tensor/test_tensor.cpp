// Owning tensors and views: construction, copies, element access, slice/select/permute/
// transpose/reshape/unsqueeze, device copies, their errors; fmt formatting of shapes and tensors.
#include "../test_util.hpp"

namespace test_tensor {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;
using lrt::TensorView;

TEST_CASE("construction, zero fill, copies and moves") {
  Tensor<float, 3> t(Shape<3>{2, 3, 4});
  CHECK(t.numel() == 24);
  CHECK(t.shape() == Shape<3>{2, 3, 4});
  CHECK(t.strides() == Shape<3>{12, 4, 1});
  for (index_t i = 0; i < 24; ++i) CHECK(t.data()[i] == 0.f);
  t(1, 2, 3) = 5.f;
  Tensor<float, 3> c = t;  // deep copy
  c(1, 2, 3) = 6.f;
  CHECK(t(1, 2, 3) == 5.f);
  const float* p = t.data();
  Tensor<float, 3> m = std::move(t);  // move keeps storage
  CHECK(m.data() == p);
  CHECK(m(1, 2, 3) == 5.f);
  Tensor<float, 3> empty;
  CHECK(empty.numel() == 0);
  empty = m * 2.f;  // an empty tensor takes the expression's shape
  CHECK(empty.shape() == m.shape());
  CHECK(empty(1, 2, 3) == 10.f);
  using T2 = Tensor<float, 2>;
  CHECK_THROWS_WITH_AS(T2(Shape<2>{2, -1}), "[tensor] negative extent in shape (2, -1)", lrt::Error);
  CHECK_THROWS_WITH_AS((Shape<2>{1, 2, 3}), "[shape] expected 2 extents, got 3", lrt::Error);
}

TEST_CASE("element access with bounds checks") {
  Tensor<int, 2> t = lrt::iota(Shape<2>{3, 4}, 0);
  CHECK(t.at(2, 3) == 11);
  CHECK_THROWS_WITH_AS(t.at(3, 0), "[at] index 3 out of bounds for axis 0 of shape (3, 4)", lrt::Error);
  CHECK_THROWS_AS(t.at(0, -1), lrt::Error);
  const Tensor<int, 2>& ct = t;
  CHECK(ct(1, 1) == 5);
  static_assert(std::is_same_v<decltype(ct.view()), TensorView<const int, 2>>);
  static_assert(std::is_same_v<decltype(ct.slice(0, 0, 1)), TensorView<const int, 2>>);
  static_assert(std::is_same_v<decltype(t.slice(0, 0, 1)), TensorView<int, 2>>);
}

TEST_CASE("slice, select, permute, transpose: strides and values") {
  Tensor<int, 3> t = lrt::iota(Shape<3>{4, 5, 6}, 0);
  auto s = t.slice(1, 1, 5, 2);  // rows 1, 3
  CHECK(s.shape() == Shape<3>{4, 2, 6});
  CHECK(s(2, 1, 4) == t(2, 3, 4));
  CHECK(!s.is_contiguous());
  auto neg = t.slice(2, -3, -1);  // columns 3, 4
  CHECK(neg.shape() == Shape<3>{4, 5, 2});
  CHECK(neg(0, 0, 0) == 3);
  auto empty = t.slice(0, 2, 2);
  CHECK(empty.numel() == 0);
  auto sel = t.select(2, -1);
  CHECK(sel.shape() == Shape<2>{4, 5});
  CHECK(sel(3, 4) == t(3, 4, 5));
  auto p = t.permute(Shape<3>{2, 0, 1});
  CHECK(p.shape() == Shape<3>{6, 4, 5});
  for_each_index(p.shape(), [&](const auto& i) { CHECK(elem(p, i) == t(i[1], i[2], i[0])); });
  auto tr = t.transpose(0, -1);
  CHECK(tr.shape() == Shape<3>{6, 5, 4});
  CHECK(tr(5, 4, 3) == t(3, 4, 5));
  Tensor<int, 2> m = lrt::iota(Shape<2>{2, 3}, 0);
  CHECK(m.t()(2, 1) == m(1, 2));
  CHECK_THROWS_WITH_AS(t.slice(3, 0, 1), "[slice] axis 3 out of range for rank 3", lrt::Error);
  CHECK_THROWS_WITH_AS(t.slice(0, 0, 1, 0), "[slice] step must be >= 1, got 0", lrt::Error);
  CHECK_THROWS_WITH_AS(t.select(0, 4), "[select] index 4 out of bounds for axis 0 of shape (4, 5, 6)", lrt::Error);
  CHECK_THROWS_WITH_AS(t.permute(Shape<3>{0, 0, 1}), "[permute] invalid permutation (0, 0, 1) for rank 3", lrt::Error);
}

TEST_CASE("reshape and unsqueeze") {
  Tensor<int, 3> t = lrt::iota(Shape<3>{2, 3, 4}, 0);
  auto r = t.reshape(Shape<2>{6, 4});
  CHECK(r(5, 3) == 23);
  auto flat = t.reshape(Shape<1>{24});
  CHECK(flat(17) == 17);
  CHECK_THROWS_WITH_AS(t.reshape(Shape<2>{5, 5}),
                       "[reshape] cannot reshape (2, 3, 4) (24 elements) to (5, 5) (25 elements)", lrt::Error);
  CHECK_THROWS_AS(t.transpose(0, 1).reshape(Shape<1>{24}), lrt::Error);
  Tensor<int, 1> c = lrt::contiguous(t.transpose(0, 2)).reshape(Shape<1>{24});
  CHECK(c(1) == t(1, 0, 0));
  auto u = t.unsqueeze(1);
  CHECK(u.shape() == Shape<4>{2, 1, 3, 4});
  CHECK(u(1, 0, 2, 3) == t(1, 2, 3));
  CHECK(u.is_contiguous());
  auto u2 = t.unsqueeze(-1);
  CHECK(u2.shape() == Shape<4>{2, 3, 4, 1});
  CHECK(u2(1, 1, 1, 0) == t(1, 1, 1));
  // a size-1 axis broadcasts in expressions: (2,1,3,4) + (5,1,1) -> (2,5,3,4)
  Tensor<int, 3> col = lrt::iota(Shape<3>{5, 1, 1}, 100, 100);
  Tensor<int, 4> b = u + col;
  CHECK(b.shape() == Shape<4>{2, 5, 3, 4});
  CHECK(b(1, 4, 2, 3) == t(1, 2, 3) + 500);
}

TEST_CASE("views assign element-wise and do not rebind") {
  Tensor<float, 2> a(Shape<2>{2, 2}), b = Tensor<float, 2>::full(Shape<2>{2, 2}, 3.f);
  TensorView<float, 2> va = a.view();
  va = b.view();  // writes a's elements
  CHECK(a(1, 1) == 3.f);
  CHECK(va.data() == a.data());
  TensorView<const float, 2> cv = a.view();  // mutable -> const conversion
  CHECK(cv(0, 1) == 3.f);
}

TEST_CASE("to<cpu> copies and keeps values; contiguous() packs a view") {
  Tensor<double, 2> a = lrt::iota(Shape<2>{3, 4}, 0.0);
  auto b = lrt::to<lrt::cpu::Device>(a);
  CHECK(b.data() != a.data());
  CHECK(equal(a.view(), b.view()));
  auto c = lrt::to<lrt::cpu::Device>(a.t());
  CHECK(c.shape() == Shape<2>{4, 3});
  CHECK(c(3, 2) == a(2, 3));
  CHECK(c.is_contiguous());
}

// ---- fmt formatting of shapes and tensors; error type and messages (was test_format.cpp)
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
  CHECK(fmt::format("{}", m) == "[[0, 1],\n [2, 3],\n [4, 5],\n ...,\n [10, 11],\n [12, 13],\n [14, 15]]");
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

}  // namespace test_tensor
