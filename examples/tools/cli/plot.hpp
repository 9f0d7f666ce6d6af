// SVG line plots for lrt's programs, no plotting dependency: tool::Plot, one canvas style for
// lrt-train's loss.svg (tool::loss_svg, tool_util.hpp) and lrt-ablate's bpb_vs_compute.svg and
// passes.svg (ablate_util.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace tool {

inline std::string xml_escape(const std::string& s) {
  std::string o;
  for (const char c : s) {
    if (c == '&')
      o += "&amp;";
    else if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

inline const char* color(std::size_t i) {
  static const char* c[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                            "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return c[i % 10];
}

/// An SVG canvas with a plot area, y grid lines and labels, and a legend at the right; x ticks are
/// given by the caller. A plot is begin(), then x ticks, series, markers, legend entries, and
/// "</svg>\n".
class Plot {
 public:
  static constexpr double W = 760, H = 440, l = 70, r = 200, t = 40, b = 56;
  Plot(double x0, double x1, double y0, double y1) : x0_(x0), x1_(x1), y0_(y0), y1_(y1) {
    if (!(x1_ > x0_)) x0_ -= 0.5, x1_ += 0.5;
    if (!(y1_ - y0_ > 1e-9)) y0_ -= 0.5, y1_ += 0.5;
    const double px = 0.05 * (x1_ - x0_), py = 0.06 * (y1_ - y0_);
    x0_ -= px, x1_ += px, y0_ -= py, y1_ += py;
  }
  double X(double x) const { return l + (W - l - r) * (x - x0_) / (x1_ - x0_); }
  double Y(double y) const { return t + (H - t - b) * (y1_ - y) / (y1_ - y0_); }

  std::string begin(const std::string& title, const std::string& xlabel, const std::string& ylabel) const {
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        "<text x=\"{}\" y=\"22\" font-size=\"14\">{}</text>\n",
        W, H, W, H, l, xml_escape(title));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n", l, t,
                     W - l - r, H - t - b);
    for (int i = 0; i <= 5; ++i) {
      const double v = y0_ + (y1_ - y0_) * i / 5, y = Y(v);
      s += fmt::format(
          "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
          "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.4g}</text>\n",
          l, W - r, y, y, l - 6, y + 4, v);
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (l + W - r) / 2, H - 10,
                     xml_escape(xlabel));
    s += fmt::format("<text x=\"16\" y=\"{0}\" transform=\"rotate(-90 16 {0})\" text-anchor=\"middle\">{1}</text>\n",
                     (t + H - b) / 2, xml_escape(ylabel));
    return s;
  }
  std::string x_tick(double x, const std::string& label) const {
    return fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        X(x), t, H - b, H - b + 18, xml_escape(label));
  }
  /// A legend entry (a line of the series' colour and its name), i-th from the top.
  std::string legend(std::size_t i, const std::string& name, const char* col, bool dashed = false) const {
    const double y = t + 14 + 18 * static_cast<double>(i), x = W - r + 12;
    return fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"{}/>"
        "<text x=\"{}\" y=\"{:.1f}\">{}</text>\n",
        x, x + 22, y - 4, y - 4, col, dashed ? " stroke-dasharray=\"5 3\"" : "", x + 28, y, xml_escape(name));
  }
  /// A polyline through the points (nothing for none).
  std::string line(const std::vector<std::pair<double, double>>& pts, const char* col, double width = 1.6) const {
    if (pts.empty()) return "";
    std::string points;
    for (const auto& [x, y] : pts) points += fmt::format("{:.1f},{:.1f} ", X(x), Y(y));
    return fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" points=\"{}\"/>\n", col, width,
                       points);
  }
  /// A circle marker at each point.
  std::string markers(const std::vector<std::pair<double, double>>& pts, const char* col) const {
    std::string marks;
    for (const auto& [x, y] : pts)
      marks += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>", X(x), Y(y), col);
    return marks + "\n";
  }
  /// A polyline with circle markers through the points.
  std::string series(const std::vector<std::pair<double, double>>& pts, const char* col) const {
    return line(pts, col) + markers(pts, col);
  }
  /// A vertical error bar from y - e to y + e with caps.
  std::string error_bar(double x, double y, double e, const char* col) const {
    const double px = X(x), lo = Y(y - e), hi = Y(y + e);
    return fmt::format(
        "<path d=\"M{0:.1f},{1:.1f}V{2:.1f}M{3:.1f},{1:.1f}H{4:.1f}M{3:.1f},{2:.1f}H{4:.1f}\" stroke=\"{5}\" "
        "fill=\"none\"/>\n",
        px, lo, hi, px - 4, px + 4, col);
  }
  std::string note(const std::string& text) const {
    return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666\">{}</text>\n", (l + W - r) / 2,
                       (t + H - b) / 2, xml_escape(text));
  }

 private:
  double x0_, x1_, y0_, y1_;
};

}  // namespace tool
