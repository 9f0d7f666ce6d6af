// lrt-ablate's pieces that start no process: the grid file (parsing, the arms and runs it expands
// to), the statistics over seeds, and the results it writes (results.csv, results.md and two SVG
// plots through tool::Plot, no plotting dependency). examples/tools/ablate.cpp runs the grid with lrt-train and
// lrt-eval.
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <lrt/io/json.hpp>

#include "tool_util.hpp"

namespace ablate {

/// A mistake in the grid file, "FILE:LINE: what": exit status 2, without the usage text (the
/// command line was fine).
struct GridError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The shortest text that reads back to v ("0.5", "2", "1e+05").
inline std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// A budget as it names a run directory: the shortest scientific form without '+' or leading
/// exponent zeros (2e5, 1.325e6, 5e-1), so that "2e5" and "200000" in a grid name the same runs.
inline std::string budget_label(double b) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, b, std::chars_format::scientific);
  const std::string s(buf, r.ptr);  // "2e+05"
  const std::size_t e = s.find('e');
  std::string exp = s.substr(e + 1);
  const bool negative = exp[0] == '-';
  exp.erase(0, 1);
  exp.erase(0, std::min(exp.find_first_not_of('0'), exp.size() - 1));
  return s.substr(0, e) + "e" + (negative ? "-" : "") + exp;
}

/// A JSON number for a budget: an exact integer when it is one (so the CSV says 200000, not 2e+05).
inline lrt::json::Value budget_value(double b) {
  if (b == std::trunc(b) && b < 9e15) return lrt::json::Value(static_cast<long long>(b));
  return lrt::json::Value(b);
}

/// Characters an arm name keeps in a directory name (and in CSV and SVG text without escaping).
inline bool safe_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || std::string_view("._:=+@-").find(c) != std::string::npos;
}
inline bool safe_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && std::all_of(s.begin(), s.end(), safe_name_char);
}
inline std::string sanitize_name(std::string s) {
  for (char& c : s)
    if (!safe_name_char(c)) c = '_';
  return s == "." || s == ".." ? "_" : s;
}

/// Splits a grid line into tokens: whitespace separates them, double quotes group (so "" is an
/// empty token and "--mem-offset 2" one token), and '#' outside quotes starts a comment.
inline std::vector<std::string> split_line(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  std::string cur;
  bool in_token = false, quoted = false;
  for (const char c : line) {
    if (quoted) {
      if (c == '"')
        quoted = false;
      else
        cur += c;
    } else if (c == '"') {
      quoted = in_token = true;
    } else if (c == '#') {
      break;
    } else if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      if (in_token) out.push_back(cur);
      cur.clear(), in_token = false;
    } else {
      cur += c, in_token = true;
    }
  }
  if (quoted) throw GridError(where + ": a double quote is not closed");
  if (in_token) out.push_back(cur);
  return out;
}

/// Whitespace-separated words of an option set ("--mem-offset 2" -> {"--mem-offset", "2"}).
inline std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::string cur;
  for (const char c : s + ' ') {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) {
      cur += c;
    } else if (!cur.empty()) {
      w.push_back(cur);
      cur.clear();
    }
  }
  return w;
}

/// An option set as it appears in an arm name: "--mem-offset 2 --kv-refresh" -> "mem-offset=2+kv-refresh".
inline std::string squash_options(const std::vector<std::string>& w) {
  std::string s;
  for (std::size_t i = 0; i < w.size(); ++i) {
    std::string part = w[i].rfind("--", 0) == 0 ? w[i].substr(2) : w[i];
    if (w[i].rfind("--", 0) == 0 && i + 1 < w.size() && w[i + 1].rfind("--", 0) != 0) part += "=" + w[++i];
    s += (s.empty() ? "" : "+") + part;
  }
  return s;
}

/// The value of `--name V` or `--name=V` in flags (the last one, as lrt-train reads them).
inline std::optional<std::string> flag_value(const std::vector<std::string>& flags, const std::string& name) {
  std::optional<std::string> v;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] == "--" + name && i + 1 < flags.size())
      v = flags[i + 1];
    else if (flags[i].rfind("--" + name + "=", 0) == 0)
      v = flags[i].substr(name.size() + 3);
  }
  return v;
}
/// The occurrences of the options `names` (each taking a value) in flags, in order.
inline std::vector<std::string> pick_flags(const std::vector<std::string>& flags,
                                           const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < flags.size(); ++i)
    for (const std::string& n : names) {
      if (flags[i] == "--" + n && i + 1 < flags.size()) {
        out.insert(out.end(), {flags[i], flags[i + 1]});
        ++i;
        break;
      }
      if (flags[i].rfind("--" + n + "=", 0) == 0) {
        out.push_back(flags[i]);
        break;
      }
    }
  return out;
}
/// flags without the options `names` (each "--name VALUE" or "--name=VALUE"): the ones that take values.
inline std::vector<std::string> drop_flags(const std::vector<std::string>& flags,
                                           const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    bool dropped = false;
    for (const std::string& n : names) {
      if (flags[i] == "--" + n) {
        ++i, dropped = true;  // and its value
        break;
      }
      if (flags[i].rfind("--" + n + "=", 0) == 0) {
        dropped = true;
        break;
      }
    }
    if (!dropped) out.push_back(flags[i]);
  }
  return out;
}
inline bool has_flag(const std::vector<std::string>& flags, const std::string& name) {
  return std::any_of(flags.begin(), flags.end(),
                     [&](const std::string& f) { return f == "--" + name || f.rfind("--" + name + "=", 0) == 0; });
}

/// A grid file as written (grid.txt's format: examples/tools/ablate.cpp's usage).
struct Grid {
  std::string path;
  struct ArmLine {  // an `arm NAME FLAGS...` line
    std::string name;
    std::vector<std::string> flags;
    int line = 0;
  };
  std::vector<std::string> variants, schedules;
  std::vector<int> variant_lines;        // the line of each variant
  std::vector<std::string> option_sets;  // "" = none
  std::vector<ArmLine> arms;
  struct PairLine {  // a `pair ARM BASE [FACTOR]` line: BASE also runs at FACTOR x each budget
    std::string arm, base;
    double factor = 0.5;
    int line = 0;
  };
  std::vector<PairLine> pairs;
  std::vector<double> budgets, lr_scales;
  std::vector<long long> seeds;
  std::vector<std::string> train_flags, eval_flags;
  std::string baseline, data;
  long long train_gap_bytes = 0;  // `train-gap BYTES`: each run also scored on its training split's first BYTES
  // `core DIR [--mode M] [--max-per-task K] [--tasks A,B]`: each run also scored on CORE (lrt-eval --core)
  std::string core_dir;
  std::vector<std::string> core_flags;
  int schedules_line = 0, options_line = 0, baseline_line = 0, data_line = 0, train_gap_line = 0, core_line = 0;
  /// The CORE mode of the core line: parallel (the default) or sequential.
  std::string core_mode() const { return flag_value(core_flags, "mode").value_or("parallel"); }

  std::string where(int line) const { return fmt::format("{}:{}", path, line); }
};

/// The options lrt-ablate gives each run itself: a grid may not set them.
inline const std::vector<std::string>& reserved_train_flags() {
  static const std::vector<std::string> r{"out",   "data", "resume",           "seed",    "budget-forwards",
                                          "steps", "time", "tokens-per-param", "lr-scale"};
  return r;
}
inline const std::vector<std::string>& reserved_eval_flags() {
  static const std::vector<std::string> r{"checkpoint", "data", "json"};
  return r;
}
inline void check_reserved(const std::vector<std::string>& flags, const std::vector<std::string>& reserved,
                           const std::string& where, const std::string& what) {
  for (const std::string& r : reserved)
    if (has_flag(flags, r))
      throw GridError(fmt::format("{}: {} may not set --{}: lrt-ablate sets it for each run", where, what, r));
}

namespace detail {
inline double parse_number(const std::string& s, const std::string& where, const std::string& what) {
  const std::optional<double> v = tool::parse_finite(s);
  if (!v) throw GridError(fmt::format("{}: {} expects numbers, got '{}'", where, what, s));
  return *v;
}
template <class T>
void add_unique(std::vector<T>& to, const T& v, const std::string& shown, const std::string& where,
                const std::string& what) {
  if (std::find(to.begin(), to.end(), v) != to.end())
    throw GridError(fmt::format("{}: {} {} is given twice", where, what, shown));
  to.push_back(v);
}
}  // namespace detail

/// Parses a grid file's text (path names it in messages). Keys may repeat: list keys append.
inline Grid parse_grid(const std::string& text, const std::string& path) {
  Grid g;
  g.path = path;
  int line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    ++line_no;
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const std::string where = g.where(line_no);
    std::vector<std::string> t = split_line(line, where);
    if (t.empty()) continue;
    const std::string key = t[0];
    t.erase(t.begin());
    if (t.empty()) throw GridError(fmt::format("{}: '{}' needs at least one value", where, key));
    auto once = [&](int& seen) {
      if (seen != 0) throw GridError(fmt::format("{}: '{}' was already given on line {}", where, key, seen));
      seen = line_no;
    };
    if (key == "variants") {
      for (const std::string& v : t) {
        detail::add_unique(g.variants, v, "'" + v + "'", where, "variant");
        g.variant_lines.push_back(line_no);
      }
    } else if (key == "schedules") {
      if (g.schedules_line == 0) g.schedules_line = line_no;
      for (const std::string& s : t) detail::add_unique(g.schedules, s, "'" + s + "'", where, "schedule");
    } else if (key == "options") {
      if (g.options_line == 0) g.options_line = line_no;
      for (const std::string& o : t) {
        const std::vector<std::string> w = words(o);
        if (!w.empty() && w[0].rfind("--", 0) != 0)
          throw GridError(fmt::format("{}: option set '{}' must start with an option (--name)", where, o));
        check_reserved(w, reserved_train_flags(), where, "an option set");
        detail::add_unique(g.option_sets, o, "'" + o + "'", where, "option set");
      }
    } else if (key == "arm") {
      Grid::ArmLine a{t[0], {t.begin() + 1, t.end()}, line_no};
      if (!safe_name(a.name))
        throw GridError(fmt::format("{}: arm name '{}' must be a directory name of letters, digits and . _ : = + @ -",
                                    where, a.name));
      // An arm may fix its own --lr-scale (a rate chosen by an earlier sweep) where the grid sweeps none.
      std::vector<std::string> reserved = reserved_train_flags();
      reserved.erase(std::find(reserved.begin(), reserved.end(), "lr-scale"));
      check_reserved(a.flags, reserved, where, "an arm");
      if (const auto f = flag_value(a.flags, "lr-scale"); f && !(tool::parse_finite(*f).value_or(0) > 0))
        throw GridError(fmt::format("{}: arm '{}': --lr-scale must be a number > 0, got '{}'", where, a.name, *f));
      g.arms.push_back(std::move(a));
    } else if (key == "pair") {
      if (t.size() < 2 || t.size() > 3)
        throw GridError(
            fmt::format("{}: 'pair' takes an arm, the arm it is matched to and a budget factor "
                        "(default 0.5), e.g. 'pair lrt baseline 0.5'; got {} values",
                        where, t.size()));
      Grid::PairLine pl{t[0], t[1], 0.5, line_no};
      if (t.size() == 3) pl.factor = detail::parse_number(t[2], where, "pair's factor");
      if (!(pl.factor > 0 && pl.factor < 1e6))
        throw GridError(fmt::format("{}: a pair's budget factor must be > 0, got '{}'", where, t[2]));
      if (pl.arm == pl.base) throw GridError(fmt::format("{}: arm '{}' is paired with itself", where, pl.arm));
      g.pairs.push_back(std::move(pl));
    } else if (key == "budgets") {
      for (const std::string& s : t) {
        const double b = detail::parse_number(s, where, "budgets");
        if (!(b >= 1))
          throw GridError(fmt::format("{}: budgets are token-forwards and must be at least 1, got '{}'", where, s));
        detail::add_unique(g.budgets, b, "'" + s + "'", where, "budget");
      }
    } else if (key == "seeds") {
      for (const std::string& s : t) {
        const bool digits = !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        });
        if (!digits) throw GridError(fmt::format("{}: seeds must be non-negative integers, got '{}'", where, s));
        detail::add_unique(g.seeds, std::stoll(s), "'" + s + "'", where, "seed");
      }
    } else if (key == "lr-sweep") {
      for (const std::string& s : t) {
        const double f = detail::parse_number(s, where, "lr-sweep");
        if (!(f > 0)) throw GridError(fmt::format("{}: lr-sweep factors must be > 0, got '{}'", where, s));
        detail::add_unique(g.lr_scales, f, "'" + s + "'", where, "lr-sweep factor");
      }
    } else if (key == "train") {
      check_reserved(t, reserved_train_flags(), where, "the train line");
      for (const char* f : {"variant", "schedule"})
        if (has_flag(t, f))
          throw GridError(fmt::format("{}: the train line may not set --{}: the arms choose it", where, f));
      g.train_flags.insert(g.train_flags.end(), t.begin(), t.end());
    } else if (key == "eval") {
      check_reserved(t, reserved_eval_flags(), where, "the eval line");
      g.eval_flags.insert(g.eval_flags.end(), t.begin(), t.end());
    } else if (key == "train-gap") {
      once(g.train_gap_line);
      const bool digits = t.size() == 1 && !t[0].empty() && t[0].size() <= 15 &&
                          std::all_of(t[0].begin(), t[0].end(),
                                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
      if (!digits || std::stoll(t[0]) < 1)
        throw GridError(fmt::format(
            "{}: 'train-gap' takes one value, the bytes of the training split to score (e.g. 'train-gap 308684'); "
            "got {} value(s), the first '{}'",
            where, t.size(), t[0]));
      g.train_gap_bytes = std::stoll(t[0]);
    } else if (key == "core") {
      once(g.core_line);
      g.core_dir = t[0];
      g.core_flags.assign(t.begin() + 1, t.end());
      const std::string usage =
          "'core' takes a CORE bundle's folder, then lrt-eval's --mode parallel|sequential, --max-per-task K and "
          "--tasks A,B (e.g. 'core ~/core --mode sequential --max-per-task 100')";
      for (std::size_t i = 0; i < g.core_flags.size(); i += 2) {
        const std::string& f = g.core_flags[i];
        if (f != "--mode" && f != "--max-per-task" && f != "--tasks")
          throw GridError(fmt::format("{}: {}; got '{}'", where, usage, f));
        if (i + 1 == g.core_flags.size()) throw GridError(fmt::format("{}: {} needs a value", where, f));
      }
      if (const std::string m = g.core_mode(); m != "parallel" && m != "sequential")
        throw GridError(fmt::format("{}: the core line's --mode must be parallel or sequential, got '{}'", where, m));
    } else if (key == "baseline" || key == "data") {
      if (t.size() != 1) throw GridError(fmt::format("{}: '{}' takes one value, got {}", where, key, t.size()));
      once(key == "baseline" ? g.baseline_line : g.data_line);
      (key == "baseline" ? g.baseline : g.data) = t[0];
    } else {
      throw GridError(fmt::format(
          "{}: unknown key '{}' (known: variants, schedules, options, arm, pair, budgets, seeds, train, eval, "
          "train-gap, core, lr-sweep, baseline, data)",
          where, key));
    }
  }
  if (g.variants.empty() && g.arms.empty())
    throw GridError(g.path + ": no arms: give a 'variants' line or 'arm' lines");
  for (const Grid::ArmLine& a : g.arms)
    if (!g.lr_scales.empty() && has_flag(a.flags, "lr-scale"))
      throw GridError(
          fmt::format("{}: arm '{}' sets --lr-scale and the grid has an lr-sweep, which sets it for each run",
                      g.where(a.line), a.name));
  if (g.budgets.empty()) throw GridError(g.path + ": no budgets: give a 'budgets' line (token-forwards per run)");
  if (g.variants.empty() && !g.schedules.empty())
    throw GridError(fmt::format("{}: 'schedules' is crossed with 'variants', and there is no variants line",
                                g.where(g.schedules_line)));
  if (g.variants.empty() && !g.option_sets.empty())
    throw GridError(fmt::format("{}: 'options' is crossed with 'variants', and there is no variants line",
                                g.where(g.options_line)));
  if (g.seeds.empty()) g.seeds = {0};
  return g;
}

/// A (variant, schedule) pair lrt-train was built with (its --list-variants lines).
struct Pair {
  std::string variant, schedule;
};

/// The pairs in `lrt-train --list-variants` output: "--variant NAME --schedule SPEC" lines (the
/// "--device cuda ..." lines, pairs of another device, are left out).
inline std::vector<Pair> parse_pairs(const std::string& text) {
  std::vector<Pair> pairs;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::vector<std::string> w = words(text.substr(at, end - at));
    at = end + 1;
    if (w.size() == 4 && w[0] == "--variant" && w[2] == "--schedule") pairs.push_back({w[1], w[3]});
  }
  return pairs;
}

/// One arm: its name (a directory name) and the lrt-train flags that make it.
struct Arm {
  std::string name, variant, schedule;  // schedule empty: the variant's default
  std::vector<std::string> flags;
  int line = 0;
};

/// "--variant a --schedule x, --variant b --schedule y": what a build has, for messages.
inline std::string pairs_text(const std::vector<Pair>& built) {
  std::string s;
  for (const Pair& p : built)
    s += (s.empty() ? "" : ", ") + fmt::format("--variant {} --schedule {}", p.variant, p.schedule);
  return s.empty() ? "(nothing)" : s;
}

/// The grid's arms: variants x schedules x option sets, then the explicit arms. A (variant,
/// schedule) the build lacks is skipped with a note; a variant with none of the schedules runs
/// once with its default; a variant the build lacks altogether is an error.
inline std::vector<Arm> expand_arms(const Grid& g, const std::vector<Pair>& built, std::vector<std::string>& notes) {
  auto has = [&](const std::string& v, const std::string& s) {
    return std::any_of(built.begin(), built.end(),
                       [&](const Pair& p) { return p.variant == v && (s.empty() || p.schedule == s); });
  };
  auto lacking = [&](int line, const std::string& v, const std::string& s) {
    return GridError(fmt::format("{}: this build of lrt-train has no variant '{}'{}; it has: {}", g.where(line), v,
                                 s.empty() ? "" : " with schedule '" + s + "'", pairs_text(built)));
  };
  std::vector<Arm> arms;
  const std::vector<std::string> no_options{""};
  for (std::size_t vi = 0; vi < g.variants.size(); ++vi) {
    const std::string& v = g.variants[vi];
    if (!has(v, "")) throw lacking(g.variant_lines[vi], v, "");
    std::vector<std::string> scheds, skipped;
    for (const std::string& s : g.schedules) (has(v, s) ? scheds : skipped).push_back(s);
    if (scheds.empty()) {
      if (!g.schedules.empty()) notes.push_back(fmt::format("{} has none of the schedules: runs with its default", v));
      scheds.push_back("");
    } else {
      for (const std::string& s : skipped) notes.push_back(fmt::format("{}@{} is not in this build: skipped", v, s));
    }
    for (const std::string& s : scheds)
      for (const std::string& o : g.option_sets.empty() ? no_options : g.option_sets) {
        Arm a;
        a.variant = v, a.schedule = s, a.line = g.variant_lines[vi];
        a.name = v + (s.empty() || g.schedules.empty() ? "" : "@" + s);
        const std::vector<std::string> w = words(o);
        if (!w.empty()) a.name += "+" + squash_options(w);
        a.name = sanitize_name(a.name);
        a.flags = {"--variant", v};
        if (!s.empty()) a.flags.insert(a.flags.end(), {"--schedule", s});
        a.flags.insert(a.flags.end(), w.begin(), w.end());
        arms.push_back(std::move(a));
      }
  }
  for (const Grid::ArmLine& e : g.arms) {
    Arm a;
    a.name = e.name, a.flags = e.flags, a.line = e.line;
    a.variant = flag_value(e.flags, "variant").value_or("lrt");  // lrt-train's default
    a.schedule = flag_value(e.flags, "schedule").value_or("");
    if (!has(a.variant, a.schedule)) throw lacking(e.line, a.variant, a.schedule);
    arms.push_back(std::move(a));
  }
  std::map<std::string, int> seen;
  for (const Arm& a : arms)
    if (const auto [it, fresh] = seen.emplace(a.name, a.line); !fresh)
      throw GridError(
          fmt::format("{}: arm '{}' is named twice (also on line {})", g.where(a.line), a.name, it->second));
  if (arms.empty()) throw GridError(g.path + ": no arms left to run");
  for (const Grid::PairLine& p : g.pairs)
    for (const std::string& n : {p.arm, p.base})
      if (seen.count(n) == 0) {
        std::string list;
        for (const Arm& a : arms) list += (list.empty() ? "" : ", ") + a.name;
        throw GridError(fmt::format("{}: pair: '{}' is not one of the arms ({})", g.where(p.line), n, list));
      }
  return arms;
}

/// The arm the differences are taken against: the grid's baseline line, else the arm named
/// baseline, else the first.
inline std::string baseline_arm(const Grid& g, const std::vector<Arm>& arms) {
  auto named = [&](const std::string& n) {
    return std::any_of(arms.begin(), arms.end(), [&](const Arm& a) { return a.name == n; });
  };
  if (!g.baseline.empty()) {
    if (!named(g.baseline)) {
      std::string list;
      for (const Arm& a : arms) list += (list.empty() ? "" : ", ") + a.name;
      throw GridError(
          fmt::format("{}: baseline '{}' is not one of the arms ({})", g.where(g.baseline_line), g.baseline, list));
    }
    return g.baseline;
  }
  return named("baseline") ? "baseline" : arms.front().name;
}

/// One run of the grid: an arm at a budget, a seed and (swept) a learning-rate scale.
struct Run {
  std::size_t arm = 0;
  double budget = 0;
  long long seed = 0;
  std::optional<double> lr;
  std::string dir;  // OUT/runs/<arm>/f<budget>/s<seed>[/lr<F>]
  std::string label(const std::vector<Arm>& arms) const {
    return fmt::format("{} f{} s{}{}", arms[arm].name, budget_label(budget), seed, lr ? " lr" + shortest(*lr) : "");
  }
};

/// The budgets an arm runs at: the grid's, and for the base of a pair the pair's factor times each.
inline std::vector<double> arm_budgets(const Grid& g, const std::string& arm) {
  std::vector<double> b = g.budgets;
  for (const Grid::PairLine& p : g.pairs)
    if (p.base == arm)
      for (double x : g.budgets) b.push_back(x * p.factor);
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

/// The runs, smallest budget first (every arm at a budget before the next budget: early results
/// compare arms), then seed, arm and learning-rate scale. Every arm runs at the grid's budgets;
/// the base arm of a pair also at the pair's budgets (a run two lines ask for runs once).
inline std::vector<Run> expand_runs(const Grid& g, const std::vector<Arm>& arms, const std::string& out) {
  std::vector<std::vector<double>> per_arm;
  std::vector<double> budgets;
  for (const Arm& a : arms) {
    per_arm.push_back(arm_budgets(g, a.name));
    budgets.insert(budgets.end(), per_arm.back().begin(), per_arm.back().end());
  }
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  std::vector<std::optional<double>> lrs;
  for (double f : g.lr_scales) lrs.emplace_back(f);
  if (lrs.empty()) lrs.emplace_back();
  std::vector<Run> runs;
  std::set<std::string> dirs;
  for (double b : budgets)
    for (long long s : g.seeds)
      for (std::size_t a = 0; a < arms.size(); ++a) {
        if (!std::binary_search(per_arm[a].begin(), per_arm[a].end(), b)) continue;
        for (const auto& lr : lrs) {
          Run r{a, b, s, lr, ""};
          r.dir = fmt::format("{}/runs/{}/f{}/s{}{}", out, arms[a].name, budget_label(b), s,
                              lr ? "/lr" + shortest(*lr) : "");
          if (!dirs.insert(r.dir).second)  // budgets differing past their shortest form cannot
            throw GridError(fmt::format("{}: two runs would share the directory {}", g.path, r.dir));
          runs.push_back(std::move(r));
        }
      }
  return runs;
}

// ---------------------------------------------------------------------------------------------
// Results

/// A finished run, read back from its result.json.
struct Result {
  lrt::json::Value json;
  std::string arm;
  double budget = 0, lr_scale = 1, val_bpb = NAN, val_bpb_parallel = NAN, val_bpb_sequential = NAN;
  double train_bpb = NAN;  // the same model scored on its training split (grid line `train-gap`)
  double core = NAN;       // CORE (grid line `core`), in mode core_mode
  std::string core_mode;
  double tokens_per_param = NAN;
  long long seed = 0;
  bool recurrent = false;
  std::vector<double> passes;
};

inline double number_or_nan(const lrt::json::Value& j, const char* key) {
  const lrt::json::Value* v = j.find(key);
  return v != nullptr && v->is_number() ? v->as_number() : NAN;
}

/// Reads result.json's text (label names it in errors).
inline Result result_from_json(const std::string& text, const std::string& label) {
  Result r;
  r.json = lrt::json::parse(text, label);
  const lrt::json::Value& j = r.json;
  r.arm = j.at("arm").as_string();
  r.budget = j.at("budget").as_number();
  r.seed = j.at("seed").as_int();
  r.lr_scale = number_or_nan(j, "lr_scale");
  r.val_bpb = j.at("val_bpb").as_number();
  r.val_bpb_parallel = number_or_nan(j, "val_bpb_parallel");
  r.val_bpb_sequential = number_or_nan(j, "val_bpb_sequential");
  r.train_bpb = number_or_nan(j, "train_bpb");
  r.core = number_or_nan(j, "core");
  if (const lrt::json::Value* m = j.find("core_mode"); m != nullptr && m->is_string()) r.core_mode = m->as_string();
  r.tokens_per_param = number_or_nan(j, "tokens_per_param");
  r.recurrent = j.at("recurrent").as_bool();
  if (const lrt::json::Value* p = j.find("val_bpb_passes"); p != nullptr && p->is_array())
    for (const lrt::json::Value& x : p->items()) r.passes.push_back(x.as_number());
  return r;
}

/// Mean and sample standard deviation (NaN when n < 2) of finite values.
struct Stat {
  double mean = NAN, sd = NAN;
  int n = 0;
};
inline Stat stat_of(const std::vector<double>& xs) {
  Stat s;
  double sum = 0;
  for (double x : xs)
    if (std::isfinite(x)) sum += x, ++s.n;
  if (s.n == 0) return s;
  s.mean = sum / s.n;
  if (s.n > 1) {
    double ss = 0;
    for (double x : xs)
      if (std::isfinite(x)) ss += (x - s.mean) * (x - s.mean);
    s.sd = std::sqrt(ss / (s.n - 1));
  }
  return s;
}

/// "2.3456 ± 0.0123 (3)", "2.3456 ± – (1)", "" without values.
inline std::string cell(const Stat& s, bool sign = false) {
  if (s.n == 0) return "";
  const std::string sd = std::isnan(s.sd) ? "–" : fmt::format("{:.4f}", s.sd);
  return (sign ? fmt::format("{:+.4f}", s.mean) : fmt::format("{:.4f}", s.mean)) + fmt::format(" ± {} ({})", sd, s.n);
}

/// The grid's results: every finished run, and per (arm, budget) the learning-rate scale chosen.
class Results {
 public:
  Results(std::vector<Arm> arms, std::vector<double> budgets, std::string baseline, std::vector<Result> results)
      : arms_(std::move(arms)), budgets_(std::move(budgets)), baseline_(std::move(baseline)), all_(std::move(results)) {
    std::sort(budgets_.begin(), budgets_.end());
    choose_scales();
  }

  /// The runs of arm at budget at its chosen scale (all of them when nothing was swept).
  std::vector<const Result*> chosen(const std::string& arm, double budget) const {
    std::vector<const Result*> out;
    const auto c = chosen_.find({arm, budget});
    for (const Result& r : all_)
      if (r.arm == arm && r.budget == budget && (c == chosen_.end() || same_scale(r.lr_scale, c->second)))
        out.push_back(&r);
    return out;
  }
  Stat bpb(const std::string& arm, double budget) const {
    return stat_of(values(chosen(arm, budget), &Result::val_bpb));
  }
  Stat parallel(const std::string& arm, double budget) const {
    return stat_of(values(chosen(arm, budget), &Result::val_bpb_parallel));
  }
  /// val_bpb - train_bpb per run (the grid's train-gap line; no values without it).
  Stat train_gap(const std::string& arm, double budget) const {
    std::vector<double> d;
    for (const Result* r : chosen(arm, budget)) d.push_back(r->val_bpb - r->train_bpb);
    return stat_of(d);
  }
  /// CORE per run (the grid's core line; no values without it; higher is better).
  Stat core(const std::string& arm, double budget) const { return stat_of(values(chosen(arm, budget), &Result::core)); }
  /// The CORE mode of the runs scored ("" when none was).
  std::string core_mode() const {
    for (const Result& r : all_)
      if (std::isfinite(r.core)) return r.core_mode;
    return "";
  }
  bool has_train_bpb() const {
    return std::any_of(all_.begin(), all_.end(), [](const Result& r) { return std::isfinite(r.train_bpb); });
  }
  /// Per-seed differences arm - baseline at budget (both at their chosen scales).
  Stat difference(const std::string& arm, double budget) const { return paired(arm, budget, baseline_, budget); }
  /// Per-seed differences val_bpb(a at budget ba) - val_bpb(b at budget bb), each at its chosen
  /// scale: the seeds both have.
  Stat paired(const std::string& a, double ba, const std::string& b, double bb) const {
    std::map<long long, double> other;
    for (const Result* r : chosen(b, bb)) other[r->seed] = r->val_bpb;
    std::vector<double> d;
    for (const Result* r : chosen(a, ba))
      if (const auto it = other.find(r->seed); it != other.end()) d.push_back(r->val_bpb - it->second);
    return stat_of(d);
  }
  /// The mean tokens per parameter of arm's runs at budget (NaN without one).
  double tokens_per_param(const std::string& arm, double budget) const {
    return stat_of(values(chosen(arm, budget), &Result::tokens_per_param)).mean;
  }
  bool recurrent(const std::string& arm) const {
    return std::any_of(all_.begin(), all_.end(), [&](const Result& r) { return r.arm == arm && r.recurrent; });
  }
  bool swept() const {
    std::set<double> scales;
    for (const Result& r : all_) scales.insert(r.lr_scale);
    return scales.size() > 1 || (scales.size() == 1 && *scales.begin() != 1);  // `lr-sweep 2` too
  }
  std::optional<double> chosen_scale(const std::string& arm, double budget) const {
    const auto c = chosen_.find({arm, budget});
    return c == chosen_.end() ? std::nullopt : std::optional<double>(c->second);
  }
  const std::vector<Arm>& arms() const { return arms_; }
  const std::vector<double>& budgets() const { return budgets_; }
  const std::vector<Result>& all() const { return all_; }
  const std::string& baseline() const { return baseline_; }

  static std::vector<double> values(const std::vector<const Result*>& rs, double Result::*field) {
    std::vector<double> v;
    for (const Result* r : rs) v.push_back(r->*field);
    return v;
  }

 private:
  static bool same_scale(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
  /// The best scale of each (arm, budget): the lowest mean val_bpb over its seeds.
  void choose_scales() {
    std::map<std::pair<std::string, double>, std::map<double, std::vector<double>>> by;
    for (const Result& r : all_) by[{r.arm, r.budget}][r.lr_scale].push_back(r.val_bpb);
    for (const auto& [key, scales] : by) {
      double best = NAN, best_mean = INFINITY;
      for (const auto& [scale, v] : scales)
        if (const Stat s = stat_of(v); s.n > 0 && s.mean < best_mean) best = scale, best_mean = s.mean;
      if (best_mean < INFINITY) chosen_[key] = best;
    }
  }
  std::vector<Arm> arms_;
  std::vector<double> budgets_;
  std::string baseline_;
  std::vector<Result> all_;
  std::map<std::pair<std::string, double>, double> chosen_;
};

/// result.json's fields, in the order results.csv lists them.
inline const std::vector<std::string>& result_fields() {
  static const std::vector<std::string> f = words(
      "arm variant schedule budget seed lr_scale steps tokens token_forwards params matmul_params tokens_per_param "
      "train_seconds val_bpb val_bpb_parallel val_bpb_sequential val_bpb_passes recurrent train_bpb core core_mode "
      "run_dir");
  return f;
}

/// A JSON value as a CSV field: numbers as JSON writes them, arrays joined with ';', null empty.
inline std::string csv_field(const lrt::json::Value* v) {
  if (v == nullptr || v->is_null()) return "";
  std::string s;
  if (v->is_string()) {
    s = v->as_string();
  } else if (v->is_array()) {
    for (const lrt::json::Value& x : v->items()) s += (s.empty() ? "" : ";") + csv_field(&x);
  } else {
    s = v->dump();
  }
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

inline std::string results_csv(const Results& res) {
  std::string out;
  for (const std::string& f : result_fields()) out += (out.empty() ? "" : ",") + f;
  out += "\n";
  for (const Result& r : res.all()) {
    std::string row;
    for (std::size_t i = 0; i < result_fields().size(); ++i)
      row.append(i ? "," : "").append(csv_field(r.json.find(result_fields()[i])));
    out += row + "\n";
  }
  return out;
}

/// The header row of a table with a column per budget.
inline std::string budget_header(const std::string& first, const std::vector<double>& budgets, int label_columns = 1) {
  std::string h = "| " + first + " |", rule = "|---|";
  for (int i = 1; i < label_columns; ++i) rule += "---:|";
  for (double b : budgets) h += " f" + budget_label(b) + " |", rule += "---:|";
  return h + "\n" + rule + "\n";
}

/// The three per-seed differences of a pair at budget C: gap = arm(C) - base(C) (matched compute),
/// g = arm(C) - base(f C) (matched tokens when f is the base's token-forwards per token over the
/// arm's: 0.5 for an LRT schedule of pass factor 2), delta = base(f C) - base(C) (what the base
/// gains from 1/f times the tokens). gap = g + delta seed by seed.
struct PairStats {
  Stat gap, g, delta;
};
inline PairStats pair_stats(const Results& res, const Grid::PairLine& p, double budget) {
  const double half = budget * p.factor;
  return {res.paired(p.arm, budget, p.base, budget), res.paired(p.arm, budget, p.base, half),
          res.paired(p.base, half, p.base, budget)};
}

/// results.md: the tables the brief of a study asks for, from the finished runs. `pairs`: the
/// grid's pair lines, each with a table of gap, g and delta.
inline std::string results_md(const Results& res, const std::string& title, const std::string& grid_path,
                              const std::string& data, std::size_t total_runs, std::size_t seeds,
                              const std::vector<Grid::PairLine>& pairs = {},
                              const std::vector<std::string>& eval_flags = {}) {
  const auto& budgets = res.budgets();
  const bool swept = res.swept();
  std::string md = fmt::format("# Ablation {}\n\n", title);
  md += fmt::format("Grid `{}`, data `{}`: {} of {} runs finished ({} arms x {} budgets x {} seeds{}).\n\n", grid_path,
                    data, res.all().size(), total_runs, res.arms().size(), budgets.size(), seeds,
                    swept ? " x the lr-sweep scales" : "");
  const std::string split = flag_value(eval_flags, "split").value_or("val");
  const char* on = split == "tune"    ? "the tuning slice** (`--split tune`: held out of the training split)"
                   : split == "train" ? "the training split** (`--split train`)"
                   : split == "all"   ? "all of the text** (`--split all`)"
                                      : "the validation split**";
  md += fmt::format(
      "- Numbers are **bits per byte on {} (lrt-eval's val_bpb; lower is better). For LRT (recurrent) arms it is "
      "the sequential mode, the exact recurrence a deployed model runs.\n",
      on);
  md +=
      "- Budgets (columns, `f<budget>`) are the training compute in **token-forwards** (lrt-train "
      "--budget-forwards): a schedule of k passes trains on 1/k of the tokens.\n"
      "- Cells are mean ± sd over seeds (n runs); sd is the sample standard deviation, \"–\" when n = 1; blank: no "
      "finished run.\n";
  if (swept)
    md +=
        "- Each arm is reported at its best --lr-scale per budget (the lowest mean val_bpb over seeds), shown as "
        "`@F` after the cell; the last table lists every scale.\n";
  auto scale_note = [&](const std::string& arm, double b) {
    const auto s = res.chosen_scale(arm, b);
    return swept && s && !std::isnan(*s) ? " @" + shortest(*s) : "";
  };

  md += "\n## val_bpb\n\n" + budget_header("arm", budgets);
  for (const Arm& a : res.arms()) {
    md += "| " + a.name + (a.name == res.baseline() && a.name != "baseline" ? " (baseline)" : "") + " |";
    for (double b : budgets) {
      const Stat s = res.bpb(a.name, b);
      md.append(" ").append(cell(s)).append(s.n > 0 ? scale_note(a.name, b) : "").append(" |");
    }
    md += "\n";
  }

  md += fmt::format(
      "\n## Difference to the baseline arm, `{}`\n\nval_bpb of the arm minus the baseline's, paired by seed: mean ± sd "
      "of the per-seed differences (n pairs). Negative: better than the baseline.\n\n",
      res.baseline());
  md += budget_header("arm", budgets);
  for (const Arm& a : res.arms()) {
    if (a.name == res.baseline()) continue;
    md += "| " + a.name + " |";
    for (double b : budgets) md.append(" ").append(cell(res.difference(a.name, b), true)).append(" |");
    md += "\n";
  }

  for (const Grid::PairLine& p : pairs) {
    const std::string f = shortest(p.factor);
    md += fmt::format(
        "\n## Matched tokens: `{0}` against `{1}` at {2} x the budget\n\nThe gap at matched compute, split "
        "exactly into the arm's own effect at matched tokens and what `{1}` gains from more data (per-seed "
        "differences, mean ± sd (n pairs); negative: `{0}` better):\n\n"
        "- gap = {0}(C) − {1}(C): matched compute (the table above);\n"
        "- g = {0}(C) − {1}({2} C): matched tokens and steps when {2} is the ratio of their token-forwards per token "
        "(0.5 for an LRT schedule of pass factor 2): the arm's own effect;\n"
        "- δ = {1}({2} C) − {1}(C): what `{1}` gains from 1/{2} times the tokens.\n\n"
        "gap = g + δ seed by seed. `{1}`'s runs at {2} C are part of the grid (lrt-ablate schedules them).\n\n",
        p.arm, p.base, f);
    md += budget_header("", budgets);
    const auto row = [&](const char* name, Stat PairStats::*field) {
      md += fmt::format("| {} |", name);
      for (double b : budgets) md.append(" ").append(cell(pair_stats(res, p, b).*field, true)).append(" |");
      md += "\n";
    };
    row("gap", &PairStats::gap);
    row("g", &PairStats::g);
    row("δ", &PairStats::delta);
    md += fmt::format("| {} tokens/param |", p.base);
    for (double b : budgets) {
      const double t = res.tokens_per_param(p.base, b);
      md += std::isnan(t) ? std::string(" |") : fmt::format(" {:.3g} |", t);
    }
    md += "\n";
  }

  md +=
      "\n## Parallel-mode val_bpb (LRT arms)\n\nThe schedule's passes as trained (lrt-eval's val_bpb_parallel); "
      "compare with the sequential numbers above.\n\n";
  md += budget_header("arm", budgets);
  for (const Arm& a : res.arms()) {
    if (!res.recurrent(a.name)) continue;
    md += "| " + a.name + " |";
    for (double b : budgets) md.append(" ").append(cell(res.parallel(a.name, b))).append(" |");
    md += "\n";
  }

  if (res.has_train_bpb()) {
    md +=
        "\n## Validation − training split\n\nval_bpb minus the same model's bits per byte on the first bytes of "
        "the split it trained on (grid line `train-gap`; the same mode), per run: mean ± sd (n runs). Near zero: "
        "no sign of overfitting; positive and growing with the budget: the model fits its training bytes better "
        "than held-out ones.\n\n";
    md += budget_header("arm", budgets);
    for (const Arm& a : res.arms()) {
      md += "| " + a.name + " |";
      for (double b : budgets) md.append(" ").append(cell(res.train_gap(a.name, b), true)).append(" |");
      md += "\n";
    }
  }

  if (const std::string mode = res.core_mode(); !mode.empty()) {
    md += fmt::format(
        "\n## CORE ({} mode)\n\nThe CORE metric (lrt-eval --core, grid line `core`; higher is better: the mean over "
        "tasks of the accuracy centered on the task's random baseline) in {} mode{}, per run: mean ± sd (n runs), "
        "the runs of the val_bpb table.\n\n",
        mode, mode,
        mode == "sequential" ? " (the exact recurrence, token by token)"
                             : " (the memory at zero, as the release scores)");
    md += budget_header("arm", budgets);
    for (const Arm& a : res.arms()) {
      md += "| " + a.name + " |";
      for (double b : budgets) md.append(" ").append(cell(res.core(a.name, b))).append(" |");
      md += "\n";
    }
  }

  md += fmt::format("\n## Tokens per parameter of the baseline arm, `{}`\n\nTraining tokens / matmul parameters.\n\n",
                    res.baseline());
  md += budget_header("", budgets) + "| tokens/param |";
  for (double b : budgets) {
    const Stat s = stat_of(Results::values(res.chosen(res.baseline(), b), &Result::tokens_per_param));
    md += s.n > 0 ? fmt::format(" {:.3g} |", s.mean) : " |";
  }
  md += "\n";

  if (swept) {
    md += "\n## Learning-rate sweep\n\nval_bpb at every --lr-scale; * marks the scale chosen.\n\n";
    md += budget_header("arm | lr scale", budgets, 2);
    std::set<double> scales;
    for (const Result& r : res.all()) scales.insert(r.lr_scale);
    for (const Arm& a : res.arms())
      for (double sc : scales) {
        std::string row = "| " + a.name + " | " + shortest(sc) + " |";
        bool any = false;
        for (double b : budgets) {
          std::vector<double> v;
          for (const Result& r : res.all())
            if (r.arm == a.name && r.budget == b && r.lr_scale == sc) v.push_back(r.val_bpb);
          const Stat s = stat_of(v);
          any = any || s.n > 0;
          const auto c = res.chosen_scale(a.name, b);
          row.append(" ").append(cell(s)).append(s.n > 0 && c && *c == sc ? " *" : "").append(" |");
        }
        if (any) md += row + "\n";
      }
  }
  return md;
}

// ---------------------------------------------------------------------------------------------
// Plots (tool::Plot, cli/plot.hpp)

using tool::color;
using tool::Plot;
using tool::xml_escape;

/// A statistic per (arm, budget) against the budget, log scale, per arm: mean over seeds, bars ±sd.
inline std::string budget_svg(const Results& res, const std::string& heading, const std::string& y_label,
                              const std::function<Stat(const std::string&, double)>& stat) {
  double ylo = INFINITY, yhi = -INFINITY;
  for (const Arm& a : res.arms())
    for (double b : res.budgets())
      if (const Stat s = stat(a.name, b); s.n > 0) {
        const double e = std::isnan(s.sd) ? 0 : s.sd;
        ylo = std::min(ylo, s.mean - e), yhi = std::max(yhi, s.mean + e);
      }
  if (!(ylo <= yhi)) ylo = 0, yhi = 1;
  const auto& bs = res.budgets();
  const Plot p(std::log10(bs.front()), std::log10(bs.back()), ylo, yhi);
  std::string s = p.begin(heading, "budget (token-forwards, log scale)", y_label);
  for (double b : bs) s += p.x_tick(std::log10(b), budget_label(b));
  std::size_t k = 0;
  for (std::size_t i = 0; i < res.arms().size(); ++i) {
    const std::string& name = res.arms()[i].name;
    std::vector<std::pair<double, double>> pts;
    for (double b : bs)
      if (const Stat st = stat(name, b); st.n > 0) {
        pts.emplace_back(std::log10(b), st.mean);
        if (!std::isnan(st.sd)) s += p.error_bar(std::log10(b), st.mean, st.sd, color(i));
      }
    if (pts.empty()) continue;
    s += p.series(pts, color(i)) + p.legend(k++, name, color(i));
  }
  if (k == 0) s += p.note("no finished runs yet");
  return s + "</svg>\n";
}

/// bpb_vs_compute.svg: val_bpb against the budget.
inline std::string bpb_svg(const Results& res, const std::string& title) {
  return budget_svg(res, "val_bpb vs compute: " + title, "val_bpb (bits per byte, validation; lower is better)",
                    [&](const std::string& arm, double b) { return res.bpb(arm, b); });
}

/// core_vs_compute.svg: CORE against the budget (the grid's core line).
inline std::string core_svg(const Results& res, const std::string& title) {
  return budget_svg(res, fmt::format("CORE ({} mode) vs compute: {}", res.core_mode(), title),
                    "CORE (centered accuracy; higher is better)",
                    [&](const std::string& arm, double b) { return res.core(arm, b); });
}

/// pairs.svg: each pair's gap, g and delta (mean over seeds, bars ±sd) against the base arm's
/// tokens per parameter at the budget (log scale); a dotted line at zero.
inline std::string pairs_svg(const Results& res, const std::vector<Grid::PairLine>& pairs, const std::string& title) {
  struct Point {
    double x;
    Stat s;
  };
  std::vector<std::pair<std::string, std::vector<Point>>> series;
  double xlo = INFINITY, xhi = -INFINITY, ylo = 0, yhi = 0;
  for (const Grid::PairLine& p : pairs) {
    std::vector<Point> gap, g, delta;
    for (double b : res.budgets()) {
      const double t = res.tokens_per_param(p.base, b);
      if (!(t > 0)) continue;
      const PairStats ps = pair_stats(res, p, b);
      const double x = std::log10(t);
      for (auto [to, st] : {std::pair{&gap, ps.gap}, std::pair{&g, ps.g}, std::pair{&delta, ps.delta}}) {
        if (st.n == 0) continue;
        to->push_back({x, st});
        const double e = std::isnan(st.sd) ? 0 : st.sd;
        xlo = std::min(xlo, x), xhi = std::max(xhi, x);
        ylo = std::min(ylo, st.mean - e), yhi = std::max(yhi, st.mean + e);
      }
    }
    series.push_back({p.arm + " − " + p.base + ": gap", gap});
    series.push_back({p.arm + " − " + p.base + " at " + shortest(p.factor) + "C: g", g});
    series.push_back({p.base + " at " + shortest(p.factor) + "C − " + p.base + ": δ", delta});
  }
  if (!(xlo <= xhi)) xlo = 0, xhi = 1;
  if (xlo == xhi) xlo -= 0.5, xhi += 0.5;
  if (ylo == yhi) ylo -= 0.1, yhi += 0.1;
  const Plot p(xlo, xhi, ylo, yhi);
  std::string s =
      p.begin("matched compute and matched tokens: " + title, "tokens per parameter of the base arm (log scale)",
              "difference in val_bpb (bits per byte; negative: the first better)");
  for (double b : res.budgets())
    for (const Grid::PairLine& pl : pairs)
      if (const double t = res.tokens_per_param(pl.base, b); t > 0) {
        s += p.x_tick(std::log10(t), fmt::format("{:.3g}", t));
        break;
      }
  s += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#888\" stroke-dasharray=\"2 3\"/>\n",
                   Plot::l, Plot::W - Plot::r, p.Y(0), p.Y(0));
  std::size_t k = 0;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& [name, pts] = series[i];
    if (pts.empty()) continue;
    std::vector<std::pair<double, double>> xy;
    for (const Point& q : pts) {
      xy.emplace_back(q.x, q.s.mean);
      if (!std::isnan(q.s.sd)) s += p.error_bar(q.x, q.s.mean, q.s.sd, color(i));
    }
    s += p.series(xy, color(i)) + p.legend(k++, name, color(i));
  }
  if (k == 0) s += p.note(pairs.empty() ? "no pair lines in the grid" : "no finished pairs yet");
  return s + "</svg>\n";
}

/// passes.svg: the LRT arms' val_bpb per pass of the parallel schedule (mean over seeds) at each
/// arm's largest finished budget; a dashed line at the arm's sequential val_bpb.
inline std::string passes_svg(const Results& res, const std::string& title) {
  struct Line {
    std::string name;
    std::size_t color;
    double budget;
    std::vector<double> passes;
    double sequential;
  };
  std::vector<Line> lines;
  double ylo = INFINITY, yhi = -INFINITY, xmax = 0;
  for (std::size_t i = 0; i < res.arms().size(); ++i) {
    const std::string& name = res.arms()[i].name;
    if (!res.recurrent(name)) continue;
    for (auto b = res.budgets().rbegin(); b != res.budgets().rend(); ++b) {
      const auto rs = res.chosen(name, *b);
      if (rs.empty()) continue;
      Line ln{name, i, *b, {}, stat_of(Results::values(rs, &Result::val_bpb)).mean};
      for (std::size_t pass = 0;; ++pass) {
        std::vector<double> v;
        for (const Result* r : rs)
          if (pass < r->passes.size()) v.push_back(r->passes[pass]);
        if (v.empty()) break;
        ln.passes.push_back(stat_of(v).mean);
      }
      for (double v : ln.passes) ylo = std::min(ylo, v), yhi = std::max(yhi, v);
      if (std::isfinite(ln.sequential)) ylo = std::min(ylo, ln.sequential), yhi = std::max(yhi, ln.sequential);
      xmax = std::max(xmax, static_cast<double>(ln.passes.size()) - 1);
      lines.push_back(std::move(ln));
      break;
    }
  }
  if (!(ylo <= yhi)) ylo = 0, yhi = 1;
  const Plot p(0, xmax, ylo, yhi);
  std::string s = p.begin("val_bpb per pass (parallel schedule): " + title, "pass (dashed: the sequential recurrence)",
                          "val_bpb (bits per byte, validation)");
  for (int i = 0; i <= static_cast<int>(xmax); ++i) s += p.x_tick(i, std::to_string(i));
  for (std::size_t k = 0; k < lines.size(); ++k) {
    const Line& ln = lines[k];
    std::vector<std::pair<double, double>> pts;
    for (std::size_t i = 0; i < ln.passes.size(); ++i) pts.emplace_back(static_cast<double>(i), ln.passes[i]);
    if (!pts.empty()) s += p.series(pts, color(ln.color));
    if (std::isfinite(ln.sequential))
      s += fmt::format(
          "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-dasharray=\"5 3\"/>\n", Plot::l,
          Plot::W - Plot::r, p.Y(ln.sequential), p.Y(ln.sequential), color(ln.color));
    s += p.legend(k, ln.name + " (f" + budget_label(ln.budget) + ")", color(ln.color));
  }
  if (lines.empty()) s += p.note("no finished LRT (recurrent) runs yet");
  return s + "</svg>\n";
}

}  // namespace ablate
