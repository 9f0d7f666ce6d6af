// lrt/eval/core.hpp: CORE, DCLM's centered accuracy over in-context-learning tasks, computed
// example for example as nanochat (and the LRT release) compute it (core_eval.py, base_eval.py):
//   - a bundle folder: core.yaml (icl_tasks: label, dataset_uri, num_fewshot [k],
//     icl_task_type, continuation_delimiter, default ' '), eval_data/<dataset_uri> (JSON lines),
//     eval_meta_data.csv (the "Random baseline" of each task, in percent);
//   - a task's items shuffled with Python's random.Random(1337) and cut to max_per_task; item idx
//     takes its few-shot examples from random.Random(1234 + idx).sample(indices other than idx, k);
//   - the prompts of the release's Jinja templates: each few-shot example followed by a blank
//     line, then the item, once per choice (multiple choice), per context option (schema), or
//     without and with its continuation (language modelling, the first one stripped);
//   - the tokens with BOS first; the scored span: after the options' common token prefix
//     (multiple choice), the common token suffix (schema), the continuation (language modelling);
//   - multiple choice and schema pick the option of lowest mean cross-entropy over its span (the
//     first of equals); language modelling is right when every greedy argmax of the span is the
//     continuation's token; centered accuracy (acc - b/100) / (1 - b/100); CORE, their mean.
// Prompts are never cropped (the release's GPT declares no maximum length).
// The model is a CoreScorer: the losses and argmaxes of a batch of rows over their spans
// (eval/score.hpp: the memory at zero, as the release evaluates, or the exact recurrence).
// Examples run on the thread pool; over processes, each scores a shard (CoreOptions::shards) and
// merge_core joins their reports.
//
//   auto bundle = lrt::eval::CoreBundle::open("eval_bundle");
//   auto report = lrt::eval::evaluate_core(bundle, {}, tokenizer, lrt::eval::zero_memory_scorer(model));
#pragma once

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "../core/thread_pool.hpp"
#include "../data/text_tokenizer.hpp"
#include "../io/file.hpp"
#include "../io/json.hpp"
#include "../io/yaml.hpp"
#include "py_random.hpp"

namespace lrt {
inline namespace v0 {
namespace eval {

enum class TaskType { MultipleChoice, Schema, LanguageModeling };

inline const char* to_string(TaskType t) {
  return t == TaskType::MultipleChoice ? "multiple_choice" : t == TaskType::Schema ? "schema" : "language_modeling";
}

/// One task of core.yaml, with its random baseline (percent) from eval_meta_data.csv.
struct CoreTask {
  std::string label, dataset_uri;
  TaskType type = TaskType::MultipleChoice;
  index_t num_fewshot = 0;
  std::string delimiter = " ";
  double random_baseline = 0;
  int line = 0;  // of its entry in core.yaml
};

/// One item of a task's data. Multiple choice: query, options (its choices), gold. Schema:
/// options (its context_options), continuation, gold. Language modelling: context, continuation.
struct CoreItem {
  std::string query, context, continuation;
  std::vector<std::string> options;
  index_t gold = 0;
  index_t line = 0;  // 1-based, in its JSON-lines file
};

namespace detail {

/// Python's str.isspace for one code point (bidirectional class WS, B or S, or category Zs).
inline bool py_isspace(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// The code point of valid UTF-8 s starting at byte i, and its length.
inline std::pair<std::uint32_t, std::size_t> utf8_at(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const std::size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (i + n > s.size()) return {b, 1};
  std::uint32_t c = n == 1 ? b : n == 2 ? (b & 0x1Fu) : n == 3 ? (b & 0x0Fu) : (b & 0x07u);
  for (std::size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  return {c, n};
}

}  // namespace detail

/// Python's str.strip() (no arguments) of UTF-8 text: Unicode whitespace off both ends (what
/// Jinja's `trim` filter and the release's `.strip()` do).
inline std::string py_strip(std::string_view s) {
  std::size_t b = 0;
  while (b < s.size()) {
    const auto [c, n] = detail::utf8_at(s, b);
    if (!detail::py_isspace(c)) break;
    b += n;
  }
  std::size_t e = s.size();
  while (e > b) {
    std::size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (!detail::py_isspace(detail::utf8_at(s, start).first)) break;
    e = start;
  }
  return std::string(s.substr(b, e - b));
}

/// The fields of one CSV record (Python's csv module, default dialect: ',' separated, '"'
/// quoted with "" for a quote; quoted fields may hold newlines). Reads from `pos` in `text` and
/// advances it past the record; `line` counts newlines.
inline std::vector<std::string> csv_record(std::string_view text, std::size_t& pos, int& line, std::string_view what) {
  std::vector<std::string> f(1);
  bool quoted = false, was_quoted = false;
  const int first = line;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c == '"') {
        if (pos < text.size() && text[pos] == '"')
          f.back() += '"', ++pos;
        else
          quoted = false;
      } else {
        if (c == '\n') ++line;
        f.back() += c;
      }
    } else if (c == '"' && f.back().empty() && !was_quoted) {
      quoted = was_quoted = true;
    } else if (c == ',') {
      f.emplace_back(), was_quoted = false;
    } else if (c == '\n') {
      ++line;
      return f;
    } else if (c == '\r' && pos < text.size() && text[pos] == '\n') {
      continue;
    } else {
      f.back() += c;
    }
  }
  check(!quoted, "core", what, ":", first, ": a quoted field does not end");
  return f;
}

/// A CORE bundle folder: its tasks, read and checked when opened.
class CoreBundle {
 public:
  /// Reads DIR/core.yaml and DIR/eval_meta_data.csv; every task must have a random baseline and
  /// its data file must exist. Errors name the file and line.
  static CoreBundle open(const std::string& dir) {
    namespace fs = std::filesystem;
    CoreBundle b;
    b.dir_ = dir;
    check(fs::is_directory(dir), "core", "'", dir,
          "' is not a folder: give the CORE bundle's folder (core.yaml, eval_meta_data.csv, eval_data/; nanochat's "
          "eval_bundle.zip unpacked)");
    const std::string yaml_path = (fs::path(dir) / "core.yaml").string();
    const std::string csv_path = (fs::path(dir) / "eval_meta_data.csv").string();
    for (const auto& p : {yaml_path, csv_path})
      check(fs::is_regular_file(p), "core", "the bundle '", dir, "' has no ", fs::path(p).filename().string());
    const std::string text = read_file(yaml_path, "core");
    const json::Value doc = yaml::parse(text, yaml_path);
    check(doc.is_object() && doc.find("icl_tasks") != nullptr && doc.at("icl_tasks").is_array(), "core", yaml_path,
          ": expected a top-level key icl_tasks holding a list of tasks");
    // the line of each "label:" in order, for the messages (the YAML value does not keep lines)
    std::vector<int> label_lines;
    {
      int ln = 1;
      for (std::size_t i = 0; i < text.size(); ++i) {
        if (i == 0 || text[i - 1] == '\n') {
          std::size_t j = i;
          while (j < text.size() && (text[j] == ' ' || text[j] == '-')) ++j;
          if (text.compare(j, 6, "label:") == 0) label_lines.push_back(ln);
        }
        if (text[i] == '\n') ++ln;
      }
    }
    const auto& tasks = doc.at("icl_tasks").items();
    check(!tasks.empty(), "core", yaml_path, ": icl_tasks is empty");
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const json::Value& t = tasks[i];
      const int line = i < label_lines.size() ? label_lines[i] : 0;
      const std::string at = yaml_path + ":" + std::to_string(line) + ": task " + std::to_string(i + 1);
      check(t.is_object(), "core", at, ": expected a mapping of label, dataset_uri, num_fewshot, icl_task_type");
      auto str = [&](std::string_view k) -> std::string {
        const json::Value* v = t.find(k);
        check(v != nullptr, "core", at, ": no ", k);
        check(v->is_string(), "core", at, ": ", k, " must be a string");
        return v->as_string();
      };
      CoreTask task;
      task.line = line;
      task.label = str("label");
      task.dataset_uri = str("dataset_uri");
      const std::string type = str("icl_task_type");
      if (type == "multiple_choice")
        task.type = TaskType::MultipleChoice;
      else if (type == "schema")
        task.type = TaskType::Schema;
      else if (type == "language_modeling")
        task.type = TaskType::LanguageModeling;
      else
        throw_error("core", at + " (" + task.label + "): unknown icl_task_type '" + type +
                                "' (multiple_choice, schema or language_modeling)");
      const json::Value* k = t.find("num_fewshot");
      check(k != nullptr, "core", at, " (", task.label, "): no num_fewshot");
      check(k->is_array() && k->items().size() == 1 && k->items()[0].is_integer() && k->items()[0].as_int() >= 0,
            "core", at, " (", task.label, "): num_fewshot must be a list of one count >= 0, e.g. [0] or [5]");
      task.num_fewshot = static_cast<index_t>(k->items()[0].as_int());
      if (const json::Value* d = t.find("continuation_delimiter")) {
        check(d->is_string(), "core", at, " (", task.label, "): continuation_delimiter must be a string");
        task.delimiter = d->as_string();
      }
      for (const auto& other : b.tasks_)
        check(other.label != task.label, "core", at, ": a second task labelled '", task.label, "'");
      // Inside eval_data/, by its spelling: a relative path without '..' (a bundle from elsewhere
      // must not make the scorer read, and print items of, files outside it).
      const fs::path uri(task.dataset_uri);
      bool inside = !task.dataset_uri.empty() && uri.is_relative() && !uri.has_root_name();
      for (const fs::path& part : uri) inside = inside && part != "..";
      check(inside, "core", at, " (", task.label, "): dataset_uri '", task.dataset_uri,
            "' must be a relative path inside the bundle's eval_data/, without '..'");
      const std::string data = (fs::path(dir) / "eval_data" / task.dataset_uri).string();
      check(fs::is_regular_file(data), "core", at, " (", task.label, "): its data '", data, "' is not a file");
      b.tasks_.push_back(std::move(task));
    }
    // eval_meta_data.csv: the "Random baseline" column by "Eval Task" (a later row wins, as in
    // the release's dict)
    const std::string csv = read_file(csv_path, "core");
    std::size_t pos = 0;
    int line = 1;
    const auto header = csv_record(csv, pos, line, csv_path);
    const auto col = [&](std::string_view name) {
      const auto it = std::find(header.begin(), header.end(), name);
      check(it != header.end(), "core", csv_path, ":1: no column '", name, "'");
      return static_cast<std::size_t>(it - header.begin());
    };
    const std::size_t c_task = col("Eval Task"), c_base = col("Random baseline");
    std::vector<std::pair<std::string, double>> baselines;
    while (pos < csv.size()) {
      const int at = line;
      const auto rec = csv_record(csv, pos, line, csv_path);
      if (rec.size() == 1 && rec[0].empty()) continue;  // a blank line, as csv skips
      check(rec.size() > std::max(c_task, c_base), "core", csv_path, ":", at, ": ", rec.size(),
            " fields, the header has ", header.size());
      std::string v = py_strip(rec[c_base]);
      double x = NAN;
      const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
      check(!v.empty() && r.ec == std::errc() && r.ptr == v.data() + v.size() && std::isfinite(x) && x < 100, "core",
            csv_path, ":", at, ": the random baseline of '", rec[c_task], "' must be a number below 100, got '",
            rec[c_base], "'");
      baselines.emplace_back(rec[c_task], x);
    }
    for (auto& t : b.tasks_) {
      const auto it =
          std::find_if(baselines.rbegin(), baselines.rend(), [&](const auto& p) { return p.first == t.label; });
      check(it != baselines.rend(), "core", csv_path, ": no row for task '", t.label, "' (core.yaml line ", t.line,
            ")");
      t.random_baseline = it->second;
    }
    return b;
  }

  const std::string& dir() const noexcept { return dir_; }
  const std::vector<CoreTask>& tasks() const noexcept { return tasks_; }

  /// The task labelled `label`, or an error listing the labels.
  const CoreTask& task(std::string_view label) const {
    std::string all;
    for (const auto& t : tasks_) {
      if (t.label == label) return t;
      all += (all.empty() ? "" : ", ") + t.label;
    }
    throw_error("core", "no task '" + std::string(label) + "' in " + dir_ + "/core.yaml; its tasks: " + all);
  }

  /// The items of task t in file order, each checked for its type's fields.
  std::vector<CoreItem> read_items(const CoreTask& t) const {
    const std::string path = (std::filesystem::path(dir_) / "eval_data" / t.dataset_uri).string();
    const std::string text = read_file(path, "core");
    std::vector<CoreItem> items;
    std::size_t pos = 0;
    index_t line = 0;
    while (pos < text.size()) {
      const std::size_t nl = text.find('\n', pos);
      const std::string_view raw =
          std::string_view(text).substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      pos = nl == std::string::npos ? text.size() : nl + 1;
      ++line;
      const std::string at = path + ":" + std::to_string(line);
      const std::string s = py_strip(raw);
      check(!s.empty(), "core", at, ": an empty line (each line must hold one JSON object)");
      const json::Value v = json::parse(s, at);
      check(v.is_object(), "core", at, ": expected a JSON object");
      auto field = [&](std::string_view k) -> const json::Value& {
        const json::Value* f = v.find(k);
        check(f != nullptr, "core", at, ": no field '", k, "' (a ", to_string(t.type), " item of task ", t.label, ")");
        return *f;
      };
      auto string_field = [&](std::string_view k) {
        const json::Value& f = field(k);
        check(f.is_string(), "core", at, ": field '", k, "' must be a string");
        return f.as_string();
      };
      auto list_field = [&](std::string_view k) {
        const json::Value& f = field(k);
        check(f.is_array() && !f.items().empty(), "core", at, ": field '", k, "' must be a non-empty list of strings");
        std::vector<std::string> out;
        for (const auto& e : f.items()) {
          check(e.is_string(), "core", at, ": field '", k, "' must be a non-empty list of strings");
          out.push_back(e.as_string());
        }
        return out;
      };
      CoreItem it;
      it.line = line;
      if (t.type == TaskType::LanguageModeling) {
        it.context = string_field("context");
        it.continuation = string_field("continuation");
      } else {
        if (t.type == TaskType::MultipleChoice) {
          it.query = string_field("query");
          it.options = list_field("choices");
        } else {
          it.options = list_field("context_options");
          it.continuation = string_field("continuation");
        }
        const json::Value& g = field("gold");
        const auto n = static_cast<std::int64_t>(it.options.size());
        check(g.is_integer() && g.as_int() >= 0 && g.as_int() < n, "core", at, ": gold must be an index into its ", n,
              t.type == TaskType::MultipleChoice ? " choices" : " context_options", ", got ", g.dump());
        it.gold = static_cast<index_t>(g.as_int());
      }
      items.push_back(std::move(it));
    }
    check(!items.empty(), "core", path, ": no items (task ", t.label, ")");
    return items;
  }

  /// The items as the release evaluates them: shuffled with random.Random(1337), then the first
  /// max_per_task (all when <= 0). A few-shot count the data cannot give is an error.
  std::vector<CoreItem> task_data(const CoreTask& t, index_t max_per_task = -1) const {
    std::vector<CoreItem> items = read_items(t);
    PyRandom(1337).shuffle(items);
    if (max_per_task > 0 && static_cast<index_t>(items.size()) > max_per_task)
      items.resize(static_cast<std::size_t>(max_per_task));
    check(t.num_fewshot<static_cast<index_t>(items.size()), "core", dir_, "/core.yaml:", t.line, ": task ", t.label,
                        " asks for ", t.num_fewshot, " few-shot examples, but its data ", t.dataset_uri, " gives ",
                        items.size(), " items", max_per_task> 0
              ? " (after --max-per-task)"
              : "",
          ": at most ", items.size() - 1);
    return items;
  }

 private:
  std::string dir_;
  std::vector<CoreTask> tasks_;
};

/// The few-shot examples of item idx: random.Random(1234 + idx).sample(the other indices, k).
inline std::vector<index_t> fewshot_indices(index_t n, index_t idx, index_t k) {
  if (k <= 0) return {};
  std::vector<index_t> available;
  available.reserve(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i)
    if (i != idx) available.push_back(i);
  return PyRandom(1234 + static_cast<std::int64_t>(idx)).sample(available, static_cast<std::size_t>(k));
}

/// The prompts of item idx of task t's data, as the release's templates render them; `shots`
/// receives the few-shot indices when given.
inline std::vector<std::string> render_prompts(const CoreTask& t, const std::vector<CoreItem>& data, index_t idx,
                                               std::vector<index_t>* shots = nullptr) {
  const auto fs = fewshot_indices(static_cast<index_t>(data.size()), idx, t.num_fewshot);
  if (shots) *shots = fs;
  const CoreItem& item = data[static_cast<std::size_t>(idx)];
  const std::string& d = t.delimiter;
  std::string prefix;  // the few-shot examples, each followed by a blank line
  for (index_t i : fs) {
    const CoreItem& e = data[static_cast<std::size_t>(i)];
    switch (t.type) {
      case TaskType::MultipleChoice:
        prefix += e.query + d + e.options[static_cast<std::size_t>(e.gold)];
        break;
      case TaskType::Schema:
        prefix += e.options[static_cast<std::size_t>(e.gold)] + d + e.continuation;
        break;
      case TaskType::LanguageModeling:
        prefix += py_strip(e.context) + d + e.continuation;
        break;
    }
    prefix += "\n\n";
  }
  std::vector<std::string> prompts;
  switch (t.type) {
    case TaskType::MultipleChoice:
      for (const auto& c : item.options) prompts.push_back(prefix + item.query + d + c);
      break;
    case TaskType::Schema:
      for (const auto& c : item.options) prompts.push_back(prefix + c + d + item.continuation);
      break;
    case TaskType::LanguageModeling: {
      const std::string without = prefix + py_strip(item.context) + d;
      prompts.push_back(py_strip(without));
      prompts.push_back(without + item.continuation);
      break;
    }
  }
  return prompts;
}

/// Token rows (BOS first) and, per row, the span [start, end) of tokens scored.
struct CoreSpans {
  std::vector<std::vector<index_t>> rows;
  std::vector<index_t> start, end;
};

/// The rows and spans of an item's prompts (the release's batch_sequences_mc/schema/lm); `what`
/// names the item in the error of a language-modelling prompt whose tokens without the
/// continuation are not a prefix of those with it.
inline CoreSpans token_spans(TaskType type, const std::vector<std::string>& prompts, const data::TextTokenizer& tok,
                             std::string_view what = "") {
  CoreSpans s;
  for (const auto& p : prompts) {
    std::vector<data::token_t> ids;
    tok.encode(p, ids);
    std::vector<index_t> row{static_cast<index_t>(tok.bos())};
    for (auto id : ids) row.push_back(static_cast<index_t>(id));
    s.rows.push_back(std::move(row));
  }
  std::size_t min_len = std::numeric_limits<std::size_t>::max();
  for (const auto& r : s.rows) min_len = std::min(min_len, r.size());
  auto common = [&](bool from_end) {
    for (std::size_t i = 0; i < min_len; ++i) {
      const auto at = [&](const std::vector<index_t>& r) { return from_end ? r[r.size() - 1 - i] : r[i]; };
      for (const auto& r : s.rows)
        if (at(r) != at(s.rows[0])) return static_cast<index_t>(i);
    }
    return static_cast<index_t>(min_len);
  };
  switch (type) {
    case TaskType::MultipleChoice: {
      const index_t c = common(false);
      for (const auto& r : s.rows) s.start.push_back(c), s.end.push_back(static_cast<index_t>(r.size()));
      break;
    }
    case TaskType::Schema: {
      const index_t c = common(true);
      for (const auto& r : s.rows)
        s.end.push_back(static_cast<index_t>(r.size())), s.start.push_back(static_cast<index_t>(r.size()) - c);
      break;
    }
    case TaskType::LanguageModeling: {
      const auto& without = s.rows[0];
      const auto& with = s.rows[1];
      check(without.size() < with.size() && std::equal(without.begin(), without.end(), with.begin()), "core", what,
            ": the prompt without its continuation does not tokenize to a prefix of the prompt with it (",
            without.size(), " and ", with.size(), " tokens); the release stops here too");
      s.start = {static_cast<index_t>(without.size())};
      s.end = {static_cast<index_t>(with.size())};
      s.rows.erase(s.rows.begin());
      break;
    }
  }
  return s;
}

/// A scorer's answer for one row over the positions p in [start - 1, end - 1) that predict the
/// span's tokens: the cross-entropy (nats) of token row[p + 1], the argmax of the logits (the
/// first of equals), and the gap between the largest and second largest logit.
struct SpanScores {
  std::vector<double> loss;
  std::vector<index_t> argmax;
  std::vector<double> gap;
};
/// Scores a CoreSpans; called from several threads at once.
using CoreScorer = std::function<std::vector<SpanScores>(const CoreSpans&)>;

/// One example's outcome: right or wrong, the chosen option, each option's mean loss (multiple
/// choice, schema), and its margin: the gap between the two lowest mean losses, or (language
/// modelling) the smallest top-two logit gap over the span, for telling near-ties apart.
struct CoreExample {
  bool correct = false;
  index_t predicted = 0;
  std::vector<double> option_losses;
  double margin = 0;
  index_t line = 0;     // the item's line in its data file
  bool scored = false;  // false: left to another shard (CoreOptions::shards)
};

/// The decision of the release's evaluate_example from a scorer's answer.
inline CoreExample decide(TaskType type, const CoreSpans& s, const std::vector<SpanScores>& sc, index_t gold) {
  CoreExample r;
  if (type == TaskType::LanguageModeling) {
    r.correct = true;
    r.margin = std::numeric_limits<double>::infinity();
    const auto& row = s.rows[0];
    for (std::size_t i = 0; i < sc[0].argmax.size(); ++i) {
      r.correct = r.correct && sc[0].argmax[i] == row[static_cast<std::size_t>(s.start[0]) + i];
      r.margin = std::min(r.margin, sc[0].gap[i]);
    }
    return r;
  }
  for (const auto& x : sc) {
    double sum = 0;
    for (double l : x.loss) sum += l;
    r.option_losses.push_back(x.loss.empty() ? NAN
                                             : sum / static_cast<double>(x.loss.size()));  // torch: mean of none is nan
  }
  // Python's min() keeps the first of equals and never replaces a leading nan; list.index finds it
  double best = r.option_losses[0];
  for (double v : r.option_losses)
    if (v < best) best = v;
  for (std::size_t i = 0; i < r.option_losses.size(); ++i)
    if (r.option_losses[i] == best || (i == 0 && std::isnan(best))) {
      r.predicted = static_cast<index_t>(i);
      break;
    }
  r.correct = r.predicted == gold;
  double second = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < r.option_losses.size(); ++i)
    if (static_cast<index_t>(i) != r.predicted) second = std::min(second, r.option_losses[i]);
  r.margin = second - best;
  return r;
}

/// Options of evaluate_core.
struct CoreOptions {
  index_t max_per_task = -1;       // items per task after the shuffle (<= 0: all)
  std::vector<std::string> tasks;  // labels to run, in the bundle's order (empty: all)
  // Sharding over processes: only the examples e (numbered over the chosen tasks in order) with
  // e % shards == shard are scored; the shards' reports merge with merge_core.
  index_t shards = 1, shard = 0;
};

/// Progress of evaluate_core, reported after each example (serialised).
struct CoreProgress {
  std::size_t task = 0, tasks = 0;
  std::string label;
  index_t done = 0, total = 0;  // examples over all selected tasks
};

struct CoreTaskResult {
  CoreTask task;
  index_t examples = 0;
  double accuracy = 0, centered = 0, seconds = 0;
  std::vector<CoreExample> per_example;
};

struct CoreReport {
  std::vector<CoreTaskResult> tasks;
  double core_metric = 0;  // mean centered accuracy
};

/// One example: its prompts, spans, scores and decision.
inline CoreExample evaluate_example(const CoreTask& t, const std::vector<CoreItem>& data, index_t idx,
                                    const data::TextTokenizer& tok, const CoreScorer& score) {
  const auto prompts = render_prompts(t, data, idx);
  const CoreItem& item = data[static_cast<std::size_t>(idx)];
  const CoreSpans s =
      token_spans(t.type, prompts, tok, "task " + t.label + ", item of line " + std::to_string(item.line));
  return decide(t.type, s, score(s), item.gold);
}

/// Each task's accuracy and centered accuracy over its scored examples, and the CORE metric, the
/// mean centered accuracy (what evaluate_core ends with, and merge_core after merging shards).
inline void summarize(CoreReport& rep) {
  rep.core_metric = 0;
  for (auto& tr : rep.tasks) {
    index_t right = 0, scored = 0;
    for (const auto& e : tr.per_example) right += e.correct ? 1 : 0, scored += e.scored ? 1 : 0;
    tr.accuracy = scored > 0 ? static_cast<double>(right) / static_cast<double>(scored) : NAN;
    tr.centered = (tr.accuracy - 0.01 * tr.task.random_baseline) / (1.0 - 0.01 * tr.task.random_baseline);
    rep.core_metric += tr.centered;
  }
  if (!rep.tasks.empty()) rep.core_metric /= static_cast<double>(rep.tasks.size());
}

/// The shards' reports of one bundle and options (CoreOptions::shards) as one: each example from
/// the shard that scored it, each task's seconds the longest shard's; an lrt::Error when the
/// reports do not match or an example was scored by none or by two.
inline CoreReport merge_core(const std::vector<CoreReport>& shards) {
  check(!shards.empty(), "core", "no reports to merge");
  CoreReport out = shards[0];
  for (std::size_t r = 1; r < shards.size(); ++r) {
    check(shards[r].tasks.size() == out.tasks.size(), "core", "shard ", r, " has ", shards[r].tasks.size(),
          " tasks, shard 0 has ", out.tasks.size());
    for (std::size_t k = 0; k < out.tasks.size(); ++k) {
      auto& to = out.tasks[k];
      const auto& from = shards[r].tasks[k];
      check(from.task.label == to.task.label && from.per_example.size() == to.per_example.size(), "core", "shard ", r,
            "'s task ", k, " (", from.task.label, ", ", from.per_example.size(), " examples) is not shard 0's (",
            to.task.label, ", ", to.per_example.size(), ")");
      to.seconds = std::max(to.seconds, from.seconds);
      for (std::size_t i = 0; i < to.per_example.size(); ++i)
        if (from.per_example[i].scored) {
          check(!to.per_example[i].scored, "core", "task ", to.task.label, ", example ", i, " was scored twice");
          to.per_example[i] = from.per_example[i];
        }
    }
  }
  for (const auto& t : out.tasks)
    for (std::size_t i = 0; i < t.per_example.size(); ++i)
      check(t.per_example[i].scored, "core", "task ", t.task.label, ", example ", i, " was scored by no shard");
  summarize(out);
  return out;
}

/// CORE over the bundle's tasks (or o.tasks), examples spread over the thread pool (and, with
/// o.shards > 1, this shard's examples only).
inline CoreReport evaluate_core(const CoreBundle& b, const CoreOptions& o, const data::TextTokenizer& tok,
                                const CoreScorer& score,
                                const std::function<void(const CoreProgress&)>& progress = {}) {
  std::vector<const CoreTask*> chosen;
  if (o.tasks.empty()) {
    for (const auto& t : b.tasks()) chosen.push_back(&t);
  } else {
    for (const auto& t : b.tasks())
      if (std::find(o.tasks.begin(), o.tasks.end(), t.label) != o.tasks.end()) chosen.push_back(&t);
    for (const auto& l : o.tasks) (void)b.task(l);  // an unknown label is an error
  }
  check(o.shards >= 1 && o.shard >= 0 && o.shard < o.shards, "core", "shard ", o.shard, " of ", o.shards,
        ": needs 0 <= shard < shards");
  std::vector<std::vector<CoreItem>> data;
  std::vector<index_t> first;  // the number of task k's first example over all chosen tasks
  index_t all = 0, total = 0;
  for (const CoreTask* t : chosen) {
    data.push_back(b.task_data(*t, o.max_per_task));
    const index_t n = static_cast<index_t>(data.back().size());
    first.push_back(all);
    for (index_t e = all; e < all + n; ++e) total += e % o.shards == o.shard ? 1 : 0;
    all += n;
  }
  CoreReport rep;
  std::mutex mu;
  index_t done = 0;
  for (std::size_t k = 0; k < chosen.size(); ++k) {
    const CoreTask& t = *chosen[k];
    const auto& items = data[k];
    const index_t n = static_cast<index_t>(items.size());
    CoreTaskResult tr;
    tr.task = t;
    tr.examples = n;
    tr.per_example.resize(static_cast<std::size_t>(n));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<index_t> mine;  // this shard's examples of the task
    for (index_t i = 0; i < n; ++i)
      if ((first[k] + i) % o.shards == o.shard) mine.push_back(i);
    const index_t m = static_cast<index_t>(mine.size());
    std::atomic<index_t> next{0};
    const index_t workers = std::min<index_t>(m, lrt::num_threads());
    if (workers > 0)
      lrt::parallel_for(workers, 1, [&](index_t w0, index_t w1) {
        for (index_t w = w0; w < w1; ++w)
          for (index_t j = next++; j < m; j = next++) {
            const index_t i = mine[static_cast<std::size_t>(j)];
            auto& e = tr.per_example[static_cast<std::size_t>(i)];
            e = evaluate_example(t, items, i, tok, score);
            e.line = items[static_cast<std::size_t>(i)].line;
            e.scored = true;
            if (progress) {
              std::lock_guard<std::mutex> lk(mu);
              progress({k, chosen.size(), t.label, ++done, total});
            }
          }
      });
    tr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.tasks.push_back(std::move(tr));
  }
  summarize(rep);
  return rep;
}

}  // namespace eval
}  // namespace v0
}  // namespace lrt
