// lrt/train/trainer.hpp: the training loop of spec §8 for the baseline: AdamW groups and Muon
// with the release's learning rates and scalings, the warm-down LR schedule, Muon momentum and
// weight-decay schedules, gradient accumulation to a target batch in tokens, evaluation in bits
// per byte, and checkpoints that resume bit for bit (same LRT_NUM_THREADS).
// A checkpoint directory holds model.safetensors (weights + config) and optim.safetensors
// (optimizer moments, step, horizon, data cursor); each file is written atomically.
#pragma once

#include <chrono>
#include <cmath>
#include <string>

#include "../data.hpp"
#include "../io.hpp"
#include "../model/checkpoint.hpp"
#include "../model/eval.hpp"
#include "../model/schedule.hpp"
#include "../optim.hpp"
#include "optimizer_groups.hpp"

namespace lrt {
inline namespace v0 {

struct StepStats {
  std::int64_t step = 0;  // index of the step just taken (0-based)
  double loss = 0;        // mean training loss of the step (over its micro-batches)
  index_t tokens = 0;     // tokens processed
  double seconds = 0;
  double optimizer_seconds = 0;  // of `seconds`: the AdamW and Muon updates
  float lr_multiplier = 1;
};

/// Trains a Model<V, float> on the CPU from token rows with schedule Sched (spec §4).
template <class V = variants::Baseline, class Sched = default_schedule<V>>
class Trainer {
 public:
  using model_type = Model<V, float>;
  using schedule = Sched;

  Trainer(model_type& model, const data::TokenRows& rows, TrainOptions o)
      : m_(&model), o_(std::move(o)), T_(model.config().sequence_len) {
    const char* op = "train";
    check(rows.seq_len() == T_, op, "data rows hold ", rows.seq_len(), " tokens + 1, the model's sequence_len is ", T_);
    check(o_.batch_rows >= 1, op, "batch_rows must be >= 1, got ", o_.batch_rows);
    if (o_.micro_rows <= 0) o_.micro_rows = o_.batch_rows;
    check(o_.batch_rows % o_.micro_rows == 0, op, "micro_rows (", o_.micro_rows, ") must divide batch_rows (",
          o_.batch_rows, ")");
    check(rows.rows() >= o_.micro_rows, op, "the training data has ", rows.rows(), " rows of ", T_ + 1,
          " tokens, fewer than one micro-batch (", o_.micro_rows, " rows)");
    loader_ = std::make_unique<data::Loader>(rows, static_cast<int>(o_.micro_rows), o_.seed);
    opt_ = make_optimizers(*m_, o_, tokens_per_step());
  }

  const TrainOptions& options() const noexcept { return o_; }
  std::int64_t step() const noexcept { return step_; }
  std::int64_t horizon() const noexcept { return o_.steps; }
  /// Sets the horizon N of the schedules (e.g. once a time budget has been converted to steps).
  void set_horizon(std::int64_t n) {
    check(n >= 1, "train", "the number of steps must be >= 1, got ", n);
    o_.steps = n;
  }
  index_t tokens_per_step() const noexcept { return o_.batch_rows * T_; }
  /// Single-token forwards per optimizer step (tokens x the schedule's pass factor).
  double forwards_per_step() const {
    return pass_factor<Sched, V>() * static_cast<double>(tokens_per_step());
  }
  /// Token-forwards computed so far in this process.
  double forwards_done() const noexcept { return forwards_; }
  ScheduleOptions& schedule_options() noexcept { return sched_opts_; }
  index_t accumulation() const noexcept { return o_.batch_rows / o_.micro_rows; }
  bool done() const noexcept { return step_ >= o_.steps; }

  /// One optimizer step: forward/backward over the step's micro-batches, then AdamW and Muon.
  StepStats train_step() {
    check(o_.steps >= 1, "train", "set the horizon (steps) before training");
    const auto t0 = std::chrono::steady_clock::now();
    const index_t accum = accumulation();
    const float inv = 1.f / static_cast<float>(accum);
    double loss = 0;
    for (index_t a = 0; a < accum; ++a) {
      const data::Batch b = loader_->next();
      ad::Graph g;
      const auto ce = schedule_loss<Sched>(*m_, b.inputs, b.targets, sched_opts_);
      forwards_ += ce.token_forwards;
      const float l = ce.loss.value()();
      check(std::isfinite(l), "train", "the loss became ", l, " at step ", step_,
            " (diverged: lower the learning rates)");
      loss += static_cast<double>(l) / static_cast<double>(accum);
      ad::backward(ce.loss, Tensor<float, 0>::full(Shape<0>{}, inv));  // loss / accum
    }
    StepStats s;
    s.step = step_;
    s.loss = loss;
    s.tokens = tokens_per_step();
    s.lr_multiplier = optim::lr_multiplier(step_, o_.steps, o_.warmdown_frac);
    const auto t_opt = std::chrono::steady_clock::now();
    opt_->adamw.step(s.lr_multiplier);
    opt_->muon.step(s.lr_multiplier, optim::muon_momentum(step_),
                    optim::muon_weight_decay(step_, o_.steps, o_.muon_weight_decay));
    s.optimizer_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_opt).count();
    m_->zero_grad();
    ++step_;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }

  /// Forward and backward of one micro-batch without an update or moving the data cursor (for
  /// timing a step before the horizon is known). Returns seconds for a whole step.
  double time_step_without_update() {
    const data::LoaderState st = loader_->state();
    const auto t0 = std::chrono::steady_clock::now();
    const data::Batch b = loader_->next();
    {
      ad::Graph g;
      ad::backward(schedule_loss<Sched>(*m_, b.inputs, b.targets, sched_opts_).loss);
    }
    m_->zero_grad();
    loader_->set_state(st);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() *
           static_cast<double>(accumulation());
  }

  /// Writes DIR/optim.safetensors, then DIR/model.safetensors (each atomically; both carry the
  /// step, and resume() refuses a pair whose steps differ).
  void save(const std::string& dir) const {
    ensure_directory(dir);
    std::vector<optim::NamedBuffer> bufs;
    std::map<std::string, std::int64_t> counters;
    opt_->adamw.save(bufs, counters);
    opt_->muon.save(bufs, counters);
    st::Writer w;
    for (const auto& b : bufs) w.add_f32(b.name, b.data, b.shape);
    json::Value c = json::Value::object();
    for (const auto& [k, v] : counters) c[k] = v;
    const data::LoaderState ls = loader_->state();
    json::Value l = json::Value::object();
    l["seed"] = static_cast<std::int64_t>(ls.seed), l["epoch"] = static_cast<std::int64_t>(ls.epoch);
    l["position"] = static_cast<std::int64_t>(ls.position);
    w.set_metadata("step", std::to_string(step_));
    w.set_metadata("horizon", std::to_string(o_.steps));
    w.set_metadata("counters", c.dump());
    w.set_metadata("loader", l.dump());
    w.set_metadata("train_options", o_.to_json().dump());
    w.write(dir + "/optim.safetensors");
    save_model(*m_, dir + "/model.safetensors", step_, {{"schedule", schedule_spec<Sched>()}}, st::DType::F32,
               sched_opts_);
  }

  /// Restores weights, optimizer state, step, horizon and data cursor from DIR (written by save()
  /// for a model of the same config).
  void resume(const std::string& dir) {
    const st::Reader mr = st::Reader::open(dir + "/model.safetensors");
    const st::Reader orr = st::Reader::open(dir + "/optim.safetensors");
    const ModelConfig saved = read_model_config(mr);
    check(release_config_json<V>(saved) == release_config_json<V>(m_->config()), "resume", "'", mr.label(),
          "' holds a model with another configuration than the one being trained");
    const std::int64_t ms = read_step(mr), os = read_step(orr);
    check(ms == os, "resume", "'", dir, "': model.safetensors is at step ", ms, " but optim.safetensors at step ", os,
          " (an interrupted save?)");
    load_weights(*m_, mr);
    std::vector<optim::NamedBuffer> bufs;
    for (const std::string& n : orr.names()) {
      optim::NamedBuffer b;
      b.name = n;
      b.shape = orr.shape(n);
      b.data = orr.read_f32(n, b.shape);
      bufs.push_back(std::move(b));
    }
    auto meta_json = [&](const char* key) {
      const auto s = orr.meta(key);
      check(s.has_value(), "resume", "'", orr.label(), "': no '", key, "' in __metadata__");
      return json::parse(*s, "'" + orr.label() + "' " + key);
    };
    std::map<std::string, std::int64_t> counters;
    const json::Value cj = meta_json("counters");
    for (const auto& [k, v] : cj.members()) counters[k] = v.as_int();
    opt_->adamw.load(bufs, counters);
    opt_->muon.load(bufs, counters);
    const json::Value l = meta_json("loader");
    data::LoaderState ls;
    ls.seed = static_cast<std::uint64_t>(l.at("seed").as_int());
    ls.epoch = static_cast<std::uint64_t>(l.at("epoch").as_int());
    ls.position = static_cast<std::uint64_t>(l.at("position").as_int());
    loader_->set_state(ls);
    const auto h = orr.meta("horizon");
    check(h.has_value(), "resume", "'", orr.label(), "': no 'horizon' in __metadata__");
    o_.steps = std::stoll(*h);
    step_ = os;
    m_->zero_grad();
  }

 private:
  model_type* m_;
  TrainOptions o_;
  ScheduleOptions sched_opts_;
  double forwards_ = 0;
  index_t T_;
  std::int64_t step_ = 0;
  std::unique_ptr<data::Loader> loader_;
  std::unique_ptr<Optimizers> opt_;  // the roster's groups (optimizer_groups.hpp)
};

template <class V>
Trainer(Model<V, float>&, const data::TokenRows&, TrainOptions) -> Trainer<V, default_schedule<V>>;

}  // namespace v0
}  // namespace lrt
