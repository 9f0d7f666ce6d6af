// lrt/optim/adamw.hpp: AdamW over named parameter groups (LRT-SPEC §8), float32 state.
//
// For each parameter with a gradient g this step, with its own step count t (1 at its first
// update; a parameter without a gradient keeps t, m, v and its value) and lr = group lr x the
// multiplier passed to step():
//   p <- p (1 - lr wd);  m <- m + (1 - b1)(g - m);  v <- v + (1 - b2)(g^2 - v)
//   p <- p - (lr / (1 - b1^t)) m / (sqrt(v / (1 - b2^t)) + eps)
// Scalars are formed in double and rounded to float once; the per-element work is float and
// elementwise (so any thread count gives the same bits).
// State I/O: "adamw.<param>.m", "adamw.<param>.v" (the parameter's shape), counters
// "adamw.<param>.step" (t) and "adamw.steps" (calls of step()).
// Parameters on a device (ParamRef::device set) keep m and v in that device's memory and are
// updated there by the device's adamw_update (the same scalars, the same float operations);
// save() and load() copy their state to and from the host.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../core/thread_pool.hpp"
#include "param_ref.hpp"

namespace lrt {
inline namespace v0 {
namespace optim {

/// A group of parameters sharing lr, betas, eps and weight decay.
struct AdamWGroup {
  std::string name;
  float lr = 0;
  float beta1 = 0.9f, beta2 = 0.95f;
  float eps = 1e-10f;
  float weight_decay = 0;
  std::vector<ParamRef> params;
};

class AdamW {
 public:
  /// Adds a group; parameter names must be unique across the optimizer.
  void add_group(AdamWGroup g) {
    check(g.lr >= 0 && g.beta1 >= 0 && g.beta1 < 1 && g.beta2 >= 0 && g.beta2 < 1 && g.eps >= 0, "AdamW", "group '",
          g.name, "': need lr >= 0, betas in [0, 1), eps >= 0; got lr ", g.lr, ", betas (", g.beta1, ", ", g.beta2,
          "), eps ", g.eps);
    for (const auto& p : g.params) detail::check_param(p, "AdamW");
    std::set<std::string> seen;
    for (const auto& gr : groups_)
      for (const auto& p : gr.params) seen.insert(p.name);
    for (const auto& p : g.params)
      check(seen.insert(p.name).second, "AdamW", "parameter name '", p.name,
            "' appears twice: optimizer state is keyed by name");
    groups_.push_back(std::move(g));
    state_.emplace_back();
    sync_state();
  }

  /// One update of every parameter that has a gradient; lr of each group x lr_multiplier.
  void step(float lr_multiplier) {
    sync_state();
    ++steps_;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      const AdamWGroup& g = groups_[gi];
      const double lr = double(g.lr) * double(lr_multiplier);
      const float decay = static_cast<float>(1.0 - lr * double(g.weight_decay));
      const float c1 = 1.f - g.beta1, c2 = 1.f - g.beta2, eps = g.eps;
      for (std::size_t pi = 0; pi < g.params.size(); ++pi) {
        const ParamRef& p = g.params[pi];
        const float* grad = p.grad();
        if (!grad) continue;
        float* w = p.value();
        check(w != nullptr, "AdamW", "parameter '", p.name, "' has no value storage");
        State& s = state_[gi][pi];
        const std::int64_t t = ++s.t;
        const float step_size = static_cast<float>(lr / (1.0 - std::pow(double(g.beta1), double(t))));
        const float bias2 = static_cast<float>(1.0 - std::pow(double(g.beta2), double(t)));
        if (p.device) {
          p.device->adamw_update(
              {w, grad, s.m.data(), s.v.data(), p.numel(), decay != 1.f, decay, c1, c2, step_size, bias2, eps});
          continue;
        }
        float* m = s.m.data();
        float* v = s.v.data();
        const bool wd = decay != 1.f;
        parallel_for(p.numel(), detail::elementwise_grain, [&](index_t b, index_t e) {
          for (index_t i = b; i < e; ++i) {
            const float gi_ = grad[i];
            float wi = w[i];
            if (wd) wi *= decay;
            const float mi = m[i] + c1 * (gi_ - m[i]);
            const float vi = v[i] + c2 * (gi_ * gi_ - v[i]);
            m[i] = mi;
            v[i] = vi;
            w[i] = wi - step_size * (mi / (std::sqrt(vi / bias2) + eps));
          }
        });
      }
    }
  }

  /// Number of step() calls so far.
  std::int64_t steps() const noexcept { return steps_; }
  /// The groups (lr and the like may be changed between steps; parameters appended to a
  /// group start from zero state).
  std::vector<AdamWGroup>& groups() noexcept { return groups_; }
  const std::vector<AdamWGroup>& groups() const noexcept { return groups_; }

  /// Appends m and v of every parameter to `out` and the step counters to `counters`.
  void save(std::vector<NamedBuffer>& out, std::map<std::string, std::int64_t>& counters) const {
    check_names();
    for (std::size_t gi = 0; gi < groups_.size(); ++gi)
      for (std::size_t pi = 0; pi < groups_[gi].params.size(); ++pi) {
        const ParamRef& p = groups_[gi].params[pi];
        const State* s = pi < state_[gi].size() ? &state_[gi][pi] : nullptr;  // appended, never stepped
        const auto n = static_cast<std::size_t>(p.numel());
        out.push_back({"adamw." + p.name + ".m", p.shape(), s ? s->m.to_vector() : std::vector<float>(n, 0.f)});
        out.push_back({"adamw." + p.name + ".v", p.shape(), s ? s->v.to_vector() : std::vector<float>(n, 0.f)});
        counters["adamw." + p.name + ".step"] = s ? s->t : 0;
      }
    counters["adamw.steps"] = steps_;
  }

  /// Restores the state written by save(). Every parameter's buffers and counter must be present
  /// with its shape, and no other "adamw." buffer may be; on error nothing is changed.
  void load(const std::vector<NamedBuffer>& in, const std::map<std::string, std::int64_t>& counters) {
    check_names();
    const auto by_name = detail::index_buffers(in, "adamw.", "AdamW::load");
    std::vector<std::vector<State>> next(groups_.size());
    std::set<std::string> expected;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi)
      for (const ParamRef& p : groups_[gi].params) {
        const std::string base = "adamw." + p.name;
        const auto& m = detail::find_buffer(by_name, base + ".m", p.shape(), p.name, "AdamW::load");
        const auto& v = detail::find_buffer(by_name, base + ".v", p.shape(), p.name, "AdamW::load");
        const auto it = counters.find(base + ".step");
        check(it != counters.end() && it->second >= 0, "AdamW::load", "state of parameter '", p.name,
              "': missing or negative counter '", base, ".step'");
        next[gi].push_back({detail::StateBuffer(p.device, m.data), detail::StateBuffer(p.device, v.data), it->second});
        expected.insert(base + ".m");
        expected.insert(base + ".v");
      }
    for (const auto& kv : by_name)
      check(expected.count(kv.first) != 0, "AdamW::load", "buffer '", kv.first,
            "' belongs to no parameter of this optimizer");
    const auto st = counters.find("adamw.steps");
    check(st != counters.end() && st->second >= 0, "AdamW::load", "missing or negative counter 'adamw.steps'");
    state_ = std::move(next);
    steps_ = st->second;
  }

 private:
  struct State {
    detail::StateBuffer m, v;  // host vectors, or device memory for a parameter on a device
    std::int64_t t = 0;
  };

  /// Zero state for parameters appended since the last call (names re-validated then); checks
  /// that no parameter changed size. Allocates only when something was appended.
  void sync_state() {
    bool grown = false;
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      check(state_[gi].size() <= groups_[gi].params.size(), "AdamW", "group '", groups_[gi].name,
            "' lost parameters after they were added: only append to a group");
      grown = grown || state_[gi].size() < groups_[gi].params.size();
    }
    if (grown) check_names();
    for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
      auto& st = state_[gi];
      const auto& ps = groups_[gi].params;
      for (std::size_t pi = 0; pi < ps.size(); ++pi) {
        if (pi == st.size()) {
          detail::check_param(ps[pi], "AdamW");
          const index_t n = ps[pi].numel();
          st.push_back({detail::StateBuffer(ps[pi].device, n), detail::StateBuffer(ps[pi].device, n), 0});
        }
        check(st[pi].m.size() == ps[pi].numel(), "AdamW", "parameter '", ps[pi].name, "' changed size: (", ps[pi].rows,
              ", ", ps[pi].cols, ") but its state holds ", st[pi].m.size(), " values");
        check(st[pi].m.device() == ps[pi].device, "AdamW", "parameter '", ps[pi].name,
              "' moved to another device after its state was made");
      }
    }
  }

  void check_names() const {
    std::set<std::string> seen;
    for (const auto& g : groups_)
      for (const auto& p : g.params)
        check(seen.insert(p.name).second, "AdamW", "parameter name '", p.name,
              "' appears twice: optimizer state is keyed by name");
  }

  std::vector<AdamWGroup> groups_;
  std::vector<std::vector<State>> state_;
  std::int64_t steps_ = 0;
};

}  // namespace optim
}  // namespace v0
}  // namespace lrt
