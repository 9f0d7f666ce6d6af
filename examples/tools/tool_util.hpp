// Shared by the lrt-train / lrt-eval / lrt-generate programs: a small command-line parser with
// typed, validated options and usage errors, a progress line (refreshed in place on a terminal,
// plain lines otherwise), the CSV training log and an SVG plot of it (no plotting dependency).
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lrt_version.h"

namespace tool {

/// A bad command line: main prints the message and the usage, and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// All of s as a finite number (nullopt for an empty text, trailing characters, inf or nan).
inline std::optional<double> parse_finite(const std::string& s) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (s.empty() || used != s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// All of s as an integer: digits ("1000"), or a decimal or scientific spelling of an exact
/// integer ("1e3", "1000.0", "2.5e3"); nullopt for anything else ("1.5", "1e3x", "0x10", ""). A
/// value past long long's range comes back as its nearest end (for the caller's range check).
inline std::optional<long long> parse_integer(const std::string& s) {
  std::size_t used = 0;
  try {
    const long long v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {  // not digits, or past long long's range: read as a number below
  }
  if (s.find_first_not_of("0123456789+-.eE") != std::string::npos) return std::nullopt;
  const std::optional<double> d = parse_finite(s);
  if (!d || *d != std::trunc(*d)) return std::nullopt;
  constexpr double end = 9223372036854775808.0;  // 2^63
  if (*d >= end) return std::numeric_limits<long long>::max();
  if (*d < -end) return std::numeric_limits<long long>::min();
  return static_cast<long long>(*d);
}

class Args {
 public:
  Args(std::string program, std::string summary) : prog_(std::move(program)), summary_(std::move(summary)) {}

  /// Declares --name VALUE (flag: --name without a value). def empty and required: must be given.
  Args& option(std::string name, std::string meta, std::string help, std::string def = "", bool required = false) {
    opts_.push_back({std::move(name), std::move(meta), std::move(help), std::move(def), required, false});
    return *this;
  }
  Args& flag(std::string name, std::string help) {
    opts_.push_back({std::move(name), "", std::move(help), "", false, true});
    return *this;
  }
  /// Another spelling of option `name`, typed as is (e.g. "-n" or "--temp"); shown in the usage.
  Args& alias(std::string spelling, const std::string& name) {
    aliases_[std::move(spelling)] = name;
    return *this;
  }

  /// Parses argv; throws UsageError for unknown options, missing values or required options.
  /// Returns false when --help (usage printed) or --version (`lrt-train 9f8cdb5`) was asked.
  bool parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        std::fputs(usage().c_str(), stdout);
        return false;
      }
      if (a == "--version") {
        lrt_print_version(prog_.substr(0, prog_.find(' ')).c_str());  // "lrt-tokenizer train" -> lrt-tokenizer
        return false;
      }
      const std::string head = a.substr(0, a.find('='));  // "-n", "--temp=0.7" -> "--temp"
      if (const auto al = aliases_.find(head); al != aliases_.end()) a = "--" + al->second + a.substr(head.size());
      if (a.rfind("--", 0) != 0) throw UsageError(fmt::format("unexpected argument '{}'", a));
      std::string name = a.substr(2), value;
      const auto eq = name.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) value = name.substr(eq + 1), name = name.substr(0, eq);
      const Opt* o = find(name);
      if (!o) throw UsageError(fmt::format("unknown option '--{}'", name));
      if (o->is_flag) {
        if (inline_value) throw UsageError(fmt::format("option '--{}' takes no value", name));
        values_[name] = "1";
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError(fmt::format("option '--{}' needs a value ({})", name, o->meta));
        value = argv[++i];
      }
      values_[name] = value;
    }
    for (const Opt& o : opts_)
      if (o.required && !has(o.name)) throw UsageError(fmt::format("missing required option '--{}'", o.name));
    return true;
  }

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string str(const std::string& name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    return find(name)->def;
  }
  /// An integer option within [lo, hi] (spelled as parse_integer reads it: 1000, 1e3, ...).
  long long integer(const std::string& name, long long lo, long long hi) const {
    const std::string s = str(name);
    const std::optional<long long> v = parse_integer(s);
    if (!v) throw UsageError(fmt::format("--{} expects an integer, got '{}'", name, s));
    if (*v < lo || *v > hi) throw UsageError(fmt::format("--{} must be in [{}, {}], got {}", name, lo, hi, s));
    return *v;
  }
  /// A finite number within [lo, hi].
  double number(const std::string& name, double lo, double hi) const {
    const std::string s = str(name);
    const std::optional<double> parsed = parse_finite(s);
    if (!parsed) throw UsageError(fmt::format("--{} expects a number, got '{}'", name, s));
    const double v = *parsed;
    if (v < lo || v > hi) throw UsageError(fmt::format("--{} must be in [{}, {}], got {}", name, lo, hi, v));
    return v;
  }

  std::string usage() const {
    std::string u = fmt::format("usage: {} [options]\n{}\n\noptions:\n", prog_, summary_);
    for (const Opt& o : opts_) {
      std::string spellings;
      for (const auto& [al, n] : aliases_)
        if (n == o.name) spellings += al + ", ";
      std::string left = "  " + spellings + "--" + o.name + (o.meta.empty() ? "" : " " + o.meta);
      if (left.size() < 28)
        left.resize(28, ' ');
      else
        left += "\n" + std::string(28, ' ');
      u += left + o.help;
      if (o.required)
        u += " (required)";
      else if (!o.def.empty())
        u += " (default " + o.def + ")";
      u += "\n";
    }
    return u +
           "  --help                    this text\n"
           "  --version                 the program's name and the git description it was built from\n";
  }

 private:
  struct Opt {
    std::string name, meta, help, def;
    bool required, is_flag;
  };
  const Opt* find(const std::string& n) const {
    for (const Opt& o : opts_)
      if (o.name == n) return &o;
    return nullptr;
  }
  std::string prog_, summary_;
  std::vector<Opt> opts_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> aliases_;  // spelling -> option name
};

/// The help of --threads N, which apply_threads reads.
inline constexpr const char* threads_help = "threads of lrt's thread pool (as LRT_NUM_THREADS, which it overrides)";

/// --threads N: the size of lrt's thread pool (as LRT_NUM_THREADS, which it overrides); call
/// before anything runs a kernel.
inline void apply_threads(const Args& a) {
  if (!a.has("threads")) return;
  const long long n = a.integer("threads", 1, 1024);
  ::setenv("LRT_NUM_THREADS", std::to_string(n).c_str(), 1);
}

/// Runs body(); maps usage errors to status 2 (with the usage) and lrt/other errors to status 1.
template <class F>
int run_main(const Args& args, F&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "error: %s\n\n%s", e.what(), args.usage().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

/// A usage error unless path names an existing file or folder.
inline void require_path(const std::string& path, const char* option) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw UsageError(fmt::format("{}: no such file or folder: '{}'", option, path));
}

inline std::string duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const long long t = std::llround(s);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

/// One status line: rewritten in place on a terminal (stderr), printed as plain lines (at most
/// every `interval_s` seconds, and always when forced) otherwise.
class Progress {
 public:
  explicit Progress(double interval_s = 10) : tty_(isatty(fileno(stderr)) != 0), interval_(interval_s) {}
  void update(const std::string& line, double now_s, bool force = false) {
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
      if (force) std::fputc('\n', stderr);
      std::fflush(stderr);
    } else if (force || now_s - last_ >= interval_) {
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
      last_ = now_s;
    }
  }
  /// Ends an in-place line before other output.
  void finish_line() {
    if (tty_) std::fputc('\n', stderr);
  }
  bool tty() const { return tty_; }

 private:
  bool tty_;
  double interval_, last_ = -1e300;
};

/// One row of the training log (NaN: not measured at that step).
struct LogRow {
  long long step = 0, tokens = 0;
  double train_loss = NAN, val_loss = NAN, val_bpb = NAN, lr = NAN, seconds = NAN;
  double val_bpb_seq = NAN;  // LRT: the sequential (exact recurrence) bits per byte, when scored
};

inline const char* log_header = "step,tokens,train_loss,val_loss,val_bpb,lr_multiplier,seconds,val_bpb_sequential";

inline std::string fmt_opt(double v) { return std::isnan(v) ? "" : fmt::format("{:.6g}", v); }

inline std::string log_line(const LogRow& r) {
  return fmt::format("{},{},{},{},{},{},{},{}", r.step, r.tokens, fmt_opt(r.train_loss), fmt_opt(r.val_loss),
                     fmt_opt(r.val_bpb), fmt_opt(r.lr), fmt_opt(r.seconds), fmt_opt(r.val_bpb_seq));
}

/// Reads a log written by log_line (unparsable lines are skipped).
inline std::vector<LogRow> read_log(const std::string& path) {
  std::vector<LogRow> rows;
  std::ifstream in(path);
  std::string line;
  auto num = [](const std::string& s) { return s.empty() ? NAN : std::strtod(s.c_str(), nullptr); };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] < '0' || line[0] > '9') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    while (f.size() < 8) f.emplace_back();  // logs before val_bpb_sequential have 7 fields
    LogRow r;
    r.step = std::atoll(f[0].c_str()), r.tokens = std::atoll(f[1].c_str());
    r.train_loss = num(f[2]), r.val_loss = num(f[3]), r.val_bpb = num(f[4]), r.lr = num(f[5]), r.seconds = num(f[6]);
    r.val_bpb_seq = num(f[7]);
    rows.push_back(r);
  }
  return rows;
}

/// An SVG line plot of train loss (every step, light) and validation loss (markers) per step.
inline std::string loss_svg(const std::vector<LogRow>& rows, const std::string& title) {
  const double W = 720, H = 420, l = 64, r = 16, t = 36, b = 48;
  double xmax = 1, ymin = 1e300, ymax = -1e300;
  for (const LogRow& x : rows) {
    xmax = std::max(xmax, double(x.step));
    for (double v : {x.train_loss, x.val_loss})
      if (!std::isnan(v)) ymin = std::min(ymin, v), ymax = std::max(ymax, v);
  }
  if (ymin > ymax) ymin = 0, ymax = 1;
  if (ymax - ymin < 1e-9) ymax = ymin + 1;
  const double pad = 0.05 * (ymax - ymin);
  ymin -= pad, ymax += pad;
  auto X = [&](double s) { return l + (W - l - r) * s / xmax; };
  auto Y = [&](double v) { return t + (H - t - b) * (ymax - v) / (ymax - ymin); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"14\">{}</text>\n",
      W, H, W, H, l, title);
  for (int i = 0; i <= 5; ++i) {  // grid and axis labels
    const double v = ymin + (ymax - ymin) * i / 5, y = Y(v);
    s += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>\n",
        l, W - r, y, y, l - 6, y + 4, v);
    const double st = xmax * i / 5;
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", X(st), H - b + 18, st);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n", (l + W - r) / 2, H - 8);
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">loss "
      "(nats/token)</text>\n",
      (t + H - b) / 2, (t + H - b) / 2);
  std::string train, val;
  for (const LogRow& x : rows) {
    if (!std::isnan(x.train_loss)) train += fmt::format("{:.1f},{:.1f} ", X(double(x.step)), Y(x.train_loss));
    if (!std::isnan(x.val_loss))
      val += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#d62728\"/>", X(double(x.step)),
                         Y(x.val_loss));
  }
  if (!train.empty())
    s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.2\" points=\"" + train + "\"/>\n";
  s += val + "\n";
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" fill=\"#1f77b4\">train loss</text>"
      "<text x=\"{}\" y=\"{}\" fill=\"#d62728\">validation loss</text>\n</svg>\n",
      W - r - 200, t + 14, W - r - 100, t + 14);
  return s;
}

}  // namespace tool
