// lrt/decode/prefill_mode.hpp: what both decoders (decode/decoder.hpp, decode/lean.hpp) share
// without either's machinery: how a prompt is fed (PrefillMode, spec §6, plus the lean decoder's
// parallel fixed-point modes). The memory's BOS cut (reads_state, spec §3.1) is the pass plan's
// (model/training_schedules/pass_plan.hpp), which this header brings.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "../model/config.hpp"
#include "../model/training_schedules/pass_plan.hpp"

namespace lrt {
inline namespace v0 {

/// How a decoder's prefill feeds a prompt (spec §6).
struct PrefillMode {
  enum class Kind {
    Exact,        // token by token through the decode step (the release's sequential evaluation)
    Zero,         // zero memory throughout, prompt and generation (the release's chat engine)
    Interleaved,  // pass 0 + S refinement passes over the prompt, then exact decoding; exact iff S >= P
    FixedPoint,   // lean decoder: whole-prompt passes, each reading the source states of the one before and
                  // recomputing only past the exact frontier, until the states are bit-stable (the exact
                  // recurrence, computed in parallel; at most ceil(P / k) passes)
    Approximate,  // lean decoder: the same passes, stopped once no source state moved by more than `tolerance`
  };
  Kind kind = Kind::Exact;
  index_t passes = 0;    // Interleaved: S >= 1
  double tolerance = 0;  // Approximate: > 0, the largest change of a source state's element that stops

  static PrefillMode exact() noexcept { return {}; }
  static PrefillMode zero() noexcept { return {Kind::Zero, 0, 0}; }
  static PrefillMode interleaved(index_t S) {
    check(S >= 1, "prefill", "interleaved prefill needs S >= 1 refinement passes, got ", S);
    return {Kind::Interleaved, S, 0};
  }
  static PrefillMode fixed_point() noexcept { return {Kind::FixedPoint, 0, 0}; }
  static PrefillMode approximate(double tol) {
    check(std::isfinite(tol) && tol > 0, "prefill", "approximate prefill needs a tolerance > 0, got ", tol);
    return {Kind::Approximate, 0, tol};
  }
  /// Whether the mode computes the prompt with whole-prompt passes (the lean decoder's parallel modes).
  bool parallel_passes() const noexcept { return kind == Kind::FixedPoint || kind == Kind::Approximate; }

  /// "exact", "zero", "interleaved:S" (S >= 1), "fixed-point" or "approximate:TOL" (TOL > 0);
  /// lrt::Error otherwise.
  static PrefillMode parse(std::string_view s) {
    if (s == "exact") return exact();
    if (s == "zero") return zero();
    if (s == "fixed-point") return fixed_point();
    if (const std::string_view pre = "interleaved:"; s.substr(0, pre.size()) == pre) {
      const std::string_view num = s.substr(pre.size());
      long long S = 0;
      const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), S);
      if (ec == std::errc() && end == num.data() + num.size() && !num.empty() && S >= 1) return interleaved(S);
    }
    if (const std::string_view pre = "approximate:"; s.substr(0, pre.size()) == pre) {
      const std::string_view num = s.substr(pre.size());
      double tol = 0;
      const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), tol);
      if (ec == std::errc() && end == num.data() + num.size() && !num.empty() && std::isfinite(tol) && tol > 0)
        return approximate(tol);
    }
    ::lrt::throw_error("prefill", detail::str_cat("expected exact, zero, interleaved:S (S >= 1), fixed-point or "
                                                  "approximate:TOL (TOL > 0), got '",
                                                  std::string(s), "'"));
  }
  /// The spelling parse() reads.
  std::string name() const {
    switch (kind) {
      case Kind::Exact:
        return "exact";
      case Kind::Zero:
        return "zero";
      case Kind::Interleaved:
        return "interleaved:" + std::to_string(passes);
      case Kind::FixedPoint:
        return "fixed-point";
      case Kind::Approximate: {
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof buf, tolerance);
        return "approximate:" + std::string(buf, r.ptr);
      }
    }
    return "?";
  }
  friend bool operator==(const PrefillMode&, const PrefillMode&) = default;
};

}  // namespace v0
}  // namespace lrt
