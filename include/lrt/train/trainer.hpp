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
// A checkpoint is a directory holding model.safetensors (weights + config) and optim.safetensors
// (optimizer moments, step, horizon, data cursor), plus whatever files the caller adds (lrt-train:
// log.csv up to that step). Trainer::save(DIR) writes the run directory DIR as
//   DIR/checkpoints/step-000020/   one checkpoint, written as a unit: its files go into
//                                  DIR/checkpoints/.tmp-step-000020.<pid>/, are fsynced, and the
//                                  directory is renamed into place as a whole (then fsynced);
//   DIR/latest                     "checkpoints/step-000020\n", replaced atomically afterwards: the
//                                  commit point; resume(DIR) continues from what it names;
//   DIR/model.safetensors,         hard links to the latest checkpoint's files (copies where the
//   DIR/optim.safetensors          filesystem has no hard links), refreshed after `latest` for
//                                  lrt-eval / lrt-generate and for readers of the one-level layout;
//                                  after a crash they may lag one checkpoint behind `latest`;
// and keeps the newest keep_checkpoints() step directories (3 by default): older ones are removed
// only once the new one is committed. A kill at any moment leaves `latest` naming a complete
// checkpoint; an error (full disk, EFBIG under `ulimit -f`, no permission) is an lrt::Error naming
// the file and the errno text, the temporary directory is removed and the previous checkpoint is
// untouched. One process writes a run directory at a time.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <initializer_list>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "../data/corpus.hpp"
#include "../dist/group.hpp"
#include "../data/loader.hpp"
#include "../data/tokenizer.hpp"
#include "../io/file.hpp"
#include "../io/json.hpp"
#include "../io/safetensors.hpp"
#include "../model/checkpoint.hpp"
#include "../model/training_schedule.hpp"
#include "../optim/adamw.hpp"
#include "../optim/lr_schedule.hpp"
#include "../optim/muon.hpp"
#include "../optim/param_ref.hpp"
#include "eval.hpp"
#include "optimizer_groups.hpp"

namespace lrt {
inline namespace v0 {

/// A checkpoint found on disk (find_checkpoint): the directory holding its model.safetensors and
/// optim.safetensors, their step, and a note when DIR/latest could not be used.
struct CheckpointLocation {
  std::string dir;  // a step directory, or the directory itself for the one-level layout
  std::int64_t step = 0;
  std::string note;  // non-empty: why `latest` was not used, and what was used instead
  std::string model_path() const { return dir + "/model.safetensors"; }
  std::string optim_path() const { return dir + "/optim.safetensors"; }
};

/// "step-000020": the name of a step directory under DIR/checkpoints.
inline std::string checkpoint_dir_name(std::int64_t step) {
  char b[40];
  std::snprintf(b, sizeof b, "step-%06lld", static_cast<long long>(step));
  return b;
}
/// The step of a name written by checkpoint_dir_name ("step-" and digits only), else nothing.
inline std::optional<std::int64_t> parse_checkpoint_dir_name(std::string_view name) {
  constexpr std::string_view prefix = "step-";
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  std::int64_t v = 0;
  for (const char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

namespace detail {
/// The step directories under `ckdir` as (step, name), newest first (none when it is missing).
inline std::vector<std::pair<std::int64_t, std::string>> step_dirs(const std::string& ckdir) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(ckdir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (const auto s = parse_checkpoint_dir_name(name); s && it->is_directory(ec)) out.emplace_back(*s, name);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

/// A consistent checkpoint in `dir` (both files readable, the same step, and the step of the
/// directory's name when it has one), or nothing with the reason in `why`.
struct OpenedCheckpoint {
  CheckpointLocation where;
  std::optional<st::Reader> model, optim;
};
inline std::optional<OpenedCheckpoint> open_checkpoint_dir(const std::string& dir, std::string& why) {
  OpenedCheckpoint c;
  c.where.dir = dir;
  std::error_code ec;
  for (const std::string& f : {c.where.model_path(), c.where.optim_path()})
    if (!std::filesystem::is_regular_file(f, ec)) {
      why = "'" + f + "' is missing";
      return std::nullopt;
    }
  try {
    c.model = st::Reader::open(c.where.model_path());
    c.optim = st::Reader::open(c.where.optim_path());
    const std::int64_t ms = read_step(*c.model), os = read_step(*c.optim);
    if (ms != os) {
      why = "'" + dir + "': model.safetensors is at step " + std::to_string(ms) + " but optim.safetensors at step " +
            std::to_string(os) + " (an interrupted save?)";
      return std::nullopt;
    }
    const auto named = parse_checkpoint_dir_name(std::filesystem::path(dir).filename().string());
    if (named && *named != ms) {
      why = "'" + dir + "' holds a checkpoint of step " + std::to_string(ms);
      return std::nullopt;
    }
    c.where.step = ms;
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
  return c;
}

/// find_checkpoint, keeping the files it read.
inline OpenedCheckpoint open_checkpoint(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string latest = path + "/latest", ckdir = path + "/checkpoints";
  std::string why;
  if (fs::exists(latest, ec) || fs::is_directory(ckdir, ec)) {  // the step-directory layout
    if (fs::exists(latest, ec)) {
      std::string name;
      try {
        name = read_file(latest, "checkpoint");
      } catch (const Error& e) {
        why = e.what();
      }
      while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
      if (why.empty() && name.empty()) why = "'" + latest + "' is empty";
      if (why.empty()) {
        const std::string dir = fs::path(name).is_absolute() ? name : path + "/" + name;
        std::string w;
        if (auto c = open_checkpoint_dir(dir, w)) return std::move(*c);
        why = "'" + latest + "' names '" + name + "', which is not a complete checkpoint: " + w;
      }
    } else {
      why = "no '" + latest + "'";
    }
    for (const auto& [step, name] : step_dirs(ckdir)) {
      std::string w;
      if (auto c = open_checkpoint_dir(ckdir + "/" + name, w)) {
        c->where.note =
            why + "; using the newest complete checkpoint, '" + c->where.dir + "' (step " + std::to_string(step) + ")";
        return std::move(*c);
      }
    }
    std::string w;
    if (auto c = open_checkpoint_dir(path, w)) {  // the links next to `latest`, if they agree
      c->where.note = why + ", and no complete directory in '" + ckdir + "'; using '" + c->where.model_path() +
                      "' and '" + c->where.optim_path() + "' (step " + std::to_string(c->where.step) + ")";
      return std::move(*c);
    }
    ::lrt::throw_error("checkpoint", "'" + path + "': no complete checkpoint: " + why + ", no complete directory in '" +
                                         ckdir + "', and " + w);
  }
  // A step directory itself, or a run written in the one-level layout (DIR/model + DIR/optim).
  if (!fs::is_directory(path, ec)) ::lrt::throw_error("checkpoint", "'" + path + "': no such checkpoint directory");
  if (auto c = open_checkpoint_dir(path, why)) return std::move(*c);
  ::lrt::throw_error("checkpoint", why);
}

/// Moves the finished temporary directory `tmp` to `dst`. An existing `dst` (the same step saved
/// again) is swapped out atomically where the system can (Linux renameat2), and removed.
inline void move_into_place(const std::string& tmp, const std::string& dst) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (::rename(tmp.c_str(), dst.c_str()) == 0) return;
  int err = errno;
  if (err == EEXIST || err == ENOTEMPTY) {
#if defined(__linux__) && defined(RENAME_EXCHANGE)
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(tmp, ec);  // now the old content
      return;
    }
#endif
    const std::string old = tmp + ".old";
    if (::rename(dst.c_str(), old.c_str()) == 0) {
      if (::rename(tmp.c_str(), dst.c_str()) == 0) {
        fs::remove_all(old, ec);
        return;
      }
      err = errno;
      ::rename(old.c_str(), dst.c_str());
    } else {
      err = errno;
    }
  }
  ::lrt::throw_error("write", "'" + dst + "': cannot move the new checkpoint into place: " + std::strerror(err));
}

/// Whether `name` is a temporary that write_file_atomic or replace_with_link of another process
/// left for one of `files` ("<file>.tmp.<pid>", the pid not this one's).
inline bool is_stale_temporary(std::string_view name, std::initializer_list<std::string_view> files) {
  const std::string mine = std::to_string(::getpid());
  for (const std::string_view f : files) {
    if (name.size() <= f.size() + 5 || name.substr(0, f.size()) != f || name.substr(f.size(), 5) != ".tmp.") continue;
    const std::string_view pid = name.substr(f.size() + 5);
    if (pid != mine && pid.find_first_not_of("0123456789") == std::string_view::npos) return true;
  }
  return false;
}

/// Removes what a killed save leaves behind: DIR/checkpoints/.tmp-* directories and the temporaries
/// of write_file_atomic / replace_with_link for latest, model.safetensors, optim.safetensors and
/// the caller's `files` (a program's logs, written next to them).
inline void remove_stale_save_files(const std::string& dir, const std::string& ckdir,
                                    std::initializer_list<std::string_view> files = {}) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(ckdir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code rc;
    if (n.rfind(".tmp-", 0) == 0) fs::remove_all(it->path(), rc);
  }
  ec.clear();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code rc;
    if (is_stale_temporary(n, {"latest", "model.safetensors", "optim.safetensors"}) || is_stale_temporary(n, files))
      fs::remove(it->path(), rc);
  }
}
}  // namespace detail

/// The checkpoint that resume(path) continues from. `path` is
///  - a run directory written by Trainer::save: the step directory DIR/latest names; when that is
///    missing or incomplete, the newest complete DIR/checkpoints/step-* (with a note saying so),
///    and last DIR/model.safetensors + DIR/optim.safetensors if they agree;
///  - a step directory (DIR/checkpoints/step-000020), or a run directory of the one-level layout
///    written before step directories (DIR/model.safetensors + DIR/optim.safetensors).
/// Complete means both files parse and carry the same step. lrt::Error("resume", ...) saying what
/// was tried when there is none.
inline CheckpointLocation find_checkpoint(const std::string& path) { return detail::open_checkpoint(path).where; }

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
    build_slots();
    setup_shards(1, 0);
    opt_ = make_optimizers(*m_, o_, tokens_per_step());
  }
  /// The trainer reads `rows` in place for its whole life: a temporary would dangle.
  Trainer(model_type&, const data::TokenRows&&, TrainOptions, data::TextTokenizer = {}) = delete;

  /// The tokenizer the trainer's rows were made with.
  const data::TextTokenizer& tokenizer() const noexcept { return tok_; }

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

  /// One optimizer step: forward/backward over the step's micro-batches, then AdamW and Muon.
  StepStats train_step() {
    check(o_.steps >= 1, "train", "set the horizon (steps) before training");
    if (group_ != nullptr || D::host_accessible) return packed_step();
    const auto t0 = std::chrono::steady_clock::now();
    const index_t accum = accumulation();
    const float inv = 1.f / static_cast<float>(accum);
    double loss = 0;
    [[maybe_unused]] Tensor<T, 1, D> losses;  // on a device: the micro-batches' losses, read once
    if constexpr (!D::host_accessible) losses = Tensor<T, 1, D>(Shape<1>{accum}, uninitialized);
    for (index_t a = 0; a < accum; ++a) {
      const data::Batch b = loader_->next();
      ad::Graph g;
      const auto ce = schedule_loss<Sched>(*m_, lrt::on_device<D>(b.inputs), lrt::on_device<D>(b.targets), sched_opts_);
      forwards_ += ce.token_forwards;
      if constexpr (D::host_accessible) {
        check_loss(ce.loss.value()());
        loss += static_cast<double>(ce.loss.value()()) / static_cast<double>(accum);
      } else {  // kept on the device (backward frees the value); no wait here
        DeviceTraits<D>::copy_within(losses.data() + a, ce.loss.value().data(), sizeof(T));
      }
      ad::backward(ce.loss, Tensor<T, 0, D>::full(Shape<0>{}, inv));  // loss / accum
    }
    if constexpr (!D::host_accessible) {  // the step's one wait: before the update, so a diverged
      const Tensor<T, 1, cpu::Device> h = lrt::to<cpu::Device>(losses);  // loss changes nothing
      for (index_t a = 0; a < accum; ++a) {
        check_loss(h(a));
        loss += static_cast<double>(h(a)) / static_cast<double>(accum);
      }
    }
    StepStats s;
    s.step = step_;
    s.loss = loss;
    s.tokens = tokens_per_step();
    s.lr_multiplier = o_.lr_multiplier(step_);
    const auto t_opt = std::chrono::steady_clock::now();
    optimizer_update(s.lr_multiplier);
    s.optimizer_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_opt).count();
    m_->zero_grad();
    ++step_;
    s.stop_signal = stop_requested();
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
    if (g == nullptr) {
      group_ = nullptr;
      setup_shards(1, 0);
      return;
    }
    check(g->host_memory() == D::host_accessible, op, "a '", g->name(), "' group exchanges ",
          g->host_memory() ? "host" : "device", " memory; this model lives in ", D::host_accessible ? "host" : "device",
          " memory (MPI for CPU ranks, NCCL for GPU ranks)");
    check(step_ == 0, op, "set_group() before the first step and before resume()");
    const index_t N = g->size();
    check_fingerprints(*g, extra);
    check(o_.batch_rows % N == 0, op, "batch_rows (", o_.batch_rows, ") does not divide by the ", N,
          " ranks: each rank takes batch_rows / N rows of every step");
    if (micro_default_) o_.micro_rows = o_.batch_rows / N;
    check((o_.batch_rows / N) % o_.micro_rows == 0, op, "micro_rows (", o_.micro_rows,
          ") must divide the rows of each rank, batch_rows / N = ", o_.batch_rows, " / ", N, " = ", o_.batch_rows / N);
    loader_ = std::make_unique<data::Loader>(*rows_, static_cast<int>(o_.micro_rows), o_.seed);
    group_ = g;
    setup_shards(static_cast<int>(N), g->rank());
    opt_ = make_optimizers(*m_, o_, tokens_per_step(), &owned_);
  }
  const dist::Group* group() const noexcept { return group_; }
  /// The rank that owns (updates, and holds optimizer state for) each parameter, in roster order.
  std::vector<int> owners() const {
    std::vector<int> o;
    for (const Slot& sl : slots_) o.push_back(sl.owner);
    return o;
  }

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
           static_cast<double>(accumulation() / grp().size());  // this rank's micro-batches
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

  /// Saves a checkpoint of the current step into the run directory DIR as a unit (the layout at
  /// the top of this file): DIR/checkpoints/step-NNNNNN/ with model.safetensors, optim.safetensors
  /// and `extra_files` (name, bytes), then DIR/latest, then the DIR/model.safetensors and
  /// DIR/optim.safetensors links; then removes the step directories beyond the newest
  /// keep_checkpoints(), and those of later steps (left by a run that went further before this one
  /// resumed from an earlier checkpoint into the same directory). Returns the step directory.
  /// Errors: lrt::Error("save", ...) naming the file and the system's reason; the temporary
  /// directory is removed and the previous checkpoint (what DIR/latest names) is left as it was.
  std::string save(const std::string& dir,
                   const std::vector<std::pair<std::string, std::string>>& extra_files = {}) const {
    namespace fs = std::filesystem;
    const std::string ckdir = dir + "/checkpoints", name = checkpoint_dir_name(step_);
    const std::string final_dir = ckdir + "/" + name;
    const std::string tmp = ckdir + "/.tmp-" + name + "." + std::to_string(::getpid());
    const std::string what = "'" + dir + "': the checkpoint of step " + std::to_string(step_);
    std::error_code ec;
    std::vector<optim::NamedBuffer> bufs;
    std::map<std::string, std::int64_t> counters;
    gather_optimizer_state(bufs, counters);                         // collective with a group
    if (group_ != nullptr && !group_->is_root()) return final_dir;  // rank 0 writes
    try {
      ensure_directory(dir);
      ensure_directory(ckdir);
      detail::remove_stale_save_files(dir, ckdir);
      fs::remove_all(tmp, ec);
      if (::mkdir(tmp.c_str(), 0777) != 0)
        ::lrt::throw_error("mkdir", "'" + tmp + "': cannot create directory: " + std::strerror(errno));
      write_optimizer_state(tmp + "/optim.safetensors", bufs, counters);
      auto meta = tok_.metadata();
      meta.emplace_back("schedule", schedule_spec<Sched>());
      save_model(*m_, tmp + "/model.safetensors", step_, meta, st::DType::F32, sched_opts_);
      for (const auto& [file, bytes] : extra_files) {
        check(!file.empty() && file.find('/') == std::string::npos && file != "model.safetensors" &&
                  file != "optim.safetensors",
              "save", "extra checkpoint file '", file, "': a plain file name other than model/optim.safetensors");
        write_file_atomic(tmp + "/" + file, bytes);
      }
      sync_directory(tmp);
      detail::move_into_place(tmp, final_dir);
      sync_directory(ckdir);
      write_file_atomic(dir + "/latest", "checkpoints/" + name + "\n");  // the commit point
    } catch (const Error& e) {
      fs::remove_all(tmp, ec);
      std::string before;
      try {
        std::string l = read_file(dir + "/latest", "save");
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
        before = "; '" + dir + "/latest' still names " + l + ", which is unchanged";
      } catch (const Error&) {
        if (fs::exists(dir + "/model.safetensors", ec)) before = "; the files already in '" + dir + "' are unchanged";
      }
      ::lrt::throw_error("save", what + " was not saved: " + e.what() + before);
    }
    // Today's names, for lrt-eval / lrt-generate: links to the committed files.
    try {
      replace_with_link(final_dir + "/model.safetensors", dir + "/model.safetensors");
      replace_with_link(final_dir + "/optim.safetensors", dir + "/optim.safetensors");
      sync_directory(dir);
    } catch (const Error& e) {
      ::lrt::throw_error("save", what + " is saved in '" + final_dir + "' (named by '" + dir +
                                     "/latest'), but refreshing the model.safetensors next to it failed: " + e.what());
    }
    int kept = 0;
    for (const auto& [s, n] : detail::step_dirs(ckdir)) {
      if (s <= step_ && kept < keep_) {
        ++kept;
        continue;
      }
      if (n != name) fs::remove_all(ckdir + "/" + n, ec);
    }
    try {
      sync_directory(ckdir);
    } catch (const Error&) {  // only the removals, which a crash may undo harmlessly
    }
    return final_dir;
  }

  /// Restores weights, optimizer state, step, horizon and data cursor from the checkpoint that
  /// find_checkpoint(path) names (written by save() for a model of the same config), and returns
  /// where it was (with a note when DIR/latest could not be used).
  CheckpointLocation resume(const std::string& path) {
    detail::OpenedCheckpoint c = detail::open_checkpoint(path);
    const st::Reader& mr = *c.model;
    const st::Reader& orr = *c.optim;
    const CheckpointInfo info = read_checkpoint(mr);  // the one loader's checks (model/checkpoint_file.hpp)
    check(info.run.structure == structure_of<V>(), "resume", "'", mr.label(), "' holds variant ",
          variant_label(info.run.structure), "; this Trainer trains ", variant_label(structure_of<V>()));
    check(release_config_json<V>(info.config) == release_config_json<V>(m_->config()), "resume", "'", mr.label(),
          "' holds a model with another configuration than the one being trained");
    const data::TextTokenizer saved_tok(info.bpe);
    check(saved_tok == tok_, "resume", "'", mr.label(), "' was trained with tokenizer ", saved_tok.describe(),
          "; this run reads its data through ", tok_.describe());
    const std::int64_t os = c.where.step;
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
    if (group_ != nullptr) {  // this rank's parameters only: the others' state lives on their owners
      std::set<std::string> mine;
      for (const Slot& sl : slots_)
        if (sl.owner == group_->rank())
          for (const char* k : {"adamw.%.m", "adamw.%.v", "muon.%.momentum", "muon.%.second_moment"}) {
            std::string n = k;
            n.replace(n.find('%'), 1, sl.name);
            mine.insert(n);
          }
      std::erase_if(bufs, [&](const optim::NamedBuffer& b) { return mine.count(b.name) == 0; });
    }
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
    return std::move(c.where);
  }

 private:
  int stop_requested() const noexcept { return stop_source_ != nullptr ? static_cast<int>(*stop_source_) : 0; }
  void check_loss(T l) const {
    check(std::isfinite(l), "train", "the loss became ", l, " at step ", step_,
          " (diverged: lower the learning rates)");
  }

  /// optim.safetensors: the optimizers' buffers and counters, step, horizon, data cursor, options.
  void write_optimizer_state(const std::string& path, const std::vector<optim::NamedBuffer>& bufs,
                             const std::map<std::string, std::int64_t>& counters) const {
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
    w.write(path);
  }

  // ---- the parameters as the data-parallel code sees them ----
  struct Slot {
    std::string name;
    index_t numel = 0, rows = 1, cols = 1;
    bool matrix = false;
    int order = 0;  // where one process's optimizers save its state: AdamW groups, then Muon
    int owner = 0;
    index_t offset = 0;                  // in the packed buffers (owner by owner, roster order)
    std::function<float*()> grad_write;  // the gradient's storage, made ready
    std::function<const float*()> grad;  // nullptr when there is none
    std::function<float*()> value;
  };

  void build_slots() {
    slots_.clear();
    m_->for_each_param_role([&](auto& p, ParamRole r) {
      Slot sl;
      sl.name = p.name();
      sl.numel = p.shape().numel();
      const optim::ParamRef ref = optim::ParamRef::of(p);
      sl.rows = ref.rows;
      sl.cols = ref.cols;
      sl.matrix = r == ParamRole::Matrix;
      // make_optimizers' groups: lm_head, embeddings, resid, x0, gamma (AdamW), then Muon.
      sl.order = r == ParamRole::Unembedding   ? 0
                 : r == ParamRole::Embedding   ? 1
                 : r == ParamRole::ResidLambda ? 2
                 : r == ParamRole::X0Lambda    ? 3
                 : r == ParamRole::MemoryGain  ? 4
                                               : 5;
      auto* pp = &p;
      sl.grad_write = [pp] { return pp->grad_storage().data(); };
      sl.grad = [pp]() -> const float* { return pp->has_grad() ? pp->grad().data() : nullptr; };
      sl.value = [pp] { return pp->value().data(); };
      slots_.push_back(std::move(sl));
    });
  }

  /// Owners (greedy, largest cost first, to the least loaded rank; ties to the lower index) and
  /// the packed layout; sizes the buffers.
  void setup_shards(int N, int rank) {
    std::vector<double> cost(slots_.size());
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      const Slot& sl = slots_[i];
      const double s = static_cast<double>(std::min(sl.rows, sl.cols)), n = static_cast<double>(sl.numel);
      // Muon: Polar Express, about 5 x (4 s n + 2 s^3) flops; AdamW: a few passes over n values.
      cost[i] = sl.matrix ? 5.0 * (4.0 * s * n + 2.0 * s * s * s) + 20.0 * n : 20.0 * n;
    }
    std::vector<std::size_t> order(slots_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
    std::vector<double> load(static_cast<std::size_t>(N), 0.0);
    for (const std::size_t i : order) {
      std::size_t best = 0;
      for (std::size_t r = 1; r < load.size(); ++r)
        if (load[r] < load[best]) best = r;
      slots_[i].owner = static_cast<int>(best);
      load[best] += cost[i];
    }
    counts_.assign(static_cast<std::size_t>(N), 0);
    index_t off = 0;
    for (int o = 0; o < N; ++o)
      for (Slot& sl : slots_)
        if (sl.owner == o) {
          sl.offset = off;
          off += sl.numel;
          counts_[static_cast<std::size_t>(o)] += sl.numel;
        }
    base_ = 0;
    for (int o = 0; o < rank; ++o) base_ += counts_[static_cast<std::size_t>(o)];
    owned_.assign(slots_.size(), 0);
    for (std::size_t i = 0; i < slots_.size(); ++i) owned_[i] = slots_[i].owner == rank ? 1 : 0;
    total_ = off;
    send_ = Tensor<float, 1, D>();  // sized when first needed
    recv_ = Tensor<float, 1, D>();
    gather_ = Tensor<float, 1, D>();
  }

  dist::Group& grp() noexcept { return group_ != nullptr ? *group_ : solo_; }
  static void copy_floats(float* dst, const float* src, index_t n) {
    if (n > 0) DeviceTraits<D>::copy_within(dst, src, sizeof(float) * static_cast<std::size_t>(n));
  }
  void add_floats(float* dst, const float* src, index_t n) {
    if (group_ != nullptr)
      group_->add(dst, src, n);
    else
      dist::detail::add_host(dst, src, n);
  }

  /// A step whose gradients go through the packed buffer: micro-batches are added into it in
  /// order (so that accumulation gives the same bits at any split), and with a group the buffer
  /// is reduce-scattered, the owners update, and the values are all-gathered.
  StepStats packed_step() {
    const auto t0 = std::chrono::steady_clock::now();
    const int N = grp().size(), rank = grp().rank();
    const index_t local_rows = o_.batch_rows / N, local_accum = local_rows / o_.micro_rows;
    const index_t accum = accumulation();
    const float inv = 1.f / static_cast<float>(accum);
    const bool packed = N > 1 || local_accum > 1;
    if (packed && send_.numel() != total_) send_ = Tensor<float, 1, D>(Shape<1>{std::max<index_t>(total_, 1)});
    std::vector<char> has(slots_.size(), 0);
    std::vector<float> local_losses(static_cast<std::size_t>(local_accum));
    [[maybe_unused]] Tensor<T, 1, D> dlosses;
    if constexpr (!D::host_accessible) dlosses = Tensor<T, 1, D>(Shape<1>{local_accum}, uninitialized);
    loader_->skip(static_cast<index_t>(rank) * local_rows);
    for (index_t a = 0; a < local_accum; ++a) {
      const data::Batch b = loader_->next();
      {
        ad::Graph g;
        const auto ce =
            schedule_loss<Sched>(*m_, lrt::on_device<D>(b.inputs), lrt::on_device<D>(b.targets), sched_opts_);
        forwards_ += ce.token_forwards * static_cast<double>(N);
        if constexpr (D::host_accessible)
          local_losses[static_cast<std::size_t>(a)] = ce.loss.value()();
        else
          DeviceTraits<D>::copy_within(dlosses.data() + a, ce.loss.value().data(), sizeof(T));
        ad::backward(ce.loss, Tensor<T, 0, D>::full(Shape<0>{}, inv));  // loss / accum
      }
      if (!packed) continue;
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        const float* gsrc = slots_[i].grad();
        if (gsrc == nullptr) continue;
        float* dst = send_.data() + slots_[i].offset;
        if (has[i])
          add_floats(dst, gsrc, slots_[i].numel);
        else
          copy_floats(dst, gsrc, slots_[i].numel);
        has[i] = 1;
      }
      m_->zero_grad();
    }
    loader_->skip(static_cast<index_t>(N - 1 - rank) * local_rows);
    if constexpr (!D::host_accessible) {
      const Tensor<T, 1, cpu::Device> h = lrt::to<cpu::Device>(dlosses);
      for (index_t a = 0; a < local_accum; ++a) local_losses[static_cast<std::size_t>(a)] = h(a);
    }
    StepStats s;
    s.step = step_;
    s.tokens = tokens_per_step();
    s.lr_multiplier = o_.lr_multiplier(step_);
    // The losses (in the global micro-batch order) and which parameters have a gradient.
    std::vector<float> all_losses = local_losses;
    std::vector<char> any = has;
    if (N > 1) {
      std::string mine(reinterpret_cast<const char*>(local_losses.data()), sizeof(float) * local_losses.size());
      mine.append(has.begin(), has.end());
      mine.push_back(static_cast<char>(std::clamp(stop_requested(), 0, 127)));  // a stop asked on this rank
      const auto t_c = std::chrono::steady_clock::now();
      const std::vector<std::string> all = grp().exchange(mine, "the exchange of losses");
      s.comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_c).count();
      all_losses.clear();
      for (const std::string& x : all) {
        check(x.size() == mine.size(), "train", "a rank sent ", x.size(), " bytes of losses, this one ", mine.size());
        for (std::size_t k = 0; k < local_losses.size(); ++k) {
          float v;
          std::memcpy(&v, x.data() + k * sizeof(float), sizeof(float));
          all_losses.push_back(v);
        }
        for (std::size_t i = 0; i < slots_.size(); ++i)
          if (x[local_losses.size() * sizeof(float) + i] != 0) any[i] = 1;    // some rank has one
        s.stop_signal = std::max(s.stop_signal, static_cast<int>(x.back()));  // the same on every rank
      }
    }
    double loss = 0;
    for (const float l : all_losses) {
      check_loss(l);
      loss += static_cast<double>(l) / static_cast<double>(accum);
    }
    s.loss = loss;
    if (N > 1) {
      for (std::size_t i = 0; i < slots_.size(); ++i)  // a parameter this rank has no gradient for
        if (any[i] && !has[i])
          DeviceTraits<D>::zero(send_.data() + slots_[i].offset,
                                sizeof(float) * static_cast<std::size_t>(slots_[i].numel));
    }
    if (packed) {
      const index_t mine_n = counts_[static_cast<std::size_t>(rank)];
      if (N > 1 && recv_.numel() < std::max<index_t>(mine_n, 1))
        recv_ = Tensor<float, 1, D>(Shape<1>{std::max<index_t>(mine_n, 1)});
      const auto t_c = std::chrono::steady_clock::now();
      const std::string what = "the reduce-scatter of the gradients of step " + std::to_string(step_);
      if (N > 1) grp().reduce_scatter(send_.data(), counts_, recv_.data(), what.c_str());
      s.comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_c).count();
      const float* src = N > 1 ? recv_.data() : send_.data();
      const index_t base = N > 1 ? base_ : 0;
      for (std::size_t i = 0; i < slots_.size(); ++i)
        if (owned_[i] && any[i]) copy_floats(slots_[i].grad_write(), src + (slots_[i].offset - base), slots_[i].numel);
    }
    const auto t_opt = std::chrono::steady_clock::now();
    optimizer_update(s.lr_multiplier);
    s.optimizer_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_opt).count();
    if (N > 1) {
      const auto t_c = std::chrono::steady_clock::now();
      if (gather_.numel() != total_) gather_ = Tensor<float, 1, D>(Shape<1>{std::max<index_t>(total_, 1)});
      for (std::size_t i = 0; i < slots_.size(); ++i)
        if (owned_[i]) copy_floats(recv_.data() + (slots_[i].offset - base_), slots_[i].value(), slots_[i].numel);
      const std::string what = "the all-gather of the parameters of step " + std::to_string(step_);
      grp().all_gather(recv_.data(), counts_, gather_.data(), what.c_str());
      for (std::size_t i = 0; i < slots_.size(); ++i)
        if (!owned_[i]) copy_floats(slots_[i].value(), gather_.data() + slots_[i].offset, slots_[i].numel);
      s.comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_c).count();
    }
    m_->zero_grad();
    ++step_;
    if (N == 1) s.stop_signal = stop_requested();
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }

  void optimizer_update(float lr_multiplier) {
    opt_->adamw.step(lr_multiplier);
    opt_->muon.step(lr_multiplier, optim::muon_momentum(step_),
                    optim::muon_weight_decay(step_, o_.steps, o_.muon_weight_decay));
  }

  /// The optimizers' buffers and counters; with a group, those of every rank (collective).
  void gather_optimizer_state(std::vector<optim::NamedBuffer>& bufs,
                              std::map<std::string, std::int64_t>& counters) const {
    opt_->adamw.save(bufs, counters);
    opt_->muon.save(bufs, counters);
    if (group_ == nullptr || group_->size() == 1) return;
    std::string mine;
    auto put = [&](const void* p, std::size_t n) { mine.append(static_cast<const char*>(p), n); };
    auto put64 = [&](std::int64_t v) { put(&v, sizeof v); };
    put64(static_cast<std::int64_t>(bufs.size()));
    for (const auto& b : bufs) {
      put64(static_cast<std::int64_t>(b.name.size())), put(b.name.data(), b.name.size());
      put64(static_cast<std::int64_t>(b.shape.size()));
      for (const auto d : b.shape) put64(d);
      put64(static_cast<std::int64_t>(b.data.size())), put(b.data.data(), sizeof(float) * b.data.size());
    }
    put64(static_cast<std::int64_t>(counters.size()));
    for (const auto& [k, v] : counters) put64(static_cast<std::int64_t>(k.size())), put(k.data(), k.size()), put64(v);
    const std::vector<std::string> all = group_->exchange(
        mine, ("the gathering of optimizer state for the checkpoint of step " + std::to_string(step_)).c_str());
    bufs.clear();
    std::map<std::string, std::int64_t> merged;
    for (const std::string& x : all) {
      std::size_t at = 0;
      auto get = [&](void* p, std::size_t n) {
        check(at + n <= x.size(), "save", "optimizer state from another rank is truncated");
        std::memcpy(p, x.data() + at, n);
        at += n;
      };
      auto get64 = [&] {
        std::int64_t v;
        get(&v, sizeof v);
        return v;
      };
      const std::int64_t nb = get64();
      for (std::int64_t k = 0; k < nb; ++k) {
        optim::NamedBuffer b;
        b.name.resize(static_cast<std::size_t>(get64()));
        get(b.name.data(), b.name.size());
        b.shape.resize(static_cast<std::size_t>(get64()));
        for (auto& d : b.shape) d = get64();
        b.data.resize(static_cast<std::size_t>(get64()));
        get(b.data.data(), sizeof(float) * b.data.size());
        bufs.push_back(std::move(b));
      }
      const std::int64_t nc = get64();
      for (std::int64_t k = 0; k < nc; ++k) {
        std::string key(static_cast<std::size_t>(get64()), '\0');
        get(key.data(), key.size());
        merged[key] = get64();
      }
    }
    counters = std::move(merged);
    // One process's order (the same file at any N): group, roster index, then m before v.
    auto key = [&](const optim::NamedBuffer& b) {
      for (std::size_t i = 0; i < slots_.size(); ++i)
        for (const char* pre : {"adamw.", "muon."}) {
          const std::string head = pre + slots_[i].name + ".";
          if (b.name.size() > head.size() && b.name.compare(0, head.size(), head) == 0) {
            const std::string tail = b.name.substr(head.size());
            return std::tuple<int, std::size_t, int>(slots_[i].order, i, tail == "m" || tail == "momentum" ? 0 : 1);
          }
        }
      return std::tuple<int, std::size_t, int>(9, 0, 0);
    };
    std::stable_sort(bufs.begin(), bufs.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  }

  /// Every rank must run the same model, options, schedule, data and code.
  void check_fingerprints(dist::Group& g, const std::vector<std::pair<std::string, std::string>>& extra) const {
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
    std::string mine;
    for (const auto& [k, v] : f) mine += k + '\x1f' + v + '\x1e';
    const std::vector<std::string> all = g.exchange(mine, "the start-up check of the ranks");
    for (std::size_t r = 1; r < all.size(); ++r) {
      if (all[r] == all[0]) continue;
      auto split = [](const std::string& x) {
        std::vector<std::pair<std::string, std::string>> out;
        std::size_t at = 0;
        while (at < x.size()) {
          const std::size_t us = x.find('\x1f', at), rs = x.find('\x1e', at);
          if (us == std::string::npos || rs == std::string::npos) break;
          out.emplace_back(x.substr(at, us - at), x.substr(us + 1, rs - us - 1));
          at = rs + 1;
        }
        return out;
      };
      const auto a = split(all[0]), b = split(all[r]);
      std::string diff = "they differ";
      for (std::size_t k = 0; k < std::min(a.size(), b.size()); ++k)
        if (a[k] != b[k]) {
          diff = a[k].first + ": rank 0 has '" + a[k].second + "', rank " + std::to_string(r) + " has '" + b[k].second +
                 "'";
          break;
        }
      ::lrt::throw_error("train", "rank " + std::to_string(r) + " of " + std::to_string(all.size()) +
                                      " does not run what rank 0 runs (" + diff +
                                      "): every rank needs the same program, options and data");
    }
  }

  model_type* m_;
  const data::TokenRows* rows_ = nullptr;
  bool micro_default_ = false;
  dist::Group* group_ = nullptr;
  const volatile std::sig_atomic_t* stop_source_ = nullptr;
  dist::Solo solo_;
  std::vector<Slot> slots_;
  std::vector<char> owned_;
  std::vector<index_t> counts_;
  index_t base_ = 0, total_ = 0;
  Tensor<float, 1, D> send_, recv_, gather_;
  TrainOptions o_;
  ScheduleOptions sched_opts_;
  double forwards_ = 0;
  index_t T_;
  data::TextTokenizer tok_;
  std::int64_t step_ = 0;
  std::unique_ptr<data::Loader> loader_;
  std::unique_ptr<Optimizers> opt_;  // the roster's groups (optimizer_groups.hpp)
  int keep_ = default_keep_checkpoints;
};

template <class V, class T, Device D>
Trainer(Model<V, T, D>&, const data::TokenRows&, TrainOptions) -> Trainer<V, default_schedule<V>, T, D>;
template <class V, class T, Device D>
Trainer(Model<V, T, D>&, const data::TokenRows&, TrainOptions, data::TextTokenizer)
    -> Trainer<V, default_schedule<V>, T, D>;

}  // namespace v0
}  // namespace lrt
