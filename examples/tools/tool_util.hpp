// Shared by lrt's programs: the command-line layer (cli/args.hpp: tool::Args, usage errors), a
// progress line (refreshed in place on a terminal, plain lines otherwise), the CSV training log
// and an SVG plot of it (no plotting dependency).
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
