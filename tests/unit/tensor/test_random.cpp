// Philox4x32-10 known answers, uniform/normal statistics, and stream positions (seed, offset).
#include "../test_util.hpp"

namespace test_random {

using namespace lrt_test;
using lrt::Philox;
using lrt::Shape;
using lrt::Tensor;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors") {
  struct Kat {
    std::uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const auto b = Philox::generate(k.ctr, k.key);
    for (int i = 0; i < 4; ++i) CHECK(b.v[i] == k.out[i]);
  }
  // lrt's stream word n is lane n % 4 of block n / 4 under key = seed
  CHECK(Philox::word(0, 0) == 0x6627e8d5u);
  CHECK(Philox::word(0, 3) == 0x9b00dbd8u);
}

TEST_CASE("uniform and normal fills have the right moments") {
  const index_t n = 1 << 20;
  Tensor<float, 1> u = lrt::uniform<float>(Shape<1>{n}, 1234);
  CHECK(lrt::min(u) >= 0.f);
  CHECK(lrt::max(u) < 1.f);
  Tensor<double, 1> ud = lrt::cast<double>(u);
  const double mu = lrt::mean(ud), var = lrt::mean(lrt::square(ud - mu));
  CHECK(mu == doctest::Approx(0.5).epsilon(0.003));
  CHECK(var == doctest::Approx(1.0 / 12).epsilon(0.01));
  Tensor<double, 1> z = lrt::normal<double>(Shape<1>{n}, 99, 0, 1.0, 2.0);  // N(1, 4)
  const double zm = lrt::mean(z), zv = lrt::mean(lrt::square(z - zm));
  const double k4 = lrt::mean(lrt::square(lrt::square(z - zm))) / (zv * zv);
  CHECK(std::abs(zm - 1.0) < 0.01);
  CHECK(zv == doctest::Approx(4.0).epsilon(0.01));
  CHECK(k4 == doctest::Approx(3.0).epsilon(0.03));
  Tensor<float, 2> r = lrt::uniform<float>(Shape<2>{100, 100}, 5, 0, -3.f, 3.f);
  CHECK(lrt::min(r) >= -3.f);
  CHECK(lrt::max(r) < 3.f);
}

TEST_CASE("element i of a fill is stream position offset + i, independent of shape") {
  Tensor<float, 1> whole = lrt::uniform<float>(Shape<1>{100}, 7);
  Tensor<float, 2> tail = lrt::uniform<float>(Shape<2>{5, 6}, 7, 37);
  for (index_t i = 0; i < 30; ++i) CHECK(tail.data()[i] == whole(37 + i));
  Tensor<double, 1> nw = lrt::normal<double>(Shape<1>{64}, 3);
  Tensor<double, 1> nt = lrt::normal<double>(Shape<1>{21}, 3, 43);
  for (index_t i = 0; i < 21; ++i) CHECK(nt(i) == nw(43 + i));
  // a strided destination receives the same values in row-major order of the view
  Tensor<float, 2> big(Shape<2>{6, 5});
  big.t() = lrt::uniform<float>(Shape<2>{5, 6}, 7);
  for (index_t i = 0; i < 5; ++i)
    for (index_t j = 0; j < 6; ++j) CHECK(big(j, i) == whole(i * 6 + j));
  // different seeds give different streams
  Tensor<float, 1> other = lrt::uniform<float>(Shape<1>{100}, 8);
  CHECK(!equal(other.view(), whole.view()));
}

TEST_CASE("Generator draws consecutive stream segments and resumes from its offset") {
  lrt::Generator g(42);
  Tensor<float, 1> a = g.uniform<float>(Shape<1>{10});
  Tensor<float, 2> b = g.uniform<float>(Shape<2>{3, 4});
  CHECK(g.offset() == 22);
  Tensor<float, 1> ref = lrt::uniform<float>(Shape<1>{22}, 42);
  for (index_t i = 0; i < 10; ++i) CHECK(a(i) == ref(i));
  for (index_t i = 0; i < 12; ++i) CHECK(b.data()[i] == ref(10 + i));
  lrt::Generator resumed(42, g.offset());
  Tensor<float, 1> c1 = g.normal<float>(Shape<1>{5});
  Tensor<float, 1> c2 = resumed.normal<float>(Shape<1>{5});
  CHECK(equal(c1.view(), c2.view()));
  CHECK(g.offset() == 22 + 8);  // normal draws round up to whole Philox blocks
}

}  // namespace test_random
