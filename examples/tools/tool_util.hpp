// Shared by lrt's programs: the command-line layer (cli/args.hpp: tool::Args, usage errors;
// cli/plot.hpp: tool::Plot), a progress line (refreshed in place on a terminal, plain lines
// otherwise), the CSV training log and an SVG plot of it (tool::loss_svg, on tool::Plot).
#pragma once

#include <unistd.h>

#include <algorithm>
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

#include "cli/args.hpp"
#include "cli/plot.hpp"

namespace tool {

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
  double val_bpb_seq = NAN;           // LRT: the sequential (exact recurrence) bits per byte, when scored
  double core = NAN, core_seq = NAN;  // lrt-train --core: CORE in parallel / sequential mode, when scored
};

inline const char* log_header =
    "step,tokens,train_loss,val_loss,val_bpb,lr_multiplier,seconds,val_bpb_sequential,core,core_sequential";

inline std::string fmt_opt(double v) { return std::isnan(v) ? "" : fmt::format("{:.6g}", v); }

inline std::string log_line(const LogRow& r) {
  return fmt::format("{},{},{},{},{},{},{},{},{},{}", r.step, r.tokens, fmt_opt(r.train_loss), fmt_opt(r.val_loss),
                     fmt_opt(r.val_bpb), fmt_opt(r.lr), fmt_opt(r.seconds), fmt_opt(r.val_bpb_seq), fmt_opt(r.core),
                     fmt_opt(r.core_seq));
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
    while (f.size() < 10) f.emplace_back();  // older logs have 7 fields (no val_bpb_sequential) or 8 (no core)
    LogRow r;
    r.step = std::atoll(f[0].c_str()), r.tokens = std::atoll(f[1].c_str());
    r.train_loss = num(f[2]), r.val_loss = num(f[3]), r.val_bpb = num(f[4]), r.lr = num(f[5]), r.seconds = num(f[6]);
    r.val_bpb_seq = num(f[7]), r.core = num(f[8]), r.core_seq = num(f[9]);
    rows.push_back(r);
  }
  return rows;
}

/// An SVG line plot (tool::Plot) of train loss (every step, a line) and validation loss
/// (markers) per step, with a legend.
inline std::string loss_svg(const std::vector<LogRow>& rows, const std::string& title) {
  double xmax = 1, ymin = INFINITY, ymax = -INFINITY;
  std::vector<std::pair<double, double>> train, val;
  for (const LogRow& x : rows) {
    xmax = std::max(xmax, double(x.step));
    if (!std::isnan(x.train_loss)) train.emplace_back(double(x.step), x.train_loss);
    if (!std::isnan(x.val_loss)) val.emplace_back(double(x.step), x.val_loss);
    for (double v : {x.train_loss, x.val_loss})
      if (!std::isnan(v)) ymin = std::min(ymin, v), ymax = std::max(ymax, v);
  }
  if (!(ymin <= ymax)) ymin = 0, ymax = 1;
  const Plot p(0, xmax, ymin, ymax);
  std::string s = p.begin(title, "step", "loss (nats/token)");
  for (int i = 0; i <= 5; ++i) {
    const double st = xmax * i / 5;
    s += p.x_tick(st, fmt::format("{:.0f}", st));
  }
  s += p.line(train, color(0), 1.2) + (val.empty() ? "" : p.markers(val, color(1)));
  s += p.legend(0, "train loss", color(0)) + p.legend(1, "validation loss", color(1));
  return s + "</svg>\n";
}

}  // namespace tool
