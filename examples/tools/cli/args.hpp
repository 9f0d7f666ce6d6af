// The command-line layer of lrt's programs (examples/tools) and benchmarks (bench/): typed,
// validated options (tool::Args), --help and --version, and usage errors (tool::UsageError: the
// message and the usage on stderr, exit status 2, through tool::run_main). Without fmt, so that
// nvcc compiles it too (bench/gpu.cu).
#pragma once

#include <stdlib.h>  // setenv

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "lrt_version.h"

namespace tool {

/// A bad command line (an unknown option, a bad value, an unusable input path): main prints one
/// line, "PROGRAM: MESSAGE; see --help", and exits with status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The shortest text that reads back to v ("0.5", "2", "1e+30").
inline std::string shortest_number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

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

/// The items of a comma-separated list ("a,b,,c" -> a, b, c: empty items are dropped).
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= s.size();) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

/// An option that several programs take with one meaning, declared once (shared_options): its
/// value's placeholder, help and default, and the programs that take it.
struct SharedOption {
  const char* name;
  const char* meta;
  const char* help;
  const char* def;
  bool required;
  const char* programs;  // space-separated program names (Args::program())
};

/// The help of --threads N, which apply_threads reads.
inline constexpr const char* threads_help = "threads of lrt's thread pool (as LRT_NUM_THREADS, which it overrides)";

/// The shared options: a program adds one with Args::shared(name), which refuses a program the
/// entry does not name, so this table is the list of who takes what (tools.shared_options checks
/// every program's --help against it). An option whose meaning differs from one program to the
/// next stays each program's own: lrt-bench's --threads LIST (one run per count), lrt-tokenizer's
/// and lrt-bench-tokenizer's --threads (threads that split the documents), lrt-quantize's
/// --checkpoint (f32 only), each benchmark's --reps and --quick.
inline constexpr SharedOption shared_options[] = {
    {"checkpoint", "FILE",
     "model.safetensors written by lrt-train, or its run directory, or an int8/bf16 file of lrt-quantize", "", true,
     "lrt-eval lrt-generate lrt-server"},
    {"config", "FILE",
     "the model config of release weights in --checkpoint (the release's meta_XXXXXX.json or a bare GPTConfig)", "",
     false, "lrt-eval lrt-generate"},
    {"threads", "N", threads_help, "", false,
     "lrt-train lrt-eval lrt-generate lrt-server lrt-bench-core lrt-bench-rows lrt-bench-server lrt-bench-gemm "
     "lrt-bench-elementwise"},
    {"device", "NAME", "cpu, or cuda (a build with the CUDA toolkit: docs/gpu.md)", "cpu", false,
     "lrt-train lrt-eval lrt-generate"},
    {"precision", "P", "matmul precision: fp32; with --device cuda also tf32 or bf16 (fp32 weights)", "fp32", false,
     "lrt-train lrt-eval lrt-generate"},
};

class Args {
 public:
  Args(std::string program, std::string summary) : prog_(std::move(program)), summary_(std::move(summary)) {}

  /// Declares --name VALUE (flag: --name without a value). def empty and required: must be given.
  Args& option(std::string name, std::string meta, std::string help, std::string def = "", bool required = false) {
    opts_.push_back({std::move(name), std::move(meta), std::move(help), std::move(def), required, false, false});
    return *this;
  }
  /// Declares the shared option `name` (shared_options) as the table gives it. Throws
  /// std::logic_error (a mistake in the program, not in its command line) when the table has no
  /// such option or does not name this program.
  Args& shared(const std::string& name) {
    for (const SharedOption& o : shared_options) {
      if (name != o.name) continue;
      const std::string progs = std::string(" ") + o.programs + " ";
      if (progs.find(" " + program() + " ") == std::string::npos)
        throw std::logic_error("--" + name + " is not shared with " + program() +
                               ": add it to its programs in shared_options (examples/tools/cli/args.hpp)");
      return option(o.name, o.meta, o.help, o.def, o.required);
    }
    throw std::logic_error("--" + name + " is not in shared_options (examples/tools/cli/args.hpp)");
  }
  Args& flag(std::string name, std::string help) {
    opts_.push_back({std::move(name), "", std::move(help), "", false, true, false});
    return *this;
  }
  /// An option left out of the usage (a program's own re-execution of itself, e.g. lrt-bench's
  /// child processes).
  Args& hidden(std::string name) {
    opts_.push_back({std::move(name), "VALUE", "", "", false, false, true});
    return *this;
  }
  /// Another spelling of option `name`, typed as is (e.g. "-n" or "--temp"); shown in the usage.
  Args& alias(std::string spelling, const std::string& name) {
    aliases_[std::move(spelling)] = name;
    return *this;
  }

  /// The program's name and command, without the usage's placeholders: "lrt-train",
  /// "lrt-tokenizer encode", "lrt-ablate" (of "lrt-ablate GRID").
  std::string program() const {
    std::string out;
    for (std::size_t at = 0; at < prog_.size();) {
      const std::size_t end = std::min(prog_.find(' ', at), prog_.size());
      const std::string word = prog_.substr(at, end - at);
      if (std::any_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; }))
        out += (out.empty() ? "" : " ") + word;
      at = end + 1;
    }
    return out;
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
      if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "'");
      std::string name = a.substr(2), value;
      const auto eq = name.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) value = name.substr(eq + 1), name = name.substr(0, eq);
      const Opt* o = find(name);
      if (!o) throw UsageError("unknown option '--" + name + "'");
      if (o->is_flag) {
        if (inline_value) throw UsageError("option '--" + name + "' takes no value");
        values_[name] = std::string(1, '1');  // not = "1": g++ 12 warns falsely (-Wrestrict) there
        continue;
      }
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError("option '--" + name + "' needs a value (" + o->meta + ")");
        value = argv[++i];
      }
      values_[name] = value;
    }
    for (const Opt& o : opts_)
      if (o.required && !has(o.name)) throw UsageError("missing required option '--" + o.name + "'");
    return true;
  }

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string str(const std::string& name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    return find(name)->def;
  }
  /// An integer option within [lo, hi] (spelled as parse_integer reads it: 1000, 1e3, ...).
  long long integer(const std::string& name, long long lo, long long hi) const {
    return integer_of(name, str(name), lo, hi);
  }
  /// A finite number within [lo, hi].
  double number(const std::string& name, double lo, double hi) const { return number_of(name, str(name), lo, hi); }
  /// A comma-separated list of integers, each within [lo, hi]; at least one.
  std::vector<long long> integers(const std::string& name, long long lo, long long hi) const {
    std::vector<long long> v;
    for (const std::string& item : items(name)) v.push_back(integer_of(name, item, lo, hi));
    return v;
  }
  /// A comma-separated list of finite numbers, each within [lo, hi]; at least one.
  std::vector<double> numbers(const std::string& name, double lo, double hi) const {
    std::vector<double> v;
    for (const std::string& item : items(name)) v.push_back(number_of(name, item, lo, hi));
    return v;
  }
  /// A comma-separated list of words; at least one.
  std::vector<std::string> items(const std::string& name) const {
    std::vector<std::string> v = split_list(str(name));
    if (v.empty()) throw UsageError("--" + name + " needs a non-empty list, got '" + str(name) + "'");
    return v;
  }

  std::string usage() const {
    std::string u = "usage: " + prog_ + " [options]\n" + summary_ + "\n\noptions:\n";
    for (const Opt& o : opts_) {
      if (o.hidden) continue;
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
    bool required, is_flag, hidden;
  };
  const Opt* find(const std::string& n) const {
    for (const Opt& o : opts_)
      if (o.name == n) return &o;
    return nullptr;
  }
  static long long integer_of(const std::string& name, const std::string& s, long long lo, long long hi) {
    const std::optional<long long> v = parse_integer(s);
    if (!v) throw UsageError("--" + name + " expects an integer, got '" + s + "'");
    if (*v < lo || *v > hi)
      throw UsageError("--" + name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + s);
    return *v;
  }
  static double number_of(const std::string& name, const std::string& s, double lo, double hi) {
    const std::optional<double> parsed = parse_finite(s);
    if (!parsed) throw UsageError("--" + name + " expects a number, got '" + s + "'");
    const double v = *parsed;
    if (v < lo || v > hi)
      throw UsageError("--" + name + " must be in [" + shortest_number(lo) + ", " + shortest_number(hi) + "], got " +
                       shortest_number(v));
    return v;
  }
  std::string prog_, summary_;
  std::vector<Opt> opts_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> aliases_;  // spelling -> option name
};

/// --threads N: the size of lrt's thread pool (as LRT_NUM_THREADS, which it overrides); call
/// before anything runs a kernel.
inline void apply_threads(const Args& a) {
  if (!a.has("threads")) return;
  const long long n = a.integer("threads", 1, 1024);
  ::setenv("LRT_NUM_THREADS", std::to_string(n).c_str(), 1);
}

/// The one way every program refuses its command line: one line on stderr naming the program
/// (and its command), what was wrong (the option and the value), and where to look; status 2.
inline int refuse_usage(const Args& args, const UsageError& e) {
  std::fprintf(stderr, "%s: %s; see --help\n", args.program().c_str(), e.what());
  return 2;
}

/// Runs body(); maps usage errors to status 2 (refuse_usage) and lrt/other errors to status 1.
template <class F>
int run_main(const Args& args, F&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    return refuse_usage(args, e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

/// For a main that reads its options once, up front (the benchmarks): parses argv, then runs
/// read(), which reads the options (a bad value throws UsageError). Returns -1 to go on, or the
/// status to exit with: 0 after --help or --version, 2 after a usage error (refuse_usage, as
/// run_main does).
template <class F>
int parse_args(Args& args, int argc, char** argv, F&& read) {
  try {
    if (!args.parse(argc, argv)) return 0;
    read();
    return -1;
  } catch (const UsageError& e) {
    return refuse_usage(args, e);
  }
}

/// A usage error unless path names an existing file or folder.
inline void require_path(const std::string& path, const char* option) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw UsageError(std::string(option) + ": no such file or folder: '" + path + "'");
}

}  // namespace tool
