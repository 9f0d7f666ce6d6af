// The bookkeeping both decoders share (decode/decode_state.hpp) against its definitions: the
// cache window keeps every position a query reads and moves only when the buffer is full; the
// interleaved subsets partition the positions by p mod min(S, P); the fixed-point frontier
// follows the first state that moved; the pass loop runs pass 0 then each non-empty subset and
// says which pass is the last; the memory rule cuts at a BOS; the slide and the loads copy what
// base() says; both decoders word a bad prompt and a bad step alike.
#include <lrt/decode/decode_state.hpp>

#include <set>
#include <span>
#include <string>
#include <utility>
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

TEST_CASE("decode state: the pass loop runs pass 0 over all, then each non-empty subset, the last one marked") {
  const std::vector<index_t> all{0, 1, 2, 3, 4};
  const std::vector<std::vector<index_t>> subsets{{0, 2, 4}, {}, {1, 3}, {}};
  std::vector<std::pair<std::vector<index_t>, bool>> passes;  // (positions, memory)
  std::vector<bool> lasts;
  lrt::run_subset_passes(
      all, static_cast<index_t>(subsets.size()),
      [&](index_t i) { return std::span<const index_t>(subsets[static_cast<std::size_t>(i)]); },
      [&](std::span<const index_t> P, bool memory) {
        passes.emplace_back(std::vector<index_t>(P.begin(), P.end()), memory);
      },
      [&](std::span<const index_t>, bool last) { lasts.push_back(last); });
  REQUIRE(passes.size() == 3);
  CHECK(passes[0] == std::make_pair(all, false));  // pass 0: zero memory
  CHECK(passes[1] == std::make_pair(subsets[0], true));
  CHECK(passes[2] == std::make_pair(subsets[2], true));
  CHECK(lasts == std::vector<bool>{false, false, true});  // the empty subset 3 is not the last pass
  passes.clear(), lasts.clear();
  lrt::run_subset_passes(  // no subsets (S = 0, or no memory): pass 0 alone, and it is the last
      all, 0, [&](index_t) { return std::span<const index_t>(); },
      [&](std::span<const index_t> P, bool memory) {
        passes.emplace_back(std::vector<index_t>(P.begin(), P.end()), memory);
      },
      [&](std::span<const index_t>, bool last) { lasts.push_back(last); });
  CHECK(passes.size() == 1);
  CHECK(lasts == std::vector<bool>{true});
}

TEST_CASE("decode state: the memory rule reads s_{p-k}, none before k nor across a BOS") {
  lrt::ModelConfig c;
  c.vocab_size = 10, c.mem_offset = 2, c.reset_at_bos = true, c.bos_id = 9;
  const std::vector<index_t> tok{1, 2, 3, 9, 4, 5, 6};
  const auto at = [&](index_t j) { return tok[static_cast<std::size_t>(j)]; };
  const std::vector<index_t> want{-1, -1, 0, -1, -1, 3, 4};  // 3: the BOS itself; 4: BOS at 3 in 3..4
  for (index_t p = 0; p < 7; ++p) CHECK(lrt::memory_source(c, p, at) == want[static_cast<std::size_t>(p)]);
  c.reset_at_bos = false;
  CHECK(lrt::memory_source(c, 3, at) == 1);
  CHECK(lrt::memory_source(c, 4, at) == 2);
}

TEST_CASE("decode state: the slide and the loads copy what base() says") {
  const lrt::KvWindow w{3, 6};        // window 2: 3 keys in 6 slots
  std::vector<index_t> slots(6, -1);  // which position each slot holds
  for (index_t t = 0; t < 40; ++t) {
    w.slide(t, [&](index_t from, index_t count) {
      for (index_t i = 0; i < count; ++i)
        slots[static_cast<std::size_t>(i)] = slots[static_cast<std::size_t>(from + i)];
    });
    slots[static_cast<std::size_t>(t - w.base(t))] = t;
    for (index_t p = std::max<index_t>(0, t - 2); p <= t; ++p)
      CHECK(slots[static_cast<std::size_t>(p - w.base(t))] == p);
    std::vector<index_t> loaded(6, -1);  // a row loaded with positions 0..t holds the same slots
    w.load(t + 1, [&](index_t lo, index_t count) {
      for (index_t i = 0; i < count; ++i) loaded[static_cast<std::size_t>(i)] = lo + i;
    });
    for (index_t s = 0; s <= t - w.base(t); ++s)
      CHECK(loaded[static_cast<std::size_t>(s)] == slots[static_cast<std::size_t>(s)]);
  }
  std::vector<std::pair<index_t, index_t>> ring;
  lrt::ring_load(3, 7, [&](index_t p, index_t slot) { ring.emplace_back(p, slot); });
  CHECK(ring == std::vector<std::pair<index_t, index_t>>{{4, 1}, {5, 2}, {6, 0}});
}

TEST_CASE("decode state: one wording for a bad prompt and a bad step") {
  lrt::ModelConfig c;
  c.vocab_size = 10;
  const std::vector<index_t> ok{1, 2, 3}, bad{1, 12}, none;
  using M = lrt::PrefillMode;
  CHECK(lrt::prompt_status("decoder", c, ok, M{}, 0).ok());
  CHECK(std::string(lrt::prompt_status("decoder", c, none, M{}, 0, 0, 1).message()) ==
        "[decoder] the prompt of row 1 is empty");
  CHECK(std::string(lrt::prompt_status("lean decoder", c, none, M{}, 0).message()) ==
        "[lean decoder] the prompt is empty");
  CHECK(std::string(lrt::prompt_status("decoder", c, ok, M{}, 2).message()) ==
        "[decoder] the prompt has 3 tokens, more than the capacity 2");
  CHECK(std::string(lrt::prompt_status("decoder", c, bad, M{}, 0).message()) ==
        "[decoder] token id 12 outside the vocabulary [0, 10)");
  CHECK(std::string(lrt::prompt_status("decoder", c, ok, M{M::Kind::Interleaved, 0, 0}, 0).message()) ==
        "[decoder] interleaved prefill needs S >= 1 refinement passes, got 0");
  CHECK(lrt::step_status("decoder", c, 0, 4, 3, 0).ok());
  const lrt::Status full = lrt::step_status("lean decoder", c, 2, 5, 3, 5);
  CHECK(full.code() == lrt::StatusCode::state);
  CHECK(std::string(full.message()) ==
        "[lean decoder] context full: position 5 of row 2 is past the capacity 5 (capacity 0: no limit)");
  CHECK(lrt::step_status("decoder", c, 0, 0, -1, 0).code() == lrt::StatusCode::invalid_argument);
}

}  // namespace test_decode_state
