// bench/bench_util.hpp: helpers shared by the benchmark programs (timing statistics and the
// CPU load of other processes, so that a noisy machine shows in the tables); their command lines
// go through tool::Args (examples/tools/cli/args.hpp: options, --help, --version, usage errors).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <lrt/model/config.hpp>

#include "cli/args.hpp"

namespace lrt_bench {

using Clock = std::chrono::steady_clock;

/// The model presets option `name` lists (a usage error names one lrt::preset does not know).
inline std::vector<std::string> preset_list(const tool::Args& args, const std::string& name = "presets") {
  std::vector<std::string> out = args.items(name);
  const auto known = lrt::preset_names();
  for (const std::string& p : out)
    if (std::find(known.begin(), known.end(), p) == known.end()) {
      std::string list;
      for (const auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      throw tool::UsageError("--" + name + ": unknown preset '" + p + "' (known: " + list + ")");
    }
  return out;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// CPU time taken by everything but this process (other processes, the kernel's work for them,
/// the hypervisor's steal) over an interval, in CPUs: from /proc/stat and getrusage.
class OtherLoad {
 public:
  OtherLoad() { sample(busy0_, self0_, t0_); }
  double cpus() const {
    double busy, self;
    Clock::time_point t;
    sample(busy, self, t);
    const double wall = std::chrono::duration<double>(t - t0_).count();
    if (busy0_ < 0 || busy < 0 || wall <= 0) return -1;
    return std::max(0.0, ((busy - busy0_) - (self - self0_)) / wall);
  }

 private:
  static void sample(double& busy, double& self, Clock::time_point& t) {
    t = Clock::now();
    busy = -1;
    std::ifstream f("/proc/stat");
    std::string line;
    if (std::getline(f, line) && line.rfind("cpu ", 0) == 0) {
      std::istringstream in(line.substr(4));
      // user nice system idle iowait irq softirq steal
      double v[8] = {};
      for (double& x : v) in >> x;
      busy = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / double(sysconf(_SC_CLK_TCK));
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    self = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  }
  double busy0_, self0_;
  Clock::time_point t0_;
};

/// Median wall time of f over reps runs, after one warm-up run (which also fills caches).
template <class F>
double median_seconds(F&& f, int reps) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(std::move(t));
}

/// A number field of /proc/self/status as written (e.g. "Threads"), or -1.
inline double proc_status_value(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.rfind(k, 0) == 0) {
      std::istringstream in(line.substr(k.size()));
      double v = -1;
      in >> v;
      return v;
    }
  return -1;
}

/// A field of /proc/self/status in MiB (VmRSS, VmHWM, ...), or -1 where unavailable.
inline double proc_status_mib(const char* key) {
  const double kb = proc_status_value(key);
  return kb < 0 ? -1 : kb / 1024.0;
}

/// A number for a JSON line: `null` when it is not finite (JSON has no inf or nan).
inline std::string json_number(double x, int digits = 6) {
  if (!(x == x) || x > 1.7e308 || x < -1.7e308) return "null";
  std::ostringstream o;
  o.precision(digits);
  o << x;
  return o.str();
}

}  // namespace lrt_bench
