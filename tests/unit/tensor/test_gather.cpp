// Gather/scatter along an axis by index lists (the interleaved schedule's position subsets).
#include "../test_util.hpp"

namespace test_gather {

using namespace lrt_test;
using lrt::IndexList;
using lrt::Shape;
using lrt::Tensor;
using IL = IndexList<lrt::cpu::Device>;

TEST_CASE("gather reads the listed rows, on any axis, in expressions") {
  std::mt19937 rng(11);
  for (int rep = 0; rep < 20; ++rep) {
    const Shape<3> s = random_shape<3>(rng, 1, 6);
    Tensor<double, 3> x(s);
    fill_random(x, rng);
    const int axis = int(rng() % 3);
    std::vector<index_t> ids;
    const index_t n = index_t(rng() % 7);
    for (index_t i = 0; i < n; ++i) ids.push_back(index_t(rng() % s[axis]));  // repeats allowed
    const IL idx(ids);
    Tensor<double, 3> g = x.gather(axis, idx) * 2.0 + 1.0;
    Shape<3> gs = s;
    gs[axis] = n;
    REQUIRE(g.shape() == gs);
    for_each_index(gs, [&](const auto& i) {
      auto j = i;
      j[axis] = ids[i[axis]];
      CHECK(elem(g.view(), i) == elem(x.view(), j) * 2.0 + 1.0);
    });
  }
}

TEST_CASE("scatter writes the listed rows and leaves the others") {
  Tensor<float, 2> buf = lrt::iota(Shape<2>{6, 3}, 0.f);  // (T, C)
  const Tensor<float, 2> orig = buf;
  const IL subset = IL::range(1, 6, 2);  // positions p mod 2 == 1
  CHECK(subset.size() == 3);
  Tensor<float, 2> fresh = Tensor<float, 2>::full(Shape<2>{3, 3}, -1.f);
  buf.gather(0, subset) = fresh;
  for (index_t t = 0; t < 6; ++t)
    for (index_t c = 0; c < 3; ++c) CHECK(buf(t, c) == (t % 2 == 1 ? -1.f : orig(t, c)));
  // scatter of an expression that reads the destination through the same list (aliasing)
  buf.gather(0, subset) = buf.gather(0, subset) * 3.f + 1.f;
  CHECK(buf(3, 1) == -2.f);
  // scatter that reads other rows of the same buffer: rows 1,3,5 <- rows 0,2,4 + 100
  const IL even = IL::range(0, 6, 2);
  buf.gather(0, subset) = buf.gather(0, even) + 100.f;
  for (index_t t = 1; t < 6; t += 2)
    for (index_t c = 0; c < 3; ++c) CHECK(buf(t, c) == orig(t - 1, c) + 100.f);
  // broadcasting a row into the selected rows
  Tensor<float, 1> row = lrt::iota(Shape<1>{3}, 7.f);
  buf.gather(0, even) = row;
  CHECK(buf(4, 2) == 9.f);
  // gather on axis 1 of a non-contiguous view
  Tensor<float, 2> m = lrt::iota(Shape<2>{4, 5}, 0.f);
  const IL cols{4, 0};
  Tensor<float, 2> g = m.t().gather(0, cols);  // rows of m^T = columns of m
  CHECK(g.shape() == Shape<2>{2, 4});
  CHECK(g(0, 3) == m(3, 4));
  CHECK(g(1, 2) == m(2, 0));
}

TEST_CASE("index list errors") {
  Tensor<float, 2> buf(Shape<2>{4, 2});
  CHECK_THROWS_WITH_AS(IL({0, -1}), "[index_list] negative index -1", lrt::Error);
  const IL big{0, 4};
  CHECK_THROWS_WITH_AS(buf.gather(0, big), "[gather] index 4 out of bounds for axis 0 of shape (4, 2)", lrt::Error);
  const IL dup{1, 1};
  Tensor<float, 2> two(Shape<2>{2, 2});
  CHECK_THROWS_WITH_AS(buf.gather(0, dup) = two, "[scatter] index list repeats an index: scatter would be ambiguous",
                       lrt::Error);
  const IL ok{0, 1};
  Tensor<float, 2> three(Shape<2>{3, 2});
  CHECK_THROWS_WITH_AS(buf.gather(0, ok) = three, "[scatter] shape mismatch: destination (2, 2) vs expression (3, 2)",
                       lrt::Error);
  CHECK_THROWS_AS(IL::range(0, 4, 0), lrt::Error);
  const IL none = IL::range(3, 3);
  CHECK(none.size() == 0);
  Tensor<float, 2> g = buf.gather(0, none);
  CHECK(g.shape() == Shape<2>{0, 2});
}

}  // namespace test_gather
