// lrt/train/trainer.hpp: the training loop of spec §8, for any variant and schedule, on the CPU
// or on a GPU (Trainer<V, Sched, float, D>): AdamW groups and Muon with the release's learning
// rates and scalings, the warm-down LR schedule, Muon momentum and weight-decay schedules,
// gradient accumulation to a target batch in tokens, evaluation in bits per byte, and crash-safe
// checkpoints that resume bit for bit (same LRT_NUM_THREADS).
//
// The same checkpoint files whatever the device: a model on a GPU is saved and loaded through
// the host, so a run trained on a GPU resumes on the CPU and the other way round. On a GPU a step
// waits for the device once, to read its micro-batches' losses back, plus what each
// micro-batch's forward reads back (the emulator test "cuda trainer (emulator): a step waits for
// the GPU once" counts both); the optimizer update is queued behind it and finishes during the
// next step.
//
// A checkpoint is a run directory (train/run_directory.hpp): save() writes one as a unit, resume()
// continues from the newest complete one, bit for bit.
//
// The step (train_step) is one loop for one process and for the N ranks of a group: this rank's
// micro-batches (forward, loss, backward, their gradients summed in order), the exchange
// (losses agreed, gradients reduce-scattered to their owners: dist/zero1.hpp), the update
// (AdamW and Muon on what this rank owns), and the new values all-gathered.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../data/corpus.hpp"
#include "../data/loader.hpp"
#include "../data/tokenizer.hpp"
#include "../dist/group.hpp"
#include "../dist/zero1.hpp"
#include "../model/checkpoint.hpp"
#include "../model/training_schedule.hpp"
#include "../optim/adamw.hpp"
#include "../optim/lr_schedule.hpp"
#include "../optim/muon.hpp"
#include "../optim/param_ref.hpp"
#include "eval.hpp"
#include "optimizer_groups.hpp"
#include "run_directory.hpp"

namespace lrt {
inline namespace v0 {

struct StepStats {
  std::int64_t step = 0;  // index of the step just taken (0-based)
  double loss = 0;        // mean training loss of the step (over its micro-batches)
  index_t tokens = 0;     // tokens processed
  double seconds = 0;
  double optimizer_seconds = 0;  // of `seconds`: the AdamW and Muon updates
  double comm_seconds = 0;       // of `seconds`: data-parallel exchanges (reduce-scatter, all-gather)
  float lr_multiplier = 1;
  int stop_signal = 0;  // non-zero: a stop was asked (Trainer::set_stop_source), on every rank alike
};

/// Trains a Model<V, T, D> from token rows (kept by reference: they must outlive the trainer)
/// with schedule Sched (spec §4): on the CPU
/// (D = cpu::Device) or on a device with optimizer support (lrt::cuda::Device, through
/// <lrt/cuda.hpp>). The optimizers keep float32 state, so T is float.
template <class V = variants::Baseline, class Sched = default_schedule<V>, class T = float, Device D = cpu::Device>
class Trainer {
  static_assert(std::is_same_v<T, float>,
                "lrt::Trainer: the optimizers (AdamW, Muon) hold float32 parameters and state; train a "
                "Model<V, float, D>");

 public:
  using model_type = Model<V, T, D>;
  using schedule = Sched;
  using device = D;

  /// `tok` is the tokenizer the rows were made with (default: bytes): evaluate() counts bytes
  /// through it and save() records it in the checkpoint (resume() then insists on the same one).
  Trainer(model_type& model, const data::TokenRows& rows, TrainOptions o, data::TextTokenizer tok = {})
      : m_(&model), o_(std::move(o)), T_(model.config().sequence_len), tok_(std::move(tok)) {
    const char* op = "train";
    if (!tok_.is_bytes()) {
      check(tok_.vocab_size() <= model.config().vocab_size, op, "the tokenizer (", tok_.describe(), ") gives ",
            tok_.vocab_size(), " ids, more than the model's vocab_size ", model.config().vocab_size);
      check(static_cast<index_t>(tok_.bos()) == model.config().bos(), op, "the tokenizer's BOS is ", tok_.bos(),
            ", the model's bos_id ", model.config().bos());
    }
    check(rows.seq_len() == T_, op, "data rows hold ", rows.seq_len(), " tokens + 1, the model's sequence_len is ", T_);
    check(o_.batch_rows >= 1, op, "batch_rows must be >= 1, got ", o_.batch_rows);
    check(o_.warmup_frac >= 0 && o_.warmdown_frac >= 0 && o_.warmup_frac + o_.warmdown_frac <= 1, op, "warmup_frac (",
          o_.warmup_frac, ") and warmdown_frac (", o_.warmdown_frac, ") must be >= 0 with a sum <= 1");
    check(o_.final_lr_frac >= 0 && o_.final_lr_frac <= 1, op, "final_lr_frac must be in [0, 1], got ",
          o_.final_lr_frac);
    check(o_.muon_weight_decay >= 0, op, "muon_weight_decay must be >= 0, got ", o_.muon_weight_decay);
    micro_default_ = o_.micro_rows <= 0;
    if (o_.micro_rows <= 0) o_.micro_rows = o_.batch_rows;
    check(o_.batch_rows % o_.micro_rows == 0, op, "micro_rows (", o_.micro_rows, ") must divide batch_rows (",
          o_.batch_rows, ")");
    check(rows.rows() >= o_.micro_rows, op, "the training data has ", rows.rows(), " rows of ", T_ + 1,
          " tokens, fewer than one micro-batch (", o_.micro_rows, " rows)");
    loader_ = std::make_unique<data::Loader>(rows, static_cast<int>(o_.micro_rows), o_.seed);
    rows_ = &rows;
    plan_shards(nullptr);
  }
  /// The trainer reads `rows` in place for its whole life: a temporary would dangle.
  Trainer(model_type&, const data::TokenRows&&, TrainOptions, data::TextTokenizer = {}) = delete;

  /// The tokenizer the trainer's rows were made with.
  const data::TextTokenizer& tokenizer() const noexcept { return tok_; }
  /// A metadata string the checkpoints' model.safetensors record besides the model's own (for
  /// example, what data the run held out); set again, it replaces the value.
  void set_metadata(const std::string& key, const std::string& value) {
    for (auto& [k, v] : metadata_)
      if (k == key) return void(v = value);
    metadata_.emplace_back(key, value);
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
  double forwards_per_step() const { return pass_factor<Sched, V>() * static_cast<double>(tokens_per_step()); }
  /// Token-forwards computed so far in this process (with a group: by all its ranks).
  double forwards_done() const noexcept { return forwards_; }
  ScheduleOptions& schedule_options() noexcept { return sched_opts_; }
  index_t accumulation() const noexcept { return o_.batch_rows / o_.micro_rows; }
  bool done() const noexcept { return step_ >= o_.steps; }

  /// Where train_step() looks for a request to stop: a flag that a signal handler sets to the
  /// signal's number (0: none). Each step reads it once and, with a group, the ranks agree on it in
  /// the step's exchange of losses, so that every rank's StepStats::stop_signal is the same and
  /// they can stop after the same step. nullptr (the default): never.
  void set_stop_source(const volatile std::sig_atomic_t* flag) noexcept { stop_source_ = flag; }

  /// One optimizer step, on one process or on every rank of the group (set_group) alike.
  StepStats train_step() {
    check(o_.steps >= 1, "train", "set the horizon (steps) before training");
    const auto t0 = std::chrono::steady_clock::now();
    StepStats s;
    s.step = step_;
    s.tokens = tokens_per_step();
    s.lr_multiplier = o_.lr_multiplier(step_);
    // 1. This rank's micro-batches: forward, loss, backward, the gradients summed in order.
    const std::vector<float> local_losses = forward_backward();
    // 2. The exchange: every micro-batch's loss and any stop request reach every rank (a diverged
    //    loss stops the run before the update), then each gradient its parameter's owner.
    const dist::StepAgreement agreed = shards_.agree(local_losses, stop_requested(), s.comm_seconds);
    for (const float l : agreed.losses) {
      check_loss(l);
      s.loss += static_cast<double>(l) / static_cast<double>(accumulation());
    }
    s.stop_signal = agreed.stop_signal;
    shards_.reduce_scatter_gradients(step_, s.comm_seconds);
    // 3. The update of this rank's parameters, then every rank receives the new values.
    const auto t_opt = std::chrono::steady_clock::now();
    opt_->adamw.step(s.lr_multiplier);
    opt_->muon.step(s.lr_multiplier, optim::muon_momentum(step_),
                    optim::muon_weight_decay(step_, o_.steps, o_.muon_weight_decay));
    s.optimizer_seconds = seconds_since(t_opt);
    shards_.all_gather_values(step_, s.comm_seconds);
    m_->zero_grad();
    ++step_;
    s.seconds = seconds_since(t0);
    return s;
  }

  /// Data-parallel training over `g` (dist/group.hpp; it must outlive the trainer, or be replaced
  /// by nullptr): the N ranks split each step's batch_rows rows in order (rank r takes rows
  /// r B/N .. (r+1) B/N - 1 of the step, in micro-batches of micro_rows; by default micro_rows =
  /// B / N), the gradients are reduce-scattered to their owners in rank order, each rank updates
  /// the parameters it owns (whole matrices, balanced by the optimizers' cost) and holds optimizer
  /// state for those only, and the new values are all-gathered. Collective: every rank calls it,
  /// before resume() and the first step. It first checks that every rank runs the same
  /// configuration, options, data and code (`extra`: more fields to compare, such as the
  /// program's arguments); a difference is an lrt::Error on every rank, naming the field.
  /// N ranks with one micro-batch each give the same bits as one process with N micro-batches.
  void set_group(dist::Group* g, const std::vector<std::pair<std::string, std::string>>& extra = {}) {
    const char* op = "train";
    if (g == nullptr) {  // back to one process: optimizer state for every parameter again
      if (group_ != nullptr) plan_shards(nullptr);
      return;
    }
    check(g->host_memory() == D::host_accessible, op, "a '", g->name(), "' group exchanges ",
          g->host_memory() ? "host" : "device", " memory; this model lives in ", D::host_accessible ? "host" : "device",
          " memory (MPI for CPU ranks, NCCL for GPU ranks)");
    check(step_ == 0, op, "set_group() before the first step and before resume()");
    const index_t N = g->size();
    check_same_on_every_rank(*g, extra);
    check(o_.batch_rows % N == 0, op, "batch_rows (", o_.batch_rows, ") does not divide by the ", N,
          " ranks: each rank takes batch_rows / N rows of every step");
    if (micro_default_) o_.micro_rows = o_.batch_rows / N;
    check((o_.batch_rows / N) % o_.micro_rows == 0, op, "micro_rows (", o_.micro_rows,
          ") must divide the rows of each rank, batch_rows / N = ", o_.batch_rows, " / ", N, " = ", o_.batch_rows / N);
    loader_ = std::make_unique<data::Loader>(*rows_, static_cast<int>(o_.micro_rows), o_.seed);
    plan_shards(g);
  }
  const dist::Group* group() const noexcept { return group_; }
  /// The rank that owns (updates, and holds optimizer state for) each parameter, in roster order.
  std::vector<int> owners() const { return shards_.owners(); }

  /// Forward and backward of one micro-batch without an update or moving the data cursor (for
  /// timing a step before the horizon is known). Returns seconds for a whole step (waiting for
  /// the device at the end).
  double time_step_without_update() {
    const data::LoaderState st = loader_->state();
    const auto t0 = std::chrono::steady_clock::now();
    const data::Batch b = loader_->next();
    {
      ad::Graph g;
      ad::backward(
          schedule_loss<Sched>(*m_, lrt::on_device<D>(b.inputs), lrt::on_device<D>(b.targets), sched_opts_).loss);
    }
    m_->zero_grad();
    DeviceTraits<D>::synchronize();
    loader_->set_state(st);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() *
           static_cast<double>(accumulation() / shards_.size());  // this rank's micro-batches
  }

  /// Parallel-mode bits per byte of the model on `batches` (each with host .inputs and .targets,
  /// e.g. data::validation_batches) with this trainer's schedule and schedule options: every
  /// position scored by the last pass that computed it (evaluate_parallel's `merged`).
  template <class Batches>
  BpbResult evaluate(const Batches& batches) const {
    if (tok_.is_bytes()) return evaluate_parallel<Sched>(*m_, batches, sched_opts_).merged;
    return evaluate_parallel<Sched>(*m_, batches, tok_.token_bytes_table(m_->config().vocab_size), sched_opts_).merged;
  }

  /// How many step directories save() keeps (the newest; at least 1).
  int keep_checkpoints() const noexcept { return keep_; }
  void set_keep_checkpoints(int n) {
    check(n >= 1, "train", "keep_checkpoints must be >= 1, got ", n);
    keep_ = n;
  }
  static constexpr int default_keep_checkpoints = 3;

  /// Saves a checkpoint of the current step into the run directory DIR as a unit
  /// (commit_checkpoint in train/run_directory.hpp: DIR/checkpoints/step-NNNNNN/ with
  /// model.safetensors, optim.safetensors and `extra_files` (name, bytes), then DIR/latest, then
  /// the DIR/model.safetensors and DIR/optim.safetensors links; the newest keep_checkpoints() step
  /// directories are kept). Returns the step directory. With a group it is collective (the
  /// optimizer state is gathered) and rank 0 writes. Errors: lrt::Error("save", ...) naming the
  /// file and the system's reason; the previous checkpoint is left as it was.
  std::string save(const std::string& dir,
                   const std::vector<std::pair<std::string, std::string>>& extra_files = {}) const {
    OptimizerState os;
    opt_->adamw.save(os.buffers, os.counters);
    opt_->muon.save(os.buffers, os.counters);
    os.step = step_;
    os.horizon = o_.steps;
    os.loader = loader_->state();
    if (group_ != nullptr && group_->size() > 1) {
      gather_optimizer_state(*group_, os);  // collective
      put_in_one_process_order(os.buffers);
      if (!group_->is_root()) return dir + "/checkpoints/" + checkpoint_dir_name(step_);  // rank 0 writes
    }
    auto write = [&](const std::string& tmp) {
      write_optimizer_state(tmp + "/optim.safetensors", os, o_.to_json());
      auto meta = tok_.metadata();
      meta.emplace_back("schedule", schedule_spec<Sched>());
      meta.insert(meta.end(), metadata_.begin(), metadata_.end());
      save_model(*m_, tmp + "/model.safetensors", step_, meta, st::DType::F32, sched_opts_);
    };
    return commit_checkpoint(dir, step_, keep_, write, extra_files);
  }

  /// Restores weights, optimizer state, step, horizon and data cursor from the checkpoint that
  /// find_checkpoint(path) names (written by save() for a model of the same config), and returns
  /// where it was (with a note when DIR/latest could not be used).
  CheckpointLocation resume(const std::string& path) {
    detail::OpenedCheckpoint c = detail::open_checkpoint(path);
    const st::Reader& mr = *c.model;
    const CheckpointInfo info = read_checkpoint(mr);  // the one loader's checks (model/checkpoint_file.hpp)
    check(info.run.structure == structure_of<V>(), "resume", "'", mr.label(), "' holds variant ",
          variant_label(info.run.structure), "; this Trainer trains ", variant_label(structure_of<V>()));
    check(release_config_json<V>(info.config) == release_config_json<V>(m_->config()), "resume", "'", mr.label(),
          "' holds a model with another configuration than the one being trained");
    const data::TextTokenizer saved_tok(info.bpe);
    check(saved_tok == tok_, "resume", "'", mr.label(), "' was trained with tokenizer ", saved_tok.describe(),
          "; this run reads its data through ", tok_.describe());
    OptimizerState os = read_optimizer_state(*c.optim);
    load_weights(*m_, mr);
    if (group_ != nullptr) {  // this rank's parameters only: the others' state lives on their owners
      std::set<std::string> mine;
      for (std::size_t i = 0; i < params_.size(); ++i)
        if (shards_.owned()[i])
          for (const char* k : {"adamw.%.m", "adamw.%.v", "muon.%.momentum", "muon.%.second_moment"}) {
            std::string n = k;
            n.replace(n.find('%'), 1, params_[i].name);
            mine.insert(n);
          }
      std::erase_if(os.buffers, [&](const optim::NamedBuffer& b) { return mine.count(b.name) == 0; });
    }
    opt_->adamw.load(os.buffers, os.counters);
    opt_->muon.load(os.buffers, os.counters);
    loader_->set_state(os.loader);
    o_.steps = os.horizon;
    step_ = c.where.step;
    m_->zero_grad();
    return std::move(c.where);
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  int stop_requested() const noexcept { return stop_source_ != nullptr ? static_cast<int>(*stop_source_) : 0; }
  void check_loss(T l) const {
    check(std::isfinite(l), "train", "the loss became ", l, " at step ", step_,
          " (diverged: lower the learning rates)");
  }

  /// This rank's micro-batches of the step (it takes rows rank B/N .. (rank+1) B/N - 1 of the
  /// step's B rows): forward, loss and backward of each, whose gradients are added in order
  /// (Zero1::add_gradients). Returns their losses, read back from a device once.
  std::vector<float> forward_backward() {
    const int N = shards_.size(), rank = shards_.rank();
    const index_t local_rows = o_.batch_rows / N, local_accum = local_rows / o_.micro_rows;
    const float inv = 1.f / static_cast<float>(accumulation());
    std::vector<float> losses(static_cast<std::size_t>(local_accum));
    [[maybe_unused]] Tensor<T, 1, D> dlosses;
    if constexpr (!D::host_accessible) dlosses = Tensor<T, 1, D>(Shape<1>{local_accum}, uninitialized);
    shards_.begin_step(local_accum);
    loader_->skip(static_cast<index_t>(rank) * local_rows);  // the rows of the ranks before this one
    for (index_t a = 0; a < local_accum; ++a) {
      const data::Batch b = loader_->next();
      {
        ad::Graph g;
        const auto ce =
            schedule_loss<Sched>(*m_, lrt::on_device<D>(b.inputs), lrt::on_device<D>(b.targets), sched_opts_);
        forwards_ += ce.token_forwards * static_cast<double>(N);
        if constexpr (D::host_accessible)
          losses[static_cast<std::size_t>(a)] = ce.loss.value()();
        else  // kept on the device; read once, below
          DeviceTraits<D>::copy_within(dlosses.data() + a, ce.loss.value().data(), sizeof(T));
        ad::backward(ce.loss, Tensor<T, 0, D>::full(Shape<0>{}, inv));  // loss / accum
      }
      if (shards_.add_gradients()) m_->zero_grad();
    }
    loader_->skip(static_cast<index_t>(N - 1 - rank) * local_rows);  // and those of the ranks after
    if constexpr (!D::host_accessible) {
      const Tensor<T, 1, cpu::Device> h = lrt::to<cpu::Device>(dlosses);
      for (index_t a = 0; a < local_accum; ++a) losses[static_cast<std::size_t>(a)] = h(a);
    }
    return losses;
  }

  /// The parameters as the sharded step sees them (roster order), their owners over `g` (nullptr:
  /// this process owns all) and the optimizers of what this rank owns.
  void plan_shards(dist::Group* g) {
    params_.clear();
    roles_.clear();
    m_->for_each_param_role([&](auto& p, ParamRole r) {
      dist::ShardedParam sp;
      sp.name = p.name();
      sp.numel = p.shape().numel();
      const optim::ParamRef ref = optim::ParamRef::of(p);
      sp.rows = ref.rows;
      sp.cols = ref.cols;
      sp.matrix = optimizer_group(r) == OptimizerGroup::Muon;
      auto* pp = &p;
      sp.grad_write = [pp] { return pp->grad_storage().data(); };
      sp.grad = [pp]() -> const float* { return pp->has_grad() ? pp->grad().data() : nullptr; };
      sp.value = [pp] { return pp->value().data(); };
      params_.push_back(sp);
      roles_.push_back(r);
    });
    group_ = g;
    shards_.plan(params_, g, [](float* dst, const float* src, index_t n) {
      if constexpr (D::host_accessible)
        dist::detail::add_host(dst, src, n);
      else
        TensorView<float, 1, D>(dst, Shape<1>{n}) += TensorView<const float, 1, D>(src, Shape<1>{n});
    });
    opt_ = make_optimizers(*m_, o_, tokens_per_step(), g != nullptr ? &shards_.owned() : nullptr);
  }

  /// Gathered optimizer state in the order one process saves it (make_optimizers: optimizer
  /// group, then roster index; m before v), so the file is the same at any number of ranks.
  void put_in_one_process_order(std::vector<optim::NamedBuffer>& bufs) const {
    auto key = [&](const optim::NamedBuffer& b) {
      for (std::size_t i = 0; i < params_.size(); ++i)
        for (const char* pre : {"adamw.", "muon."}) {
          const std::string head = pre + params_[i].name + ".";
          if (b.name.size() > head.size() && b.name.compare(0, head.size(), head) == 0) {
            const std::string tail = b.name.substr(head.size());
            return std::tuple<int, std::size_t, int>(static_cast<int>(optimizer_group(roles_[i])), i,
                                                     tail == "m" || tail == "momentum" ? 0 : 1);
          }
        }
      return std::tuple<int, std::size_t, int>(optimizer_group_count, 0, 0);
    };
    std::stable_sort(bufs.begin(), bufs.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  }

  /// Every rank must run the same model, options, schedule, data and code (`extra`: the caller's).
  void check_same_on_every_rank(dist::Group& g, const std::vector<std::pair<std::string, std::string>>& extra) const {
    std::vector<std::pair<std::string, std::string>> f;
    f.emplace_back("code", std::string("lrt ") + std::to_string(LRT_VERSION_MAJOR) + "." +
                               std::to_string(LRT_VERSION_MINOR) + "." + std::to_string(LRT_VERSION_PATCH) +
                               ", built " + __DATE__ + " " + __TIME__ + " by " + __VERSION__);
    f.emplace_back("model", release_config_json<V>(m_->config()).dump());
    f.emplace_back("schedule", schedule_spec<Sched>());
    f.emplace_back("train options", o_.to_json().dump());
    f.emplace_back("tokenizer", tok_.describe());
    std::uint64_t h = 1469598103934665603ull;
    for (const auto t : rows_->tokens()) h = (h ^ static_cast<std::uint64_t>(t)) * 1099511628211ull;
    f.emplace_back("data", std::to_string(rows_->rows()) + " rows, FNV-1a " + std::to_string(h));
    for (const auto& e : extra) f.push_back(e);
    dist::check_same_on_every_rank(g, f, "train");
  }

  model_type* m_;
  const data::TokenRows* rows_ = nullptr;
  bool micro_default_ = false;
  dist::Group* group_ = nullptr;
  const volatile std::sig_atomic_t* stop_source_ = nullptr;
  std::vector<dist::ShardedParam> params_;                     // the roster, as dist::Zero1 sees it
  std::vector<std::pair<std::string, std::string>> metadata_;  // set_metadata's
  std::vector<ParamRole> roles_;                               // and each parameter's role
  dist::Zero1<D> shards_;
  TrainOptions o_;
  ScheduleOptions sched_opts_;
  double forwards_ = 0;
  index_t T_;
  data::TextTokenizer tok_;
  std::int64_t step_ = 0;
  std::unique_ptr<data::Loader> loader_;
  std::unique_ptr<Optimizers> opt_;  // this rank's optimizers (optimizer_groups.hpp)
  int keep_ = default_keep_checkpoints;
};

template <class V, class T, Device D>
Trainer(Model<V, T, D>&, const data::TokenRows&, TrainOptions) -> Trainer<V, default_schedule<V>, T, D>;
template <class V, class T, Device D>
Trainer(Model<V, T, D>&, const data::TokenRows&, TrainOptions, data::TextTokenizer)
    -> Trainer<V, default_schedule<V>, T, D>;

#if defined(LRT_COMPILED_PAIRS)  // compiled in the runtime library (variant.hpp, LRT_COMPILED_VARIANTS)
#define LRT_DETAIL_EXTERN_TRAINER(V) extern template class LRT_API Trainer<V, default_schedule<V>>;
LRT_COMPILED_VARIANTS(LRT_DETAIL_EXTERN_TRAINER)
#undef LRT_DETAIL_EXTERN_TRAINER
#endif

}  // namespace v0
}  // namespace lrt
