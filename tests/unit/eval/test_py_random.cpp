// lrt/eval/py_random.hpp: PyRandom against CPython 3.11's random.Random, draw for draw. The
// reference (tests/data/core/random_draws.txt) is what scripts/core_reference/random_draws.py
// printed: getrandbits, _randbelow, shuffle and sample (both algorithms) over one- to two-word seeds.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <lrt/eval/py_random.hpp>

namespace test_py_random {

using lrt::eval::PyRandom;

/// Random(seed) for a seed as the file writes it (a negative one, or one up to 2**64 - 1).
PyRandom seeded(const std::string& s) {
  if (!s.empty() && s[0] == '-') return PyRandom(std::stoll(s));
  return PyRandom(std::stoull(s));
}

std::vector<std::uint64_t> rest_of(std::istringstream& in) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t x; in >> x;) v.push_back(x);
  return v;
}

TEST_CASE("PyRandom replays CPython's draws (tests/data/core/random_draws.txt)") {
  const std::string path = LRT_TEST_DATA_DIR "/core/random_draws.txt";
  std::ifstream file(path);
  REQUIRE_MESSAGE(file.good(), "cannot open ", path);
  std::map<std::string, int> lines;  // kind -> lines replayed
  std::size_t checks = 0;
  std::string text;
  while (std::getline(file, text)) {
    if (text.empty() || text[0] == '#') continue;
    std::istringstream in(text);
    std::string kind, seed;
    in >> kind >> seed;
    CAPTURE(text);
    PyRandom rng = seeded(seed);
    if (kind == "getrandbits") {
      int k = 0;
      in >> k;
      const auto want = rest_of(in);
      REQUIRE(want.size() == 5);
      for (auto w : want) CHECK(rng.getrandbits(k) == w);
      checks += want.size();
    } else if (kind == "randbelow") {
      std::uint64_t n = 0;
      in >> n;
      const auto want = rest_of(in);
      REQUIRE(want.size() == 5);
      for (auto w : want) CHECK(rng.randbelow(n) == w);
      checks += want.size();
    } else if (kind == "skip") {
      std::uint64_t skip = 0;
      in >> skip;
      for (std::uint64_t i = 0; i < skip; ++i) rng.getrandbits(32);
      const auto want = rest_of(in);
      REQUIRE(want.size() == 3);
      for (auto w : want) CHECK(rng.getrandbits(32) == w);
      checks += want.size();
    } else if (kind == "shuffle") {
      std::size_t n = 0;
      in >> n;
      std::vector<std::uint64_t> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = i;
      rng.shuffle(x);
      const auto want = rest_of(in);
      CHECK(x == want);
      ++checks;
    } else if (kind == "sample") {
      std::uint64_t n = 0, idx = 0;
      std::size_t k = 0;
      std::string algo;
      in >> n >> idx >> k >> algo;
      std::vector<std::uint64_t> population;
      for (std::uint64_t i = 0; i < n; ++i)
        if (i != idx) population.push_back(i);
      REQUIRE((algo == "pool" || algo == "set"));
      CHECK((population.size() <= PyRandom::sample_setsize(k)) == (algo == "pool"));
      const auto got = rng.sample(population, k);
      const auto want = rest_of(in);
      REQUIRE(want.size() == k);
      CHECK(got == want);
      lines[kind + " " + algo]++;  // both algorithms must appear
      checks += 2;
    } else {
      FAIL("unknown line kind: ", kind);
    }
    lines[kind]++;
  }
  const int total = lines["getrandbits"] + lines["randbelow"] + lines["skip"] + lines["shuffle"] + lines["sample"];
  MESSAGE(total, " reference lines, ", checks, " checks");
  for (const char* kind : {"getrandbits", "randbelow", "skip", "shuffle", "sample", "sample pool", "sample set"}) {
    CAPTURE(kind);
    CHECK(lines[kind] > 0);
  }
}

TEST_CASE("PyRandom: errors, sample's setsize, MT19937's plain seeding") {
  PyRandom rng(0);
  CHECK_THROWS_AS(rng.randbelow(0), lrt::Error);
  CHECK_THROWS_WITH_AS(rng.sample(std::vector<int>{1, 2, 3}, 4), "[sample] sample larger than population: k = 4, n = 3",
                       lrt::Error);
  CHECK_THROWS_AS(rng.getrandbits(65), lrt::Error);
  CHECK(rng.getrandbits(0) == 0);
  CHECK(rng.sample(std::vector<int>{1, 2, 3}, 3).size() == 3);
  CHECK(rng.sample(std::vector<int>{}, 0).empty());

  // 21, plus 4 ** ceil(log(3k, 4)) for k > 5: 3k = 63 stays under 4**3, 66 passes it.
  CHECK(PyRandom::sample_setsize(5) == 21);
  CHECK(PyRandom::sample_setsize(6) == 21 + 64);
  CHECK(PyRandom::sample_setsize(21) == 21 + 64);
  CHECK(PyRandom::sample_setsize(22) == 21 + 256);
  CHECK(PyRandom::sample_setsize(100) == 21 + 1024);

  // init_genrand alone is std::mt19937's seeding: 3499211612 first for the default seed 5489.
  rng.init_genrand(5489);
  std::mt19937 ref(5489);
  CHECK(rng.genrand_uint32() == 3499211612U);
  ref();
  for (int i = 1; i < 2000; ++i) CHECK(rng.genrand_uint32() == ref());

  // Negative seeds seed as their absolute value; the int and unsigned constructors agree.
  PyRandom a(-12345), b(12345), c(std::uint64_t{12345});
  for (int i = 0; i < 10; ++i) {
    const auto x = a.genrand_uint32();
    CHECK(x == b.genrand_uint32());
    CHECK(x == c.genrand_uint32());
  }
}

}  // namespace test_py_random
