// CORE (lrt/eval/core.hpp, lrt/eval/score.hpp, lrt/io/yaml.hpp) against what the release's own
// code produced on the test bundle (tests/data/core, scripts/core_reference/): the shuffles,
// few-shot draws and Jinja-rendered prompts, and each example's outcome and option losses from
// core_eval.evaluate_example on a small release checkpoint.
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>

#include "../test_util.hpp"

namespace test_core {

namespace fs = std::filesystem;
using lrt::index_t;
namespace ev = lrt::eval;

const std::string data_dir = std::string(LRT_TEST_DATA_DIR) + "/core";
const std::string bundle_dir = data_dir + "/bundle";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] != '#') out.push_back(l);
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (true) {
    const std::size_t e = s.find(sep, b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) return out;
    b = e + 1;
  }
}

// ---------------------------------------------------------------------------------------------
// The YAML subset

TEST_CASE("yaml: the forms core.yaml uses, as PyYAML reads them") {
  const std::string text =
      "# a comment\n"
      "icl_tasks:\n"
      "- label: a   # trailing comment\n"
      "  num_fewshot: [0]\n"
      "  continuation_delimiter: \"\\nAnswer: \"\n"
      "-\n"
      "  label: 'it''s'\n"
      "  num_fewshot: [10, 5,]\n"
      "  has_categories: true\n"
      "  empty:\n"
      "  ratio: 0.5\n"
      "  text: plain words: no\n"
      "other:\n"
      "  nested:\n"
      "    - x\n"
      "    - \"\\u00e9\\x41\"\n";
  // a plain value holding ": " is refused (PyYAML: "mapping values are not allowed here")
  CHECK_THROWS_WITH_AS(lrt::yaml::parse(text, "t.yaml"), doctest::Contains("t.yaml:12: a mapping inside a plain value"),
                       lrt::Error);
  std::string ok = text;
  ok.replace(ok.find("plain words: no"), 15, "plain words");
  const lrt::json::Value v = lrt::yaml::parse(ok, "t.yaml");
  const auto& tasks = v.at("icl_tasks").items();
  REQUIRE(tasks.size() == 2);
  CHECK(tasks[0].at("label").as_string() == "a");
  CHECK(tasks[0].at("num_fewshot").items()[0].as_int() == 0);
  CHECK(tasks[0].at("continuation_delimiter").as_string() == "\nAnswer: ");
  CHECK(tasks[1].at("label").as_string() == "it's");
  CHECK(tasks[1].at("num_fewshot").items().size() == 2);
  CHECK(tasks[1].at("num_fewshot").items()[1].as_int() == 5);
  CHECK(tasks[1].at("has_categories").as_bool());
  CHECK(tasks[1].at("empty").is_null());
  CHECK(tasks[1].at("ratio").as_number() == 0.5);
  CHECK(tasks[1].at("text").as_string() == "plain words");
  CHECK(v.at("other").at("nested").items()[1].as_string() ==
        "\xC3\xA9"
        "A");
}

TEST_CASE("yaml: what lies outside the subset is an error naming the file and line") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"a: &x 1\nb: *x\n", "y.yaml:1: a value starting with '&'"},
      {"a: |\n  text\n", "y.yaml:1: a value starting with '|'"},
      {"a: 1\na: 2\n", "y.yaml:2: duplicate key 'a'"},
      {"a:\n\t- 1\n", "y.yaml:2: a tab in the indentation"},
      {"a: \"open\n  more\"\n", "y.yaml:1: a quoted scalar does not end on its line"},
      {"---\na: 1\n", "y.yaml:1: document markers"},
      {"a: {b: 1}\n", "y.yaml:1: a value starting with '{'"},
      {"a: [1, [2]]\n", "y.yaml:1: nested flow collections"},
      {"a: 010\n", "y.yaml:1: an integer with a leading zero"},
      {"a: \"\\q\"\n", "y.yaml:1: an unknown escape \\q"},
      {"a: 1\n  b: 2\n", "y.yaml:2: unexpected indentation"},
      {"just text\n", "y.yaml:1: a value on its own line"},
  };
  for (const auto& [text, msg] : bad) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(lrt::yaml::parse(text, "y.yaml"), doctest::Contains(msg.c_str()), lrt::Error);
  }
}

// ---------------------------------------------------------------------------------------------
// Shuffles, few-shot draws and prompts against Python and Jinja (prompts.jsonl)

TEST_CASE("core: the shuffle, the few-shot draws and the prompts are the release's, string for string") {
  const auto bundle = ev::CoreBundle::open(bundle_dir);
  const auto lines = lines_of(slurp(data_dir + "/prompts.jsonl"));
  std::size_t orders = 0, prompts = 0, cut = 0, fewshot = 0;
  std::set<std::string> types;
  for (const auto& line : lines) {
    const auto j = lrt::json::parse(line, "prompts.jsonl");
    const ev::CoreTask& t = bundle.task(j.at("task").as_string());
    const index_t max_per_task = j.at("max_per_task").as_int();
    const auto data = bundle.task_data(t, max_per_task);
    const index_t idx = j.at("idx").as_int();
    CAPTURE(line);
    if (idx < 0) {  // the shuffled order of the file's items
      const auto& order = j.at("order").items();
      REQUIRE(order.size() == data.size());
      for (std::size_t i = 0; i < order.size(); ++i) CHECK(data[i].line == order[i].as_int() + 1);
      ++orders;
      continue;
    }
    std::vector<index_t> shots;
    const auto got = ev::render_prompts(t, data, idx, &shots);
    const auto& want = j.at("prompts").items();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i].as_string());
    const auto& want_shots = j.at("fewshot").items();
    REQUIRE(shots.size() == want_shots.size());
    for (std::size_t i = 0; i < shots.size(); ++i) CHECK(shots[i] == want_shots[i].as_int());
    ++prompts;
    cut += max_per_task > 0 ? 1 : 0;
    fewshot += shots.empty() ? 0 : 1;
    types.insert(ev::to_string(t.type));
  }
  MESSAGE(prompts, " prompt sets (", cut, " with max_per_task, ", fewshot, " few-shot), ", orders, " shuffles");
  CHECK(orders >= bundle.tasks().size());  // every task, and the cut ones again
  CHECK(prompts > 100);
  CHECK(cut > 0);
  CHECK(fewshot > 0);
  CHECK(types.size() == 3);
}

TEST_CASE("core: py_strip is Python's str.strip (Unicode whitespace)") {
  CHECK(ev::py_strip("  a b \n\t") == "a b");
  CHECK(ev::py_strip("\xC2\xA0x\xE3\x80\x80") == "x");      // U+00A0, U+3000
  CHECK(ev::py_strip("\xE2\x80\x8Bx") == "\xE2\x80\x8Bx");  // U+200B is not whitespace in Python
  CHECK(ev::py_strip("\x1c\x1f x \x85") == "x");            // \x1c-\x1f and U+0085 (here as a byte: kept)
  CHECK(ev::py_strip("\xC2\x85x\xE2\x80\xA8") == "x");      // U+0085, U+2028
  CHECK(ev::py_strip("") == "");
}

// ---------------------------------------------------------------------------------------------
// Spans and decisions

TEST_CASE("core: spans of multiple choice (common prefix), schema (common suffix), language modelling") {
  const lrt::data::TextTokenizer bytes;
  const auto mc = ev::token_spans(ev::TaskType::MultipleChoice, {"Q: ab", "Q: ac", "Q: abd"}, bytes);
  CHECK(mc.start == std::vector<index_t>{5, 5, 5});  // BOS + "Q: a"
  CHECK(mc.end == std::vector<index_t>{6, 6, 7});
  CHECK(mc.rows[0].front() == 256);
  const auto sc = ev::token_spans(ev::TaskType::Schema, {"x then y", "zz then y"}, bytes);
  CHECK(sc.start == std::vector<index_t>{2, 3});  // " then y" is common
  CHECK(sc.end == std::vector<index_t>{9, 10});
  const auto lm = ev::token_spans(ev::TaskType::LanguageModeling, {"abc", "abc de"}, bytes);
  REQUIRE(lm.rows.size() == 1);
  CHECK(lm.start == std::vector<index_t>{4});
  CHECK(lm.end == std::vector<index_t>{7});
  CHECK_THROWS_WITH_AS(ev::token_spans(ev::TaskType::LanguageModeling, {"abc", "abd"}, bytes, "task t, item of line 3"),
                       doctest::Contains("task t, item of line 3: the prompt without its continuation"), lrt::Error);
}

TEST_CASE("core: schema options whose rows are the same score nothing (the release's empty slice)") {
  const lrt::data::TextTokenizer bytes;
  const auto sp = ev::token_spans(ev::TaskType::Schema, {"same", "same"}, bytes);
  CHECK(sp.start == std::vector<index_t>{0, 0});
  lrt::Tensor<float, 3> lg(lrt::Shape<3>{2, 5, 257});
  std::vector<ev::SpanScores> sc;
  ev::span_scores_from_logits(lg, 0, 257, sp, sc);
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].loss.empty());
  const auto d = ev::decide(ev::TaskType::Schema, sp, sc, 1);
  CHECK(std::isnan(d.option_losses[0]));
  CHECK(d.predicted == 0);
}

TEST_CASE("core: decisions follow Python's min and list.index (first of equals, a leading nan)") {
  ev::CoreSpans s;
  s.rows = {{1, 2}, {1, 3}, {1, 4}};
  auto with = [](std::vector<std::vector<double>> losses) {
    std::vector<ev::SpanScores> sc;
    for (auto& l : losses) sc.push_back({l, std::vector<index_t>(l.size(), 0), std::vector<double>(l.size(), 1.0)});
    return sc;
  };
  auto d = ev::decide(ev::TaskType::MultipleChoice, s, with({{2.0, 2.0}, {1.0, 3.0}, {1.5}}), 1);
  CHECK(d.predicted == 2);  // means 2, 2, 1.5 -> the third
  d = ev::decide(ev::TaskType::MultipleChoice, s, with({{2.0}, {1.0}, {1.0}}), 1);
  CHECK(d.predicted == 1);  // the first of equals
  CHECK(d.correct);
  CHECK(d.margin == 0.0);
  d = ev::decide(ev::TaskType::Schema, s, with({{}, {1.0}, {0.5}}), 2);
  CHECK(d.predicted == 0);  // an empty span's mean is nan; as the first value min() keeps it
  CHECK_FALSE(d.correct);
  d = ev::decide(ev::TaskType::Schema, s, with({{1.0}, {}, {0.5}}), 2);
  CHECK(d.predicted == 2);  // a later nan is never the minimum
  // language modelling: right when every argmax is the token that follows
  ev::CoreSpans lm;
  lm.rows = {{256, 7, 8, 9}};
  lm.start = {2}, lm.end = {4};
  std::vector<ev::SpanScores> sc{{{0.1, 0.2}, {8, 9}, {0.5, 0.25}}};
  d = ev::decide(ev::TaskType::LanguageModeling, lm, sc, 0);
  CHECK(d.correct);
  CHECK(d.margin == 0.25);
  sc[0].argmax[1] = 3;
  CHECK_FALSE(ev::decide(ev::TaskType::LanguageModeling, lm, sc, 0).correct);
}

/// The model of checkpoint `path`, which must be of variant V.
template <class V, class T = float>
std::unique_ptr<lrt::Model<V, T>> load_model(const std::string& path) {
  const auto r = lrt::st::Reader::open(path);
  const lrt::CheckpointInfo info = lrt::read_checkpoint(r);
  REQUIRE(info.run.structure == lrt::structure_of<V>());
  auto m = std::make_unique<lrt::Model<V, T>>(info.config);
  lrt::load_weights(*m, r);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Example for example against the release (release_results.tsv)

struct ReleaseRow {
  std::string task;
  index_t idx;
  bool correct;
  double margin;
  std::vector<double> losses;
};

std::vector<ReleaseRow> release_rows() {
  std::vector<ReleaseRow> rows;
  for (const auto& l : lines_of(slurp(data_dir + "/release_results.tsv"))) {
    const auto f = split(l, '\t');
    REQUIRE(f.size() == 5);
    ReleaseRow r{f[0], std::stoll(f[1]), f[2] == "1", std::stod(f[3]), {}};
    if (f[4].find('.') != std::string::npos)
      for (const auto& x : split(f[4], ',')) r.losses.push_back(std::stod(x));
    rows.push_back(std::move(r));
  }
  return rows;
}

TEST_CASE("core: every example's outcome equals the release's, on its own checkpoint, but for near-ties") {
  const auto model_ptr = load_model<lrt::variants::LrtRelease>(data_dir + "/release_lrt.safetensors");
  const auto& model = *model_ptr;
  const lrt::ModelConfig& config = model.config();
  const auto bundle = ev::CoreBundle::open(bundle_dir);
  const lrt::data::TextTokenizer bytes;
  const ev::CoreReport rep = ev::evaluate_core(bundle, {}, bytes, ev::zero_memory_scorer(model));
  const auto rows = release_rows();
  std::size_t compared = 0, near_ties = 0, long_prompts = 0;
  double worst_loss = 0;
  for (const auto& want : rows) {
    const auto it =
        std::find_if(rep.tasks.begin(), rep.tasks.end(), [&](const auto& t) { return t.task.label == want.task; });
    REQUIRE(it != rep.tasks.end());
    REQUIRE(want.idx < it->examples);
    const ev::CoreExample& got = it->per_example[static_cast<std::size_t>(want.idx)];
    CAPTURE(want.task);
    CAPTURE(want.idx);
    for (std::size_t i = 0; i < want.losses.size(); ++i) {
      REQUIRE(got.option_losses.size() == want.losses.size());
      worst_loss = std::max(worst_loss, std::abs(got.option_losses[i] - want.losses[i]));
      CHECK(got.option_losses[i] == doctest::Approx(want.losses[i]).epsilon(1e-5));
    }
    if (want.margin < 1e-5) {
      ++near_ties;
      MESSAGE("near-tie (margin ", want.margin, "): ", want.task, " #", want.idx, " release ", want.correct, ", lrt ",
              got.correct);
      continue;
    }
    CHECK(got.correct == want.correct);
    ++compared;
  }
  // the prompts that run past sequence_len (positions beyond the training context, uncropped)
  for (const auto& t : rep.tasks) {
    const auto data = bundle.task_data(t.task);
    for (index_t i = 0; i < t.examples; ++i)
      for (const auto& p : ev::render_prompts(t.task, data, i))
        if (static_cast<index_t>(p.size()) + 1 > config.sequence_len) {
          ++long_prompts;
          break;
        }
  }
  MESSAGE(compared, " examples equal to the release's, ", near_ties, " near-ties excused; ", long_prompts,
          " examples have prompts longer than sequence_len; largest option-loss difference ", worst_loss);
  std::size_t total = 0;
  for (const auto& t : rep.tasks) total += static_cast<std::size_t>(t.examples);
  CHECK(rows.size() == total);
  CHECK(compared + near_ties == rows.size());
  CHECK(long_prompts > 0);
  // the release's task accuracies and CORE (release_core.json), when no near-tie intervenes
  if (near_ties == 0) {
    const auto j = lrt::json::parse(slurp(data_dir + "/release_core.json"), "release_core.json");
    for (const auto& t : rep.tasks) CHECK(t.accuracy == doctest::Approx(j.at("results").at(t.task.label).as_number()));
    CHECK(rep.core_metric == doctest::Approx(j.at("core_metric").as_number()));
  }
}

TEST_CASE("core: examples on several threads give the one-thread outcome; --tasks and max_per_task select") {
  const auto model_ptr = load_model<lrt::variants::LrtRelease>(data_dir + "/release_lrt.safetensors");
  const auto& model = *model_ptr;
  const auto bundle = ev::CoreBundle::open(bundle_dir);
  const lrt::data::TextTokenizer bytes;
  ev::CoreOptions o;
  o.tasks = {"lrt_halves", "lrt_next_word"};
  o.max_per_task = 7;
  std::vector<ev::CoreProgress> seen;
  const auto rep = ev::evaluate_core(bundle, o, bytes, ev::zero_memory_scorer(model),
                                     [&](const ev::CoreProgress& p) { seen.push_back(p); });
  REQUIRE(rep.tasks.size() == 2);
  CHECK(rep.tasks[0].task.label == "lrt_next_word");  // the bundle's order
  CHECK(rep.tasks[0].examples == 7);
  CHECK(seen.size() == 14);
  CHECK(seen.back().done == 14);
  CHECK(seen.back().total == 14);
  // one example at a time, through the same scorer
  const auto scorer = ev::zero_memory_scorer(model);
  for (const auto& t : rep.tasks) {
    const auto data = bundle.task_data(t.task, 7);
    for (index_t i = 0; i < 7; ++i) {
      const auto one = ev::evaluate_example(t.task, data, i, bytes, scorer);
      CHECK(one.correct == t.per_example[static_cast<std::size_t>(i)].correct);
      CHECK(one.option_losses == t.per_example[static_cast<std::size_t>(i)].option_losses);
    }
  }
  o.tasks = {"no_such_task"};
  CHECK_THROWS_WITH_AS(ev::evaluate_core(bundle, o, bytes, scorer), doctest::Contains("no task 'no_such_task'"),
                       lrt::Error);
}

TEST_CASE("core: three shards merged give the report of one process; a gap or an overlap is an error") {
  const auto model_ptr = load_model<lrt::variants::LrtRelease>(data_dir + "/release_lrt.safetensors");
  const auto bundle = ev::CoreBundle::open(bundle_dir);
  const lrt::data::TextTokenizer bytes;
  ev::CoreOptions o;
  o.max_per_task = 5;
  const auto scorer = ev::zero_memory_scorer(*model_ptr);
  const auto whole = ev::evaluate_core(bundle, o, bytes, scorer);
  std::vector<ev::CoreReport> parts;
  o.shards = 3;
  for (index_t k = 0; k < 3; ++k) {
    o.shard = k;
    parts.push_back(ev::evaluate_core(bundle, o, bytes, scorer));
  }
  index_t scored = 0;
  for (const auto& p : parts)
    for (const auto& t : p.tasks)
      for (const auto& e : t.per_example) scored += e.scored ? 1 : 0;
  CHECK(scored == 40);  // 8 tasks x 5, each once
  CHECK(parts[0].tasks[0].per_example[0].scored);
  CHECK_FALSE(parts[1].tasks[0].per_example[0].scored);
  CHECK(parts[1].tasks[0].per_example[1].scored);
  const auto merged = ev::merge_core(parts);
  REQUIRE(merged.tasks.size() == whole.tasks.size());
  for (std::size_t k = 0; k < whole.tasks.size(); ++k) {
    CHECK(merged.tasks[k].accuracy == whole.tasks[k].accuracy);
    for (std::size_t i = 0; i < whole.tasks[k].per_example.size(); ++i) {
      CHECK(merged.tasks[k].per_example[i].option_losses == whole.tasks[k].per_example[i].option_losses);
      CHECK(merged.tasks[k].per_example[i].correct == whole.tasks[k].per_example[i].correct);
    }
  }
  CHECK(merged.core_metric == whole.core_metric);
  CHECK_THROWS_WITH_AS(ev::merge_core({parts[0], parts[1]}), doctest::Contains("was scored by no shard"), lrt::Error);
  CHECK_THROWS_WITH_AS(ev::merge_core({parts[0], parts[0]}), doctest::Contains("was scored twice"), lrt::Error);
  o.shard = 3;
  CHECK_THROWS_WITH_AS(ev::evaluate_core(bundle, o, bytes, scorer), doctest::Contains("needs 0 <= shard < shards"),
                       lrt::Error);
}

// ---------------------------------------------------------------------------------------------
// Sequential mode: the exact recurrence

TEST_CASE("core sequential: each scored token's loss is the Exact schedule's, in double, past sequence_len too") {
  const auto m_ptr = load_model<lrt::variants::LrtRelease, double>(data_dir + "/release_lrt.safetensors");
  const auto& m = *m_ptr;
  const lrt::ModelConfig& config = m.config();
  const auto bundle = ev::CoreBundle::open(bundle_dir);
  const lrt::data::TextTokenizer bytes;
  std::size_t tokens = 0, past_context = 0, differ_from_parallel = 0;
  double worst = 0;
  for (const auto& t : bundle.tasks()) {
    const auto data = bundle.task_data(t);
    for (index_t i = 0; i < 3; ++i) {
      const auto spans = ev::token_spans(t.type, ev::render_prompts(t, data, i), bytes);
      const auto seq = ev::score_sequential(m, spans);
      const auto par = ev::score_zero_memory(m, spans);
      REQUIRE(seq.size() == spans.rows.size());
      for (std::size_t b = 0; b < spans.rows.size(); ++b) {
        const auto& row = spans.rows[b];
        const index_t n = static_cast<index_t>(row.size()) - 1;
        lrt::Tensor<index_t, 2> ids(lrt::Shape<2>{1, n}), tg(lrt::Shape<2>{1, n});
        for (index_t p = 0; p < n; ++p) ids(0, p) = row[std::size_t(p)], tg(0, p) = row[std::size_t(p + 1)];
        lrt::ad::Graph g;
        lrt::ad::NoGrad ng;
        const auto exact = lrt::schedule_loss<lrt::Exact>(m, ids, tg);
        REQUIRE(spans.start[b] >= 1);
        const index_t first = spans.start[b] - 1;
        REQUIRE(seq[b].loss.size() == static_cast<std::size_t>(spans.end[b] - 1 - first));
        for (std::size_t k = 0; k < seq[b].loss.size(); ++k) {
          const index_t p = first + static_cast<index_t>(k);
          const double want = exact.passes[std::size_t(p)].per_token(0);
          worst = std::max(worst, std::abs(seq[b].loss[k] - want));
          CHECK(std::abs(seq[b].loss[k] - want) <= 1e-12);
          differ_from_parallel += std::abs(seq[b].loss[k] - par[b].loss[k]) > 1e-6 ? 1 : 0;
          past_context += p >= config.sequence_len ? 1 : 0;
          ++tokens;
        }
      }
    }
  }
  MESSAGE(tokens, " scored tokens equal to the Exact schedule's (largest difference ", worst, "), ", past_context,
          " past sequence_len; ", differ_from_parallel, " differ from the zero-memory mode by more than 1e-6");
  CHECK(tokens > 400);
  CHECK(past_context > 0);
  CHECK(differ_from_parallel > tokens / 2);  // the memory changes what the model predicts
}

/// Row b of s alone.
ev::CoreSpans row_alone(const ev::CoreSpans& s, std::size_t b) { return {{s.rows[b]}, {s.start[b]}, {s.end[b]}}; }

TEST_CASE("core: the options scored from their shared prefix equal each option scored alone, both modes, in double") {
  const auto m_ptr = load_model<lrt::variants::LrtRelease, double>(data_dir + "/release_lrt.safetensors");
  const auto& m = *m_ptr;
  const auto bundle = ev::CoreBundle::open(bundle_dir);
  const lrt::data::TextTokenizer bytes;
  const ev::CoreScorer shared_par = ev::zero_memory_scorer(m), shared_seq = ev::sequential_scorer(m);
  std::size_t tokens = 0, shared_tokens = 0, examples = 0;
  double worst = 0;
  for (const auto& t : bundle.tasks()) {
    const auto data = bundle.task_data(t);
    for (index_t i = 0; i < 4; ++i) {
      const auto spans = ev::token_spans(t.type, ev::render_prompts(t, data, i), bytes);
      const index_t share = ev::shared_prefix(spans);
      CHECK(share >= 1);
      shared_tokens += static_cast<std::size_t>(share - 1) * (spans.rows.size() - 1);  // fed once, not B times
      ++examples;
      for (const bool seq : {false, true}) {
        const auto together = (seq ? shared_seq : shared_par)(spans);
        REQUIRE(together.size() == spans.rows.size());
        for (std::size_t b = 0; b < spans.rows.size(); ++b) {
          const auto alone =
              seq ? ev::score_sequential(m, row_alone(spans, b)) : ev::score_zero_memory(m, row_alone(spans, b));
          REQUIRE(alone[0].loss.size() == together[b].loss.size());
          for (std::size_t k = 0; k < alone[0].loss.size(); ++k) {
            worst = std::max(worst, std::abs(together[b].loss[k] - alone[0].loss[k]));
            CHECK(std::abs(together[b].loss[k] - alone[0].loss[k]) <= 1e-12);
            CHECK(std::abs(together[b].gap[k] - alone[0].gap[k]) <= 1e-12);
            CHECK(together[b].argmax[k] == alone[0].argmax[k]);
            ++tokens;
          }
        }
      }
    }
  }
  MESSAGE(examples, " examples, ", tokens,
          " scored tokens in both modes equal to scoring each option alone (largest difference ", worst, "); ",
          shared_tokens, " prefix tokens fed once instead of once per option");
  CHECK(tokens > 400);
  CHECK(shared_tokens > 1000);  // the few-shot context is what the options share
}

TEST_CASE("core sequential: a model without memory scores the same in both modes, bit for bit") {
  const auto m_ptr =
      load_model<lrt::variants::Baseline>(std::string(LRT_TEST_DATA_DIR) + "/pre_roster/baseline_standard.safetensors");
  const auto& m = *m_ptr;
  const auto bundle = ev::CoreBundle::open(bundle_dir);
  const lrt::data::TextTokenizer bytes;
  ev::CoreOptions o;
  o.max_per_task = 6;
  const auto par = ev::evaluate_core(bundle, o, bytes, ev::zero_memory_scorer(m));
  const auto seq = ev::evaluate_core(bundle, o, bytes, ev::sequential_scorer(m));
  REQUIRE(par.tasks.size() == seq.tasks.size());
  for (std::size_t k = 0; k < par.tasks.size(); ++k)
    for (std::size_t i = 0; i < par.tasks[k].per_example.size(); ++i) {
      const auto &a = par.tasks[k].per_example[i], &b = seq.tasks[k].per_example[i];
      CHECK(a.correct == b.correct);
      CHECK(a.option_losses == b.option_losses);
      CHECK(a.margin == b.margin);
    }
  CHECK(par.core_metric == seq.core_metric);
}

// ---------------------------------------------------------------------------------------------
// Bad bundles: one clear error each

/// A copy of the test bundle in a fresh folder, with `edit` applied to one of its files.
std::string damaged_bundle(const std::string& name, const std::string& file,
                           const std::function<std::string(std::string)>& edit) {
  const fs::path dir = fs::temp_directory_path() / ("lrt_core_" + name);
  fs::remove_all(dir);
  fs::copy(bundle_dir, dir, fs::copy_options::recursive);
  const std::string path = (dir / file).string();
  const std::string text = edit(slurp(path));
  std::ofstream(path, std::ios::binary) << text;
  return dir.string();
}

std::string replace_first(std::string s, const std::string& a, const std::string& b) {
  const auto at = s.find(a);
  REQUIRE_MESSAGE(at != std::string::npos, "'", a, "' not found");
  return s.replace(at, a.size(), b);
}

TEST_CASE("core: bad bundles give one clear error each, naming the file and line") {
  const lrt::data::TextTokenizer bytes;
  const std::string mc = "eval_data/lrt_text/next_word.jsonl", lm = "eval_data/lrt_text/continue.jsonl";
  struct Case {
    std::string name, file;
    std::function<std::string(std::string)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing_field", mc, [](std::string s) { return replace_first(s, "\"query\"", "\"question\""); },
       "next_word.jsonl:1: no field 'query'"},
      {"gold_range", mc, [](std::string s) { return replace_first(s, "\"gold\": ", "\"gold\": 9"); },
       "next_word.jsonl:1: gold must be an index into its"},
      {"not_json", lm, [](std::string s) { return replace_first(s, "\n", "\n{oops\n"); }, "continue.jsonl:2"},
      {"empty_line", lm, [](std::string s) { return replace_first(s, "\n", "\n\n"); },
       "continue.jsonl:2: an empty line"},
      {"task_type", "core.yaml",
       [](std::string s) { return replace_first(s, "icl_task_type: schema", "icl_task_type: ranking"); },
       "core.yaml:13: task 3 (lrt_halves): unknown icl_task_type 'ranking'"},
      {"too_many_shots", "core.yaml",
       [](std::string s) { return replace_first(s, "num_fewshot: [3]", "num_fewshot: [300]"); },
       "task lrt_next_phrase_3shot asks for 300 few-shot examples"},
      {"shots_list", "core.yaml",
       [](std::string s) { return replace_first(s, "num_fewshot: [3]", "num_fewshot: [3, 5]"); },
       "num_fewshot must be a list of one count"},
      {"no_baseline", "eval_meta_data.csv",
       [](std::string s) { return replace_first(s, "lrt_greedy,", "lrt_greedier,"); }, "no row for task 'lrt_greedy'"},
      {"bad_baseline", "eval_meta_data.csv",
       [](std::string s) { return replace_first(s, "schema,0,37,yes", "schema,0,lots,yes"); },
       "the random baseline of 'lrt_halves' must be a number below 100, got 'lots'"},
      {"bad_yaml", "core.yaml",
       [](std::string s) { return replace_first(s, "- label: lrt_halves\n", "- label: &x lrt_halves\n"); },
       "core.yaml:13: a value starting with '&'"},
      {"uri_outside", "core.yaml",  // a file that exists, outside eval_data/
       [](std::string s) { return replace_first(s, "lrt_text/next_word.jsonl", "../core.yaml"); },
       "core.yaml:4: task 1 (lrt_next_word): dataset_uri '../core.yaml' must be a relative path inside the "
       "bundle's eval_data/"},
      {"uri_nested_outside", "core.yaml",
       [](std::string s) { return replace_first(s, "lrt_text/next_word.jsonl", "lrt_text/../../eval_meta_data.csv"); },
       "dataset_uri 'lrt_text/../../eval_meta_data.csv' must be a relative path"},
      {"uri_absolute", "core.yaml",
       [](std::string s) { return replace_first(s, "lrt_text/next_word.jsonl", "/etc/passwd"); },
       "dataset_uri '/etc/passwd' must be a relative path"},
      {"no_data", "core.yaml", [](std::string s) { return replace_first(s, "halves_1shot.jsonl", "gone.jsonl"); },
       "(lrt_halves_1shot): its data"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string dir = damaged_bundle(c.name, c.file, c.edit);
    const auto run = [&] {
      const auto b = ev::CoreBundle::open(dir);
      ev::CoreOptions o;
      ev::evaluate_core(b, o, bytes, [](const ev::CoreSpans& s) {
        return std::vector<ev::SpanScores>(s.rows.size(), ev::SpanScores{});
      });
    };
    CHECK_THROWS_WITH_AS(run(), doctest::Contains(c.message.c_str()), lrt::Error);
    fs::remove_all(dir);
  }
  CHECK_THROWS_WITH_AS(ev::CoreBundle::open(data_dir + "/no_such_bundle"), doctest::Contains("is not a folder"),
                       lrt::Error);
}

}  // namespace test_core
