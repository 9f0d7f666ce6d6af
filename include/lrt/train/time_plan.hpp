// lrt/train/time_plan.hpp: how a wall-clock budget (lrt-train --time) is split between training
// steps and validation evaluations, from measured costs. A pure function: the costs come in, the
// plan goes out, so it is tested with made-up costs and the program measures the real ones.
//
// The evaluations are part of the budget. Those the caller left at their defaults shrink first in
// size (down to a floor) and then in number (down to one, at the end) until they take at most
// `eval_share` of the time left; what the caller set explicitly is kept and paid for. The rest
// of the time trains. A plan with few steps carries a warning that gives the numbers.
//
//   lrt::TimePlanCosts c{.budget = 60, .elapsed = 4, .step = 0.9, .eval_per_token = 2e-5, ...};
//   const lrt::TimePlan p = lrt::plan_time_budget(c);   // p.steps, p.eval_every, p.eval_tokens
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {

/// What the plan is made from: seconds, measured by the caller, and the evaluation settings.
struct TimePlanCosts {
  double budget = 0;                    // the whole budget (s)
  double elapsed = 0;                   // already spent: loading, building, timing (s)
  double step = 0;                      // one optimizer step (s)
  double eval_per_token = 0;            // one evaluation, per validation target token (s)
  double final_per_token = 0;           // the extra evaluation at the end, per token (s): the LRT's sequential score
  double reserve = 0;                   // the end's fixed costs: the last checkpoint and summary (s)
  std::int64_t eval_tokens = 65536;     // tokens per evaluation asked for
  bool eval_tokens_fixed = false;       // given by the user: kept
  std::int64_t eval_every = 0;          // steps between evaluations; 0: the default (about `evaluations`)
  std::int64_t min_eval_tokens = 4096;  // the smallest evaluation worth making (one batch)
  int evaluations = 11;                 // evaluations of the default schedule (N/10 apart, and the end)
  double eval_share = 0.1;              // what evaluations may take of the time left, at most
  std::int64_t useful_steps = 100;      // fewer steps than this: a warning
};

/// The split: N steps, an evaluation every eval_every steps (and at the end) of eval_tokens
/// tokens, and the seconds each part is expected to take.
struct TimePlan {
  std::int64_t steps = 1;
  std::int64_t eval_every = 1;
  std::int64_t eval_tokens = 0;
  int evaluations = 1;  // how many the run makes (with the last step's)
  double left = 0;      // budget - elapsed
  double train_seconds = 0, eval_seconds = 0, final_seconds = 0;
  std::string warning;  // non-empty: the budget is too small for a useful run, with the numbers
};

namespace detail {
/// Evaluations a run of n steps makes with one every `every` steps and one after the last step.
inline int evaluations_of(std::int64_t n, std::int64_t every) {
  return static_cast<int>(n / every + (n % every != 0 ? 1 : 0));
}
/// "2.4 s", "53 s"; with `digits`, that many decimals.
inline std::string seconds_text(double s, int digits = -1) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f s", digits >= 0 ? digits : s < 10 ? 1 : 0, s);
  return b;
}
}  // namespace detail

/// The plan for `c` (lrt::Error("--time", ...) for costs that are not finite and positive).
inline TimePlan plan_time_budget(const TimePlanCosts& c) {
  check(std::isfinite(c.budget) && c.budget > 0 && std::isfinite(c.elapsed) && c.elapsed >= 0 &&
            std::isfinite(c.step) && c.step > 0 && std::isfinite(c.eval_per_token) && c.eval_per_token >= 0 &&
            std::isfinite(c.final_per_token) && c.final_per_token >= 0 && std::isfinite(c.reserve) && c.reserve >= 0,
        "--time", "the plan needs finite, positive costs: budget ", c.budget, " s, elapsed ", c.elapsed, " s, step ",
        c.step, " s, evaluation ", c.eval_per_token, " s/token, final ", c.final_per_token, " s/token");
  check(c.eval_tokens >= 1 && c.eval_every >= 0 && c.evaluations >= 1 && c.eval_share > 0 && c.eval_share < 1, "--time",
        "bad evaluation settings: ", c.eval_tokens, " tokens, every ", c.eval_every, " steps, ", c.evaluations,
        " evaluations, share ", c.eval_share);
  TimePlan p;
  p.left = std::max(0.0, c.budget - c.elapsed - c.reserve);
  const double cap = c.eval_share * p.left;
  std::int64_t E = c.eval_tokens;
  int K = c.evaluations;  // the default schedule's count (eval_every == 0)
  const auto eval_cost = [&](std::int64_t tokens, int count) {
    return static_cast<double>(tokens) * (c.eval_per_token * count + c.final_per_token);
  };
  if (c.eval_every == 0) {
    if (!c.eval_tokens_fixed && eval_cost(E, K) > cap) {  // smaller evaluations, down to the floor
      const double per = c.eval_per_token * K + c.final_per_token;
      const auto fit = static_cast<std::int64_t>(per > 0 ? cap / per : static_cast<double>(E));
      E = std::clamp<std::int64_t>(fit, std::min(c.min_eval_tokens, c.eval_tokens), c.eval_tokens);
    }
    while (K > 1 && eval_cost(E, K) > cap) --K;  // then fewer of them (the last one stays)
  }
  // Steps: what is left after the evaluations. With a fixed --eval-every the count grows with N.
  std::int64_t n = 1;
  if (c.eval_every > 0) {
    const double per_step = c.step + static_cast<double>(E) * c.eval_per_token / static_cast<double>(c.eval_every);
    n = static_cast<std::int64_t>(std::floor((p.left - eval_cost(E, 1)) / per_step));
  } else {
    n = static_cast<std::int64_t>(std::floor((p.left - eval_cost(E, K)) / c.step));
  }
  n = std::max<std::int64_t>(1, n);
  p.steps = n;
  p.eval_tokens = E;
  // K evaluations over n steps: one every ceil(n / (K - 1)) steps and one after the last.
  p.eval_every = c.eval_every > 0 ? c.eval_every : (K <= 1 ? n : std::max<std::int64_t>(1, (n + K - 2) / (K - 1)));
  p.evaluations = detail::evaluations_of(n, p.eval_every);
  p.train_seconds = static_cast<double>(n) * c.step;
  p.eval_seconds = static_cast<double>(E) * c.eval_per_token * p.evaluations;
  p.final_seconds = static_cast<double>(E) * c.final_per_token;
  if (n < c.useful_steps) {
    const double want =
        c.elapsed + c.reserve + static_cast<double>(c.useful_steps) * c.step +
        static_cast<double>(std::min(c.min_eval_tokens, c.eval_tokens)) * (c.eval_per_token + c.final_per_token);
    p.warning = "the budget of " + detail::seconds_text(c.budget) + " leaves " + detail::seconds_text(p.left) +
                " after " + detail::seconds_text(c.elapsed) + " of setup and timing: " + std::to_string(n) + " step" +
                (n == 1 ? "" : "s") + " at " + detail::seconds_text(c.step, 3) + "/step, fewer than the " +
                std::to_string(c.useful_steps) + " a useful run needs; give --time " +
                std::to_string(static_cast<long long>(std::ceil(want * 1.1))) + " or more";
  }
  return p;
}

}  // namespace v0
}  // namespace lrt
