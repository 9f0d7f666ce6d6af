// tools.runtime_api: the runtime's decoding API (lrt/runtime/decoding.hpp) as a program that
// includes only its light header and links the runtime library: the table holds the build's
// variants; rows decode a checkpoint (two rows fed the same tokens give the same bits; a row's
// logits do not depend on a row stepping beside it); bad use is one lrt::Error saying what to do
// (in a build without every pair, a checkpoint of a missing variant too); the text side
// (lrt/runtime/text.hpp): a byte checkpoint's tokenizer, and draws that follow their seed and
// position, greedy the argmax (BPE: tools.server and tools.damaged_checkpoints, through lrt-server
// and the C API against lrt-generate).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <lrt/runtime/decoding.hpp>
#include <lrt/runtime/text.hpp>

#include "runtime_test_util.hpp"

namespace {

using lrt::index_t;
const std::string data_dir = LRT_TEST_DATA_DIR;
const std::string baseline = data_dir + "/pre_roster/baseline_standard.safetensors";
const std::string lrt_file = data_dir + "/pre_roster/lrt_multirefine2.safetensors";
const std::string src1 = data_dir + "/pre_roster/src1_interleaved2.safetensors";  // lrt-src1: not a LeanVariant

using runtime_test::error_of;

/// The checkpoints the rows' cases decode: baseline and lrt, and lrt-src1 where the build has it.
std::vector<std::string> decoded_files() {
#if defined(LRT_TEST_ALL_PAIRS)
  return {baseline, lrt_file, src1};
#else
  return {baseline, lrt_file};
#endif
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_CASE("the table holds lrt::LeanVariants and the variants of the build's pairs") {
  const std::vector<lrt::VariantStructure> v = lrt::runtime::decoding_variants();
  const auto has = [&](lrt::VariantStructure s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  CHECK(has(lrt::structure_of<lrt::variants::Baseline>()));
  CHECK(has(lrt::structure_of<lrt::variants::Lrt>()));
  CHECK(has(lrt::structure_of<lrt::variants::LrtRelease>()));
#if defined(LRT_TEST_ALL_PAIRS)  // a build with every pair of examples/tools/registry
  CHECK(has(lrt::structure_of<lrt::variants::KVOnly>()));
  CHECK(has(lrt::structure_of<lrt::variants::ResidualOnly>()));
  CHECK(has(lrt::VariantStructure{lrt::Injection::Both, lrt::Projection::Shared, 2}));
  CHECK(lrt::runtime::decoding_variant_names().find("lrt-src2") != std::string::npos);
#endif
  // One entry per structure, however many pairs share it.
  for (std::size_t i = 0; i < v.size(); ++i)
    for (std::size_t j = i + 1; j < v.size(); ++j) CHECK_FALSE(v[i] == v[j]);
}

TEST_CASE("rows of a checkpoint: the same tokens give the same bits, beside other rows or alone") {
  for (const std::string& file : decoded_files()) {
    CAPTURE(file);
    lrt::runtime::DecodingModel m = lrt::runtime::open_decoding(file, {.rows = 3, .capacity = 0});
    REQUIRE(m.decoding != nullptr);
    CHECK(m.decoding->rows() == 3);
    CHECK(m.decoding->structure() == m.structure);
    const index_t bos = m.config.bos();
    const std::vector<index_t> prompt{bos, 'T', 'h', 'e'}, other{bos, 'x'};
    const index_t a = m.decoding->join(prompt);
    const index_t b = m.decoding->join(other);
    const index_t c = m.decoding->join(prompt);
    CHECK(a != b);
    CHECK(a != c);
    CHECK(b != c);
    CHECK(same_bits(m.decoding->logits(a), m.decoding->logits(c)));
    CHECK(m.decoding->position(a) == 4);
    // a and c step together with b; then c steps alone: a's and c's logits agree after each.
    const index_t ab[] = {a, b}, t2[] = {' ', 'y'};
    m.decoding->step(ab, t2);
    const index_t tc = ' ';
    m.decoding->step({&c, 1}, {&tc, 1});
    CHECK(same_bits(m.decoding->logits(a), m.decoding->logits(c)));
    CHECK_FALSE(same_bits(m.decoding->logits(a), m.decoding->logits(b)));
    CHECK(m.decoding->position(c) == 5);
    m.decoding->leave(b);
    CHECK(m.decoding->join(other) == b);  // the freed row is taken again
  }
}

TEST_CASE("a row joined from saved position states continues with the bits of the row they came from") {
  for (const std::string& file : decoded_files()) {
    CAPTURE(file);
    lrt::runtime::DecodingModel m = lrt::runtime::open_decoding(file, {.rows = 3, .capacity = 0});
    lrt::runtime::Decoding& d = *m.decoding;
    const index_t S = d.position_state_size(), L = m.config.n_layer, D = m.config.kv_dim();
    const bool memory = m.structure.recurrent();
    CHECK(S == 2 * L * D + (memory ? m.config.n_embd : 0));
    // 40 tokens, past the window of T = 16: the caches slide, the ring turns. A BOS in the middle
    // (position 20) cuts the memory there.
    std::vector<index_t> tokens{m.config.bos()};
    const std::string text = "The quick brown fox j\x01umps over the lazy dog again";
    for (std::size_t i = 0; tokens.size() < 40; ++i)
      tokens.push_back(tokens.size() == 20 ? m.config.bos() : static_cast<unsigned char>(text[i % text.size()]));
    // The reference row: every position's state and the logits after it.
    std::vector<std::vector<float>> state, logits;
    const index_t a = d.join({tokens.data(), 1});
    for (std::size_t p = 0; p < tokens.size(); ++p) {
      if (p > 0) d.step({&a, 1}, {&tokens[p], 1});
      state.emplace_back(static_cast<std::size_t>(S));
      lrt::throw_if_error(d.try_save_position(a, state.back()));
      logits.emplace_back(d.logits(a).begin(), d.logits(a).end());
    }
    const auto pointers = [&](const std::vector<std::vector<float>>& from, std::size_t n) {
      std::vector<const float*> out;
      for (std::size_t p = 0; p < n; ++p) out.push_back(from[p].data());
      return out;
    };
    // Joined at q from the first q states, then fed the rest (beside another row): the same bits.
    const index_t b = d.join({tokens.data(), 2});
    for (const std::size_t q : {std::size_t{1}, std::size_t{5}, std::size_t{16}, std::size_t{17}, std::size_t{21},
                                std::size_t{33}, std::size_t{39}}) {
      CAPTURE(q);
      index_t c = -1;
      const auto ptr = pointers(state, q);
      lrt::throw_if_error(d.try_join_state({tokens.data(), q}, ptr, c));
      CHECK(d.position(c) == static_cast<index_t>(q));
      bool same = true;
      for (std::size_t p = q; p < tokens.size(); ++p) {
        const index_t rows[] = {c, b}, toks[] = {tokens[p], 'x'};
        d.step(rows, toks);
        same = same && same_bits(d.logits(c), logits[p]);
      }
      CHECK(same);
      d.leave(c);
    }
    // The deliberate break: the keys and values without the memory (the source states zeroed).
    if (memory) {
      std::vector<std::vector<float>> broken = state;
      for (auto& s : broken) std::fill(s.begin() + 2 * L * D, s.end(), 0.0f);
      index_t c = -1;
      const std::size_t q = 33;
      lrt::throw_if_error(d.try_join_state({tokens.data(), q}, pointers(broken, q), c));
      bool same = true;
      for (std::size_t p = q; p < tokens.size(); ++p) {
        d.step({&c, 1}, {&tokens[p], 1});
        same = same && same_bits(d.logits(c), logits[p]);
      }
      CHECK_FALSE(same);
      d.leave(c);
    }
    // Bad use: each an error that names it, nothing changed.
    const auto msg = [](const lrt::Status& st) { return std::string(st.message()); };
    index_t c = -1;
    std::vector<float> small(static_cast<std::size_t>(S - 1));
    CHECK(msg(d.try_save_position(a, small)).find("a position's state has " + std::to_string(S)) != std::string::npos);
    CHECK(msg(d.try_save_position(2, state[0])).find("row 2 holds no position") != std::string::npos);
    const auto two = pointers(state, 2);
    CHECK(msg(d.try_join_state({tokens.data(), 3}, two, c)).find("got 2 states for 3 tokens") != std::string::npos);
    CHECK(msg(d.try_join_state({}, {}, c)).find("the prompt is empty") != std::string::npos);
    CHECK(c == -1);
  }
}

TEST_CASE("the text side: a byte checkpoint's tokenizer and the draws") {
  lrt::runtime::DecodingModel m = lrt::runtime::open_decoding(baseline);
  REQUIRE(m.bpe == nullptr);
  const lrt::runtime::Text text(m.bpe);
  CHECK(text.is_bytes());
  CHECK(text.vocab_size() == 257);
  std::vector<index_t> ids{m.config.bos()};
  text.encode("H\xc3\xa9!", ids);  // appended, bytes as ids
  CHECK(ids == std::vector<index_t>{m.config.bos(), 'H', 0xc3, 0xa9, '!'});
  CHECK(text.token_text('H') == "H");
  CHECK(text.token_text(0xa9) == std::string(1, '\xa9'));
  CHECK(text.token_text(256).empty());  // BOS: no bytes
  CHECK(text.token_text(-1).empty());
  CHECK(text.token_text(m.config.vocab_size).empty());

  const index_t row = m.decoding->join(ids);
  const std::span<const float> logits = m.decoding->logits(row);
  const index_t argmax = std::max_element(logits.begin(), logits.end()) - logits.begin();
  const index_t at = m.decoding->position(row);
  CHECK(lrt::runtime::sample(logits, {.temperature = 0}, at) == argmax);
  // A draw is its seed's and its position's: the same pair draws the same token; among 16 seeds
  // at temperature 2 (a flat distribution) not all draw the same one.
  const lrt::runtime::Sampling hot{.temperature = 2.0, .seed = 7};
  CHECK(lrt::runtime::sample(logits, hot, at) == lrt::runtime::sample(logits, hot, at));
  std::vector<index_t> drawn;
  for (std::uint64_t seed = 0; seed < 16; ++seed)
    drawn.push_back(lrt::runtime::sample(logits, {.temperature = 2.0, .seed = seed}, at));
  CHECK(std::count(drawn.begin(), drawn.end(), drawn[0]) < 16);
  CHECK(lrt::runtime::sample(logits, {.temperature = 1.0, .top_k = 1, .seed = 3}, at) == argmax);
  CHECK(error_of([&] { lrt::runtime::sample(logits, {.temperature = -1}, at); }).find("temperature must be >= 0") !=
        std::string::npos);
  CHECK(error_of([&] { lrt::runtime::sample(logits, {.top_p = 0}, at); }).find("top_p must be in (0, 1]") !=
        std::string::npos);
  CHECK(error_of([&] { lrt::runtime::sample({}, {}, at); }).find("empty logits") != std::string::npos);
}

TEST_CASE("bad use is one lrt::Error that says what to do") {
  lrt::runtime::DecodingModel m = lrt::runtime::open_decoding(baseline, {.rows = 2, .capacity = 8});
  const index_t row = 1, tok = 'a';
  CHECK(error_of([&] {
          m.decoding->step({&row, 1}, {&tok, 1});
        }).find("row 1 is not in use (join() it first)") != std::string::npos);
  CHECK(error_of([&] { m.decoding->leave(0); }).find("row 0 is not in use") != std::string::npos);
  const std::vector<index_t> prompt{m.config.bos(), 'a'};
  const index_t r0 = m.decoding->join(prompt);
  m.decoding->join(prompt);
  CHECK(error_of([&] { m.decoding->join(prompt); }).find("every row is in use") != std::string::npos);
  const index_t far = m.config.vocab_size;
  CHECK(error_of([&] { m.decoding->step({&r0, 1}, {&far, 1}); }).find(std::to_string(far)) != std::string::npos);
  for (int i = 0; i < 6; ++i) m.decoding->step({&r0, 1}, {&tok, 1});  // positions 2..7
  CHECK(error_of([&] { m.decoding->step({&r0, 1}, {&tok, 1}); }).find("past the capacity 8") != std::string::npos);

#if !defined(LRT_TEST_ALL_PAIRS)
  // A build without the lrt-src1 pair: its checkpoint is refused, naming what the build decodes.
  try {
    lrt::runtime::open_decoding(src1);
    FAIL("a checkpoint of a variant this build lacks was opened");
  } catch (const lrt::runtime::VariantNotBuilt& e) {
    CHECK(std::string(e.what()).find("holds variant both/shared/block1; this program decodes baseline, lrt") !=
          std::string::npos);
  }
#endif
  const std::string missing = error_of([] { lrt::runtime::open_decoding("/nonexistent/model.safetensors"); });
  CHECK(missing.find("/nonexistent/model.safetensors") != std::string::npos);
  CHECK(error_of([] { lrt::runtime::open_decoding(baseline, {.rows = 0}); }).find("rows must be in [1, 2^20]") !=
        std::string::npos);
  CHECK(error_of([] { lrt::runtime::open_decoding(baseline, {.capacity = -2}); }).find("capacity must be >= -1") !=
        std::string::npos);
  // A folder stands for its model.safetensors.
  CHECK(error_of([] { lrt::runtime::open_decoding(data_dir); }).find(data_dir + "/model.safetensors") !=
        std::string::npos);
}

}  // namespace
