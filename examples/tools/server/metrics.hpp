// lrt-server's counters for GET /metrics, in Prometheus' text format (version 0.0.4): requests by
// endpoint and status, prompt and generated tokens, and two latency histograms (time to first
// token; time per output token after it, one observation per completion: its mean). The gauges
// (queue, busy rows, connections) are read when the page is made (Service::metrics).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

namespace server {

/// A cumulative histogram with fixed upper bounds (seconds).
template <std::size_t N>
struct Histogram {
  std::array<double, N> bounds;
  std::array<std::uint64_t, N> counts{};  // observations <= bounds[i] (not cumulative here)
  std::uint64_t count = 0;
  double sum = 0;

  void observe(double v) {
    for (std::size_t i = 0; i < N; ++i)
      if (v <= bounds[i]) {
        ++counts[i];
        break;
      }
    ++count;
    sum += v;
  }
  void write(std::string& out, const char* name, const char* help) const {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    std::uint64_t cum = 0;
    char line[160];
    for (std::size_t i = 0; i < N; ++i) {
      cum += counts[i];
      std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i],
                    static_cast<unsigned long long>(cum));
      out += line;
    }
    std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
                  static_cast<unsigned long long>(count), name, sum, name, static_cast<unsigned long long>(count));
    out += line;
  }
};

class Metrics {
 public:
  /// A request answered (or refused) on `endpoint` (a known path, else "other") with `status`.
  void request(const std::string& endpoint, int status) {
    std::lock_guard<std::mutex> lock(m_);
    ++requests_[{endpoint, status}];
  }
  /// A completion that ran: its prompt and generated tokens, time to first token and total time
  /// (seconds; ttft < 0: no token was generated).
  void completion(std::int64_t prompt, std::int64_t generated, double ttft, double total) {
    std::lock_guard<std::mutex> lock(m_);
    prompt_tokens_ += static_cast<std::uint64_t>(prompt);
    generated_tokens_ += static_cast<std::uint64_t>(generated);
    if (ttft >= 0) ttft_.observe(ttft);
    if (ttft >= 0 && generated > 1) per_token_.observe((total - ttft) / static_cast<double>(generated - 1));
  }

  /// The counters and histograms, then `gauges` (name, help, value) as gauges and `counters` as
  /// counters.
  std::string text(const std::initializer_list<std::tuple<const char*, const char*, double>>& gauges,
                   const std::initializer_list<std::tuple<const char*, const char*, double>>& counters) const {
    std::string out;
    char line[256];
    std::lock_guard<std::mutex> lock(m_);
    out +=
        "# HELP lrt_requests_total HTTP requests answered, by endpoint and status\n"
        "# TYPE lrt_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      std::snprintf(line, sizeof line, "lrt_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", key.first.c_str(),
                    key.second, static_cast<unsigned long long>(n));
      out += line;
    }
    const auto scalar = [&](const char* type, const char* name, const char* help, double v) {
      std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
      out += line;
    };
    scalar("counter", "lrt_prompt_tokens_total", "prompt tokens of completions (with BOS)",
           static_cast<double>(prompt_tokens_));
    scalar("counter", "lrt_generation_tokens_total", "tokens generated", static_cast<double>(generated_tokens_));
    for (const auto& [name, help, v] : counters) scalar("counter", name, help, v);
    for (const auto& [name, help, v] : gauges) scalar("gauge", name, help, v);
    ttft_.write(out, "lrt_time_to_first_token_seconds", "time from a completion's arrival to its first token");
    per_token_.write(out, "lrt_time_per_output_token_seconds",
                     "a completion's mean time per generated token after the first");
    return out;
  }

 private:
  mutable std::mutex m_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram<12> ttft_{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
  Histogram<12> per_token_{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
};

}  // namespace server
