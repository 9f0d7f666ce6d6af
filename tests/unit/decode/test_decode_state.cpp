// The bookkeeping both decoders share (decode/decode_state.hpp) against its definitions: the
// cache window keeps every position a query reads and moves only when the buffer is full; the
// interleaved subsets partition the positions by p mod min(S, P); the fixed-point frontier
// follows the first state that moved.
#include <lrt/decode/decode_state.hpp>

#include <set>
#include <vector>

#include "../test_util.hpp"

namespace test_decode_state {

using lrt::index_t;

TEST_CASE("decode state: the KV window holds positions t - window .. t in its slots, moving only when full") {
  for (const index_t window : {index_t{1}, index_t{3}, index_t{8}})
    for (const index_t capacity : {index_t{0}, window + 1, 2 * window + 2, index_t{100}}) {
      CAPTURE(window);
      CAPTURE(capacity);
      const index_t W = window + 1;
      const lrt::KvWindow w{W, capacity > 0 ? std::min(capacity, 2 * W) : 2 * W};
      const index_t last = capacity > 0 ? capacity : 10 * W;
      index_t moves = 0;
      for (index_t t = 0; t < last; ++t) {
        const index_t b = w.base(t), lo = t - std::min(t, window);
        CHECK(b <= lo);          // the oldest key a query at t reads is in the buffer
        CHECK(t - b < w.slots);  // and so is the newest
        if (t > 0) {
          CHECK(w.shift(t) == b - w.base(t - 1));
          if (w.shift(t) > 0) {
            ++moves;
            CHECK(w.base(t - 1) + w.slots == t);  // it moves only when t would fall off the end
            CHECK(w.shift(t) >= W - 1);           // the moved span never overlaps itself
          }
        }
      }
      if (capacity == 0) CHECK(moves >= 1);  // the test can fail: rows longer than the buffer slide
    }
}

TEST_CASE("decode state: the ring's slots and the interleaved subsets") {
  for (index_t k : {1, 2, 5})
    for (index_t t = k; t < 30; ++t) CHECK(lrt::ring_read_slot(k, t) == lrt::ring_write_slot(k, t - k));
  for (index_t P : {1, 5, 12})
    for (index_t S : {1, 2, 3, 7, 20}) {
      CAPTURE(P);
      CAPTURE(S);
      const index_t n = lrt::interleaved_subset_count(P, S);
      CHECK(n == std::min(P, S));
      std::set<index_t> seen;
      std::vector<index_t> out(static_cast<std::size_t>(P));
      for (index_t i = 0; i < n; ++i) {
        const index_t m = lrt::interleaved_subset(P, S, i, out.data());
        CHECK(m >= 1);  // none empty
        for (index_t j = 0; j < m; ++j) {
          CHECK(out[static_cast<std::size_t>(j)] % n == i);
          if (j > 0) CHECK(out[static_cast<std::size_t>(j)] > out[static_cast<std::size_t>(j - 1)]);
          CHECK(seen.insert(out[static_cast<std::size_t>(j)]).second);
        }
      }
      CHECK(static_cast<index_t>(seen.size()) == P);  // every position once
    }
}

TEST_CASE("decode state: the fixed-point frontier") {
  const index_t d = 2, P = 6, k = 2;
  std::vector<double> before(P * d, 1.0), now = before;
  bool converged = false;
  CHECK(lrt::fixed_point_frontier(now.data(), before.data(), d, P, 2, k, 0.0, converged) == P);
  CHECK(converged);
  now[3 * d + 1] = 1.0 + 1e-9;  // position 3 moved a little
  CHECK(lrt::fixed_point_frontier(now.data(), before.data(), d, P, 2, k, 0.0, converged) == 3 + k);
  CHECK_FALSE(converged);
  CHECK(lrt::fixed_point_frontier(now.data(), before.data(), d, P, 2, k, 1e-6, converged) == P);  // within tolerance
  CHECK(converged);
  now[4 * d] = 2.0;  // position 4 moved by more than the tolerance
  CHECK(lrt::fixed_point_frontier(now.data(), before.data(), d, P, 2, k, 1e-6, converged) == 4 + k);
  CHECK_FALSE(converged);
  now[1 * d] = 5.0;  // below the frontier: not looked at
  CHECK(lrt::fixed_point_frontier(now.data(), before.data(), d, P, 2, k, 0.0, converged) == 3 + k);
}

}  // namespace test_decode_state
