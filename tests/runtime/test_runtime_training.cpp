// tools.runtime_api, training: the runtime's models (lrt/runtime/training.hpp) from a program that
// includes only light headers and links the registry's pairs: a model made by pair name trains
// (its loss falls on a repeated text); a run saved and resumed takes the steps of the unbroken run
// bit for bit; a saved checkpoint opens with the same scores and decodes (the lean decoder's
// next-token log-probabilities are the sequential score's, within rounding); a memory-free model
// scores the same in both modes, bits per byte and CORE; bad use is one lrt::Error naming what to do.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <lrt/runtime/decoding.hpp>
#include <lrt/runtime/training.hpp>

#include "runtime_test_util.hpp"

namespace {

using lrt::index_t;
namespace fs = std::filesystem;

/// A fresh folder under the system's temporary folder, removed at the end of its scope.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

using runtime_test::error_of;

lrt::ModelConfig small_config() {
  lrt::ModelConfig c = lrt::preset("tiny");
  c.sequence_len = 32;
  return c;
}

std::vector<std::string> texts() {
  std::string t;
  for (int i = 0; i < 60; ++i) t += "the cat sat on the mat. ";
  return {t, "a dog ran in the park and the cat sat still. " + t.substr(0, 400)};
}

lrt::TrainOptions options(std::int64_t steps) {
  lrt::TrainOptions o;
  o.batch_rows = 4, o.steps = steps, o.seed = 3;
  return o;
}

TEST_CASE("a model made by pair name trains, and its loss falls") {
  const std::vector<std::string> names = lrt::runtime::model_pairs();
  CHECK(std::find(names.begin(), names.end(), "baseline") != names.end());
  CHECK(std::find(names.begin(), names.end(), "lrt") != names.end());
  auto m = lrt::runtime::make_model("lrt", small_config(), 1);
  CHECK(m->pair() == "lrt");
  CHECK(m->schedule() == "interleaved:2");
  CHECK(m->structure() == lrt::structure_of<lrt::variants::Lrt>());
  CHECK(m->pass_factor() == 2.0);  // the zero-memory pass over every position, then each position once more
  CHECK(m->num_params() > 0);
  const auto data = texts();
  auto t = m->train(data, options(12));
  double first = 0, last = 0;
  while (!t->done()) {
    const lrt::runtime::StepReport s = t->step();
    CHECK(std::isfinite(s.loss));
    if (s.step == 0) first = s.loss;
    last = s.loss;
  }
  CHECK(t->steps_done() == 12);
  CHECK(t->tokens_per_step() == 4 * 32);
  CHECK(last < first - 0.5);
}

TEST_CASE("save and resume: the steps of the unbroken run, bit for bit; the checkpoint opens and decodes") {
  const TempDir dir("lrt-runtime-training");
  const auto data = texts();
  const lrt::ModelConfig cfg = small_config();

  auto whole = lrt::runtime::make_model("lrt:chunked:2", cfg, 7);
  auto tw = whole->train(data, options(6));
  std::vector<double> losses;
  std::string at3;
  while (!tw->done()) {
    losses.push_back(tw->step().loss);
    if (tw->steps_done() == 3) at3 = tw->save((dir.path / "run").string());
  }
  CHECK(fs::exists(fs::path(at3) / "model.safetensors"));

  auto again = lrt::runtime::make_model("lrt:chunked:2", cfg, 99);  // another init: the checkpoint's weights win
  auto ta = again->train(data, options(6));
  ta->resume(at3);
  CHECK(ta->steps_done() == 3);
  for (std::size_t i = 3; i < losses.size(); ++i) CHECK(ta->step().loss == losses[i]);

  // The saved weights, opened by path: the pair the checkpoint records, the same scores.
  const std::string file = (dir.path / "model.safetensors").string();
  again->save(file);
  auto opened = lrt::runtime::open_model(file);
  CHECK(opened->pair() == "lrt:chunked:2");
  for (const auto how : {lrt::runtime::Evaluation::parallel, lrt::runtime::Evaluation::sequential}) {
    const lrt::runtime::Score a = again->evaluate(data, how), b = opened->evaluate(data, how);
    CHECK(a.nats == b.nats);
    CHECK(a.bytes == b.bytes);
    CHECK(a.tokens == b.tokens);
    CHECK(a.bits_per_byte() > 0);
  }

  // The same weights decoded token by token: the next-token log-probabilities of one text sum to
  // its sequential score (the lean decoder and the autodiff path agree within rounding).
  const std::string text = "the cat sat on the mat.";
  const lrt::runtime::Score seq = opened->evaluate({&text, 1}, lrt::runtime::Evaluation::sequential);
  lrt::runtime::DecodingModel d = lrt::runtime::open_decoding(file);
  std::vector<index_t> prompt{cfg.bos()};
  const index_t row = d.decoding->join(prompt);
  double nats = 0;
  for (const char ch : text) {
    const auto logits = d.decoding->logits(row);
    const double mx = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (const float l : logits) z += std::exp(double(l) - mx);
    const auto id = static_cast<index_t>(static_cast<unsigned char>(ch));
    nats += mx + std::log(z) - double(logits[std::size_t(id)]);
    d.decoding->step({&row, 1}, {&id, 1});
  }
  CHECK(seq.tokens == index_t(text.size()));
  CHECK(nats == doctest::Approx(seq.nats).epsilon(1e-5));
}

TEST_CASE("without memory, the parallel and sequential scores agree") {
  auto m = lrt::runtime::make_model("baseline", small_config(), 2);
  const auto data = texts();
  auto t = m->train(data, options(3));
  while (!t->done()) t->step();
  const auto p = m->evaluate(data, lrt::runtime::Evaluation::parallel);
  const auto s = m->evaluate(data, lrt::runtime::Evaluation::sequential);
  CHECK(p.tokens == s.tokens);
  CHECK(p.nats == doctest::Approx(s.nats).epsilon(1e-5));
}

TEST_CASE("CORE: every task of the bundle; without memory the two modes decide alike") {
  auto m = lrt::runtime::make_model("baseline", small_config(), 4);
  const std::string bundle = std::string(LRT_TEST_DATA_DIR) + "/core/bundle";
  const lrt::runtime::CoreScore p = m->core(bundle, lrt::runtime::Evaluation::parallel, 6);
  const lrt::runtime::CoreScore s = m->core(bundle, lrt::runtime::Evaluation::sequential, 6);
  REQUIRE(p.tasks.size() == 8);
  REQUIRE(s.tasks.size() == p.tasks.size());
  double mean = 0;
  for (std::size_t i = 0; i < p.tasks.size(); ++i) {
    CAPTURE(p.tasks[i].label);
    CHECK(p.tasks[i].label == s.tasks[i].label);
    CHECK(p.tasks[i].examples >= 1);
    CHECK(p.tasks[i].examples <= 6);
    CHECK(p.tasks[i].accuracy >= 0);
    CHECK(p.tasks[i].accuracy <= 1);
    // The same model read two ways: at most one near-tie decided otherwise by rounding.
    CHECK(std::abs(p.tasks[i].accuracy - s.tasks[i].accuracy) <= 1.0 / double(p.tasks[i].examples) + 1e-12);
    mean += p.tasks[i].centered;
  }
  CHECK(p.core == doctest::Approx(mean / double(p.tasks.size())));
  CHECK(error_of([&] {
          (void)m->core("/nonexistent/bundle", lrt::runtime::Evaluation::parallel);
        }).find("/nonexistent/bundle") != std::string::npos);
}

TEST_CASE("bad use of the model table is one lrt::Error that says what to do") {
  const lrt::ModelConfig cfg = small_config();
  const std::string unknown = error_of([&] { lrt::runtime::make_model("lrt-xyz", cfg); });
  CHECK(unknown.find("'lrt-xyz': no such pair; its pairs are baseline") != std::string::npos);
  CHECK(unknown.find("LRT_RUNTIME_MODEL") != std::string::npos);
  const std::string schedule = error_of([&] { lrt::runtime::make_model("baseline:chunked:3", cfg); });
  CHECK(schedule.find("trains variant baseline with other schedules") != std::string::npos);
  lrt::ModelConfig bad = cfg;
  bad.n_head = 3;  // does not divide n_embd
  CHECK(!error_of([&] { lrt::runtime::make_model("lrt", bad); }).empty());
  auto m = lrt::runtime::make_model("lrt", cfg);
  const std::vector<std::string> none;
  CHECK(error_of([&] { (void)m->evaluate(none, lrt::runtime::Evaluation::parallel); }).find("no text to score") !=
        std::string::npos);
  const std::vector<std::string> tiny{"ab"};
  CHECK(!error_of([&] { (void)m->train(tiny, options(2)); }).empty());  // not one batch of rows
  const auto data = texts();
  CHECK(error_of([&] { (void)m->train(data, options(0)); }).find("TrainOptions::steps (the horizon) must be >= 1") !=
        std::string::npos);
  auto t = m->train(data, options(1));
  t->step();
  CHECK(error_of([&] { t->step(); }).find("the run is at its horizon, 1 of 1 steps") != std::string::npos);

  // A checkpoint of a pair this program lacks: lrt trained with interleaved:3 (its metadata edited
  // in place, same length). It still decodes (decoding needs the variant only), but no model of
  // that pair can be made.
  const TempDir dir("lrt-runtime-unbuilt");
  const std::string file = (dir.path / "model.safetensors").string();
  m->save(file);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    unsigned char n[8] = {};
    f.read(reinterpret_cast<char*>(n), 8);
    std::uint64_t len = 0;  // the safetensors header's length, little-endian
    for (int i = 7; i >= 0; --i) len = len << 8 | n[i];
    std::string head(len, '\0');
    f.read(head.data(), std::streamsize(len));
    const std::size_t at = head.find("\"interleaved:2\"");
    REQUIRE(at != std::string::npos);
    f.clear();
    f.seekp(std::streamoff(8 + at + std::strlen("\"interleaved:")));
    f.put('3');
  }
  CHECK(lrt::runtime::open_decoding(file).variant == "lrt");
  try {
    lrt::runtime::open_model(file);
    FAIL("a checkpoint of a pair this program lacks was opened");
  } catch (const lrt::runtime::VariantNotBuilt& e) {
    const std::string what = e.what();
    CHECK(what.find("trained with schedule interleaved:3; this program trains baseline") != std::string::npos);
  }
  CHECK(error_of([] { lrt::runtime::open_model("/nonexistent/model.safetensors"); }).find("/nonexistent") !=
        std::string::npos);
}

}  // namespace
