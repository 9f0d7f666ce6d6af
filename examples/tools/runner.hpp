// The bodies of lrt-train, lrt-eval and lrt-generate, and the registry of the (variant, schedule)
// pairs the programs are built with: examples/tools/registry/*.cpp (an OBJECT library linked into
// the three programs) registers each pair's CPU session and the few things the bodies ask of its
// types (Entry). The bodies are ordinary functions of an Entry, compiled once for the three programs
// (programs.cpp, the library lrt_tool_programs, behind programs.hpp); the model work goes through
// the pair's Session. A library user instantiates any other pair in their own code.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

#include <lrt/lrt.hpp>
#include <lrt/data.hpp>
#include <lrt/tokenizer.hpp>
#include <lrt/model/checkpoint.hpp>
#include <lrt/decode.hpp>
#include <lrt/train/eval.hpp>
#include <lrt/train/time_plan.hpp>
#include <lrt/train/trainer.hpp>
#include <lrt/dist/group.hpp>

#include "checkpoint_path.hpp"
#include "run_dir.hpp"

#include "session.hpp"
#include "tool_util.hpp"

namespace tool {

/// The data-parallel group lrt-train runs in (set by its main under mpirun; nullptr: one process),
/// and the program's arguments, which every rank must share. These and registry() are LRT_API: one
/// per process, where the runtime library (which holds the pairs' sessions) keeps its own inline
/// code local (cmake/runtime_library.cmake).
LRT_API inline lrt::dist::Group*& dist_group_slot() {
  static lrt::dist::Group* g = nullptr;
  return g;
}
inline lrt::dist::Group* dist_group() { return dist_group_slot(); }
LRT_API inline std::string& program_arguments_slot() {
  static std::string a;
  return a;
}
inline const std::string& program_arguments() { return program_arguments_slot(); }

/// One build of the tools: a variant (its structure and the registry's name for it, an alias)
/// with one schedule.
/// What the programs' bodies (below, compiled once) need of the pair's types comes through the
/// pointers, which the registry fills (Register); the model work goes through the Session.
struct Entry {
  std::string variant, schedule;  // the registry's name (e.g. lrt-src1) and schedule_spec's spelling
  lrt::VariantStructure structure;
  std::unique_ptr<Session> (*make_cpu)(const lrt::ModelConfig&, std::uint64_t seed);  // make_cpu_session
  void (*check_options)(const lrt::ScheduleOptions&);  // lrt::check_schedule_options<Sched, V>
  lrt::json::Value (*release_config)(const lrt::ModelConfig&, std::string_view schedule,
                                     const lrt::ScheduleOptions&);  // lrt::release_config_json<V>
  lrt::json::Value (*lrt_config)(const lrt::ModelConfig&);          // lrt::lrt_config_json<V>

  bool recurrent() const { return structure.recurrent(); }
  /// The memory enters the keys and values (kv, both): value embeddings on every layer.
  bool kv() const { return structure.injection == lrt::Injection::KV || structure.injection == lrt::Injection::Both; }
};

LRT_API inline std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}

namespace detail {
[[noreturn]] inline void no_build(const std::string& what, const std::string& schedule) {
  std::string list;
  for (const Entry& e : registry()) list += "\n  --variant " + e.variant + " --schedule " + e.schedule;
  throw UsageError(
      fmt::format("no build of variant {} with schedule '{}'; this build has:{}\n(a pair is one "
                  "line in examples/tools/registry/; a build configured with -DLRT_TOOL_PAIRS=<names>, as "
                  "scripts/run.sh does, holds only those: configure with -DLRT_TOOL_PAIRS=all for "
                  "every pair)",
                  what, schedule.empty() ? "(any)" : schedule, list));
}
}  // namespace detail

/// The registered pair of a structure: with `schedule`, or (empty) the structure's natural one
/// (standard without memory, interleaved:2 with), else its first entry. `what` names the variant
/// in the usage error that lists the registry otherwise.
inline const Entry& find_entry(const lrt::VariantStructure& structure, const std::string& schedule,
                               const std::string& what = "") {
  const std::string natural = lrt::natural_schedule_spec(structure.recurrent());
  for (const Entry& e : registry())
    if (e.structure == structure && e.schedule == (schedule.empty() ? natural : schedule)) return e;
  for (const Entry& e : registry())
    if (e.structure == structure && schedule.empty()) return e;
  detail::no_build(what.empty() ? fmt::format("'{}'", lrt::variant_name(structure)) : what, schedule);
}

/// The registered pair of a variant given by name: the registry's names (aliases such as
/// lrt-src1), the library's named variants, or a spelling injection/projection/source
/// (both/shared/block1); found by its structure.
inline const Entry& find_entry(const std::string& variant, const std::string& schedule) {
  std::optional<lrt::VariantStructure> s;
  for (const Entry& e : registry())
    if (e.variant == variant) s = e.structure;
  if (!s) s = lrt::parse_variant(variant);
  if (!s) detail::no_build(fmt::format("'{}'", variant), schedule);
  const std::string spelled = lrt::spell(*s);
  return find_entry(*s, schedule,
                    spelled == variant ? fmt::format("'{}'", variant) : fmt::format("'{}' ({})", variant, spelled));
}

/// The name the tools print for a variant: the registry's name for its structure (e.g. lrt-src1),
/// else the library's.
inline std::string display_name(const lrt::VariantStructure& s) {
  for (const Entry& e : registry())
    if (e.structure == s) return e.variant;
  return lrt::variant_name(s);
}

/// A checkpoint's config and how it was trained: (variant, schedule) and the schedule's options
/// (kv_refresh, MultiRefine's detach and loss weights), from --config when given (the release's
/// model_config: use_interleaved / use_multi_refine and their fields), else from the file's metadata.
struct CheckpointRun {
  lrt::ModelConfig config;
  lrt::CheckpointSchedule schedule;
};
/// Every check of the one loader (lrt::read_checkpoint, model/checkpoint_file.hpp) runs here.
inline CheckpointRun checkpoint_run(const Args& a, const lrt::st::Reader& r) {
  if (a.has("config")) {
    const std::string text = lrt::read_file(a.str("config"), "config");
    const auto j = lrt::json::parse(text, a.str("config"));
    lrt::config_from_json(j, nullptr, "'" + a.str("config") + "'");  // its errors name --config's file
    lrt::CheckpointInfo info = lrt::read_checkpoint(r, &j);
    return {std::move(info.config), std::move(info.run)};
  }
  lrt::CheckpointInfo info = lrt::read_checkpoint(r);
  return {std::move(info.config), std::move(info.run)};
}
/// The config and (variant, schedule) of a checkpoint (checkpoint_run without the options).
inline std::tuple<lrt::ModelConfig, lrt::VariantStructure, std::string> checkpoint_model(const Args& a,
                                                                                         const lrt::st::Reader& r) {
  CheckpointRun c = checkpoint_run(a, r);
  return {std::move(c.config), c.schedule.structure, std::move(c.schedule.schedule)};
}

/// The tokenizer of a checkpoint: what it records (bytes, or a BPE with its whole file), checked
/// against --tokenizer FILE when that is given; release weights (--config, which record none) with
/// a vocabulary other than bytes need --tokenizer. The model's vocabulary must hold the
/// tokenizer's ids and its BOS must be the tokenizer's.
inline lrt::data::TextTokenizer checkpoint_tokenizer(const Args& a, const lrt::st::Reader& r,
                                                     const lrt::ModelConfig& cfg) {
  lrt::data::TextTokenizer tok = lrt::data::TextTokenizer::from_metadata(r);
  const bool recorded = r.meta("tokenizer").has_value();
  if (a.has("tokenizer")) {
    tool::require_path(a.str("tokenizer"), "--tokenizer");
    const auto given = lrt::data::TextTokenizer::load(a.str("tokenizer"));
    if (recorded && !(given == tok))
      throw lrt::Error("tokenizer", fmt::format("--tokenizer '{}' is {}, but '{}' was trained with {}",
                                                a.str("tokenizer"), given.describe(), r.label(), tok.describe()));
    tok = given;
  } else if (!recorded && cfg.vocab_size != lrt::data::ByteTokenizer::vocab_size) {
    throw UsageError(fmt::format(
        "'{}' records no tokenizer and its vocab_size is {}, not the byte vocabulary's 257: give the tokenizer "
        "it was trained with, --tokenizer FILE (lrt-tokenizer convert makes one from a tiktoken rank file)",
        r.label(), cfg.vocab_size));
  }
  lrt::check(tok.vocab_size() <= cfg.vocab_size, "tokenizer", "the tokenizer (", tok.describe(), ") has ",
             tok.vocab_size(), " ids, more than the model's vocab_size ", cfg.vocab_size);
  lrt::check(static_cast<lrt::index_t>(tok.bos()) == cfg.bos(), "tokenizer", "the tokenizer's BOS is ", tok.bos(),
             ", the model's bos_id ", cfg.bos(), " (", tok.describe(), ")");
  return tok;
}

/// "2.01 bytes/token" of rows (their bytes over their non-BOS tokens).
inline std::string bytes_per_token(const lrt::data::TokenRows& rows) {
  const double n = static_cast<double>(rows.tokens().size()) - static_cast<double>(rows.rows());
  return fmt::format("{:.3f} bytes/token", n > 0 ? static_cast<double>(rows.total_bytes()) / n : 0.0);
}

/// "kv_refresh", "loss weights (0.1, 0.3, 0.6)", "detach": the options that differ from the defaults.
inline std::string describe(const lrt::ScheduleOptions& o) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : ", ") + x; };
  if (o.kv_refresh) add("kv_refresh");
  if (!o.loss_weights.empty()) {
    std::string w;
    for (double x : o.loss_weights) w += (w.empty() ? "" : ", ") + fmt::format("{}", x);
    add("loss weights (" + w + ")");
  }
  if (o.detach) add("detach");
  return s;
}
/// --loss-weights "W0,W1,...": finite numbers >= 0.
inline std::vector<double> parse_weights(const std::string& text) {
  std::vector<double> w;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const std::optional<double> x = parse_finite(item);
    if (!x || *x < 0)
      throw UsageError(fmt::format("--loss-weights expects comma-separated numbers >= 0, got '{}'", text));
    w.push_back(*x);
    at = end + 1;
  }
  return w;
}

/// --device and --precision of a tool.
struct DeviceChoice {
  DeviceKind device = DeviceKind::cpu;
  Precision precision = Precision::fp32;
};

/// The CUDA pairs this program holds, "\n  --variant V --schedule S" each.
inline std::string cuda_pairs_text() {
  std::string list;
  for (const DeviceEntry& e : device_registry())
    if (e.device == DeviceKind::cuda) {
      std::string name = lrt::variant_name(e.structure);
      for (const Entry& r : registry())
        if (r.structure == e.structure) name = r.variant;
      list += "\n  --variant " + name + " --schedule " + e.schedule;
    }
  return list;
}

/// --device cpu|cuda and --precision fp32|tf32|bf16, checked: tf32 is a GPU option, bf16 on the
/// CPU needs its bf16 instructions (lrt::cpu::bf16_gemm_supported), and --device cuda needs a
/// build that holds CUDA sessions.
inline DeviceChoice device_choice(const Args& a) {
  DeviceChoice d;
  const std::string dev = a.str("device"), prec = a.str("precision");
  if (dev == "cuda" || dev == "gpu")
    d.device = DeviceKind::cuda;
  else if (dev != "cpu")
    throw UsageError(fmt::format("--device must be cpu or cuda, got '{}'", dev));
  if (prec == "tf32")
    d.precision = Precision::tf32;
  else if (prec == "bf16")
    d.precision = Precision::bf16;
  else if (prec != "fp32")
    throw UsageError(fmt::format("--precision must be fp32, tf32 or bf16, got '{}'", prec));
  if (d.device == DeviceKind::cpu && d.precision == Precision::tf32)
    throw UsageError(
        "--precision tf32 is a GPU option (a cuBLAS compute mode): on the CPU, fp32 or bf16; drop --precision or add "
        "--device cuda");
  if (d.device == DeviceKind::cpu && d.precision == Precision::bf16 && !lrt::cpu::bf16_gemm_supported())
    throw UsageError(
        fmt::format("--precision bf16 on the CPU needs AVX512-BF16 (vdpbf16ps) or AMX: {}; drop "
                    "--precision, or add --device cuda",
                    lrt::cpu::bf16_missing()));
  if (d.device == DeviceKind::cuda && cuda_pairs_text().empty())
    throw UsageError(
        "--device cuda: this build has no CUDA (CMake found no nvcc, or it was configured with "
        "-DLRT_TOOLS_CUDA=OFF): configure a build with the CUDA toolkit on PATH (docs/gpu.md)");
  if (d.device == DeviceKind::cuda)  // before any work: a machine without a GPU fails here
    for (const DeviceEntry& e : device_registry())
      if (e.device == DeviceKind::cuda) {
        if (const std::string why = e.unavailable(); !why.empty()) throw lrt::Error("--device cuda", why);
        break;
      }
  return d;
}

/// "cpu" or "cuda: NAME (N GiB), bf16 matmuls".
inline std::string describe(const DeviceChoice& d, const Session& s) {
  if (d.device == DeviceKind::cpu && d.precision == Precision::bf16)
    return fmt::format(
        "cpu, {} thread{} (--threads, LRT_NUM_THREADS), {} matmuls (fp32 accumulation, weights, "
        "activations and optimizer state)",
        lrt::num_threads(), lrt::num_threads() == 1 ? "" : "s", lrt::cpu::cpu_matmul_name());
  if (d.device == DeviceKind::cpu)
    return fmt::format("cpu, {} thread{} (--threads, LRT_NUM_THREADS), GEMM via {}", lrt::num_threads(),
                       lrt::num_threads() == 1 ? "" : "s", lrt::cpu::gemm_summary());
  return fmt::format("cuda: {}, {} matmuls (fp32 weights, activations and optimizer state)", s.device_name(),
                     to_string(d.precision));
}

/// The session of `pair` on the chosen device.
inline std::unique_ptr<Session> make_session(const Entry& pair, const DeviceChoice& d, const lrt::ModelConfig& cfg,
                                             std::uint64_t seed = 0) {
  if (d.device == DeviceKind::cpu) {
    // bf16 GEMMs from the first product on (device_choice checked that the CPU has them).
    lrt::cpu::set_cpu_matmul(d.precision == Precision::bf16 ? lrt::cpu::CpuMatmul::bf16 : lrt::cpu::CpuMatmul::fp32);
    return pair.make_cpu(cfg, seed);
  }
  for (const DeviceEntry& e : device_registry())
    if (e.device == d.device && e.structure == pair.structure && e.schedule == pair.schedule)
      return e.make(cfg, seed, d.precision);
  throw UsageError(fmt::format(
      "--device cuda: this build has no CUDA session of variant {} with schedule '{}'; its CUDA pairs:{}\n(the "
      "CUDA pairs are -DLRT_TOOLS_CUDA_PAIRS=<names such as baseline;lrt>)",
      display_name(pair.structure), pair.schedule, cuda_pairs_text()));
}

namespace detail {
/// Rows per optimizer step of the CPU presets (spec §8): tiny 32x128, small 16x256, medium 32x256.
inline lrt::index_t preset_batch_rows(const std::string& p) { return p == "small" ? 16 : 32; }
inline lrt::index_t preset_micro_rows(const std::string& p) { return p == "medium" ? 8 : 0; }
}  // namespace detail
using detail::preset_batch_rows;
using detail::preset_micro_rows;

/// lrt-train's model flags (sizes, attention windows, value embeddings, gates and the LRT runtime
/// options) over `cfg` (the preset's, or the checkpoint's on --resume, where a flag must repeat
/// the checkpoint's value: they fix its shapes and its recurrence; each that does not is added to
/// `clashes`, "--n-layer 3 (the checkpoint has 2)").
inline void apply_model_flags(const Args& a, lrt::ModelConfig& cfg, bool resume,
                              std::vector<std::string>* clashes = nullptr) {
  lrt::ModelConfig want = cfg;
  if (a.has("n-layer")) want.n_layer = a.integer("n-layer", 1, 1 << 12);
  if (a.has("n-embd")) want.n_embd = a.integer("n-embd", 2, 1 << 16);
  if (a.has("n-head")) want.n_head = want.n_kv_head = a.integer("n-head", 1, 1 << 12);
  if (a.has("n-kv-head")) want.n_kv_head = a.integer("n-kv-head", 1, 1 << 12);
  if (a.has("window-pattern")) want.window_pattern = a.str("window-pattern");
  if (a.has("ve-layout")) {
    const std::string v = a.str("ve-layout");
    if (v == "every")
      want.ve_layout = lrt::VELayout::Every;
    else if (v == "alternating")
      want.ve_layout = lrt::VELayout::Alternating;
    else if (v == "none")
      want.ve_layout = lrt::VELayout::None;
    else
      throw UsageError(fmt::format("--ve-layout must be every, alternating or none, got '{}'", v));
  }
  if (a.has("gate-channels")) want.ve_gate_channels = a.integer("gate-channels", 0, 1 << 16);
  if (a.has("mem-offset")) want.mem_offset = a.integer("mem-offset", 1, 1 << 20);
  if (a.has("reset-at-bos")) want.reset_at_bos = true;
  try {
    want.validate();
  } catch (const lrt::Error& e) {
    throw UsageError(fmt::format("the model flags give no valid model: {}", e.what()));
  }
  if (resume) {  // every flag given must agree with the checkpoint
    std::vector<std::string> diff;
    auto cmp = [&](const char* flag, auto given, auto saved) {
      if (a.has(flag) && !(given == saved))
        diff.push_back(fmt::format("--{} {} (the checkpoint has {})", flag, given, saved));
    };
    cmp("n-layer", want.n_layer, cfg.n_layer), cmp("n-embd", want.n_embd, cfg.n_embd);
    cmp("n-head", want.n_head, cfg.n_head), cmp("n-kv-head", want.n_kv_head, cfg.n_kv_head);
    cmp("window-pattern", want.window_pattern, cfg.window_pattern);
    cmp("ve-layout", std::string(lrt::to_string(want.ve_layout)), std::string(lrt::to_string(cfg.ve_layout)));
    cmp("gate-channels", want.ve_gate_channels, cfg.ve_gate_channels);
    cmp("mem-offset", want.mem_offset, cfg.mem_offset), cmp("reset-at-bos", want.reset_at_bos, cfg.reset_at_bos);
    if (clashes != nullptr) clashes->insert(clashes->end(), diff.begin(), diff.end());
    return;  // the checkpoint's model
  }
  cfg = want;
}

/// The model config as lrt-train reports it: sizes, windows, value embeddings, gates, memory.
inline std::string describe_config(const lrt::ModelConfig& c) {
  return fmt::format(
      "n_layer {} n_embd {} n_head {} n_kv_head {} sequence_len {} vocab {} window_pattern {} ve_layout {} "
      "gate_channels {} mem_offset {} reset_at_bos {}",
      c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.sequence_len, c.vocab_size, c.window_pattern,
      lrt::to_string(c.ve_layout), c.gate_channels(), c.mem_offset, c.reset_at_bos);
}

/// Per-layer memory statistics as CSV rows "step,layer,gamma,gate_mean,gate_sd".
inline std::string memory_rows(std::int64_t step, const std::vector<lrt::LayerMemoryStats>& st) {
  std::string t;
  for (std::size_t l = 0; l < st.size(); ++l)
    t += fmt::format("{},{},{},{},{}\n", step, l, fmt_opt(st[l].gamma), fmt_opt(st[l].gate_mean),
                     fmt_opt(st[l].gate_sd));
  return t;
}
inline const char* memory_header = "step,layer,gamma,gate_mean,gate_sd";

/// Validation target tokens in `batches`.
inline std::int64_t val_tokens(const std::vector<lrt::data::Batch>& batches) {
  std::int64_t n = 0;
  for (const auto& b : batches) n += b.targets.numel();
  return n;
}

/// The run directory a checkpoint belongs to: DIR for DIR/checkpoints/step-N, else the folder.
inline std::string run_folder_of(const lrt::CheckpointLocation& at) {
  const std::filesystem::path d = std::filesystem::path(at.dir).lexically_normal();
  const std::filesystem::path p = d.filename().empty() ? d.parent_path() : d;
  return p.parent_path().filename() == "checkpoints" ? p.parent_path().parent_path().string() : p.string();
}
/// Whether two paths name the same existing folder.
inline bool same_folder(const std::string& x, const std::string& y) {
  std::error_code ec;
  return !x.empty() && std::filesystem::equivalent(x, y, ec) && !ec;
}

/// --time SECONDS: times a few warm-up steps (forward and backward, no update) and one evaluation of
/// a validation batch, then splits what is left of the budget between training and evaluations
/// (lrt::plan_time_budget) and prints the split, with a warning when few steps fit.
template <class Now>
lrt::TimePlan plan_time(const Args& a, Session& tr, Session& model, const lrt::data::TokenRows& val_rows,
                        int rows_per_batch, const lrt::TokenBytes& token_bytes, const lrt::ScheduleOptions& so,
                        double budget, const Now& now, bool recurrent, long long seq_every) {
  using clock = std::chrono::steady_clock;
  const auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  // Steps until three are timed, then up to 10 while they take under 5% of the budget; the first
  // (which allocates) is left out of the mean (two samples at least: one alone is at the mercy of
  // a busy moment).
  std::vector<double> t;
  double total = 0;
  while (t.size() < 3 || (t.size() < 10 && total < 0.05 * budget)) {
    check_stop();
    t.push_back(tr.time_step_without_update());
    total += t.back();
  }
  const double step = (total - t[0]) / static_cast<double>(t.size() - 1) * 1.07;  // +7%: the optimizer update
  // One batch of validation rows, scored as the evaluations score them.
  const int T = static_cast<int>(val_rows.seq_len());
  const auto one =
      lrt::data::validation_batches(val_rows, rows_per_batch, static_cast<lrt::index_t>(rows_per_batch) * T);
  const double one_tokens = static_cast<double>(val_tokens(one));
  check_stop();
  auto t0 = clock::now();  // what the loop does at an evaluation
  (void)model.evaluate_parallel(one, token_bytes, so);
  if (recurrent) (void)model.memory_statistics(one[0].inputs);
  const double eval_per_token = since(t0) / one_tokens;
  double final_per_token = 0;  // the LRT's sequential score (the exact recurrence) at the end
  if (recurrent) {
    check_stop();
    t0 = clock::now();
    (void)model.evaluate_sequential(one, token_bytes);
    final_per_token = since(t0) / one_tokens;
  }
  check_stop();
  lrt::TimePlanCosts c;
  c.budget = budget;
  c.elapsed = now();
  c.step = step;
  c.eval_per_token = eval_per_token;
  c.final_per_token = final_per_token;
  c.reserve = std::min(5.0, 0.02 * budget);  // the last checkpoint and the summary
  c.eval_tokens = a.integer("eval-tokens", 1, 1LL << 40);
  c.eval_tokens_fixed = a.has("eval-tokens") || a.integer("eval-bytes", 0, 1LL << 40) > 0;
  c.eval_every = a.integer("eval-every", 0, 1LL << 40);
  c.min_eval_tokens = static_cast<std::int64_t>(one_tokens);
  if (recurrent && seq_every > 0)  // sequential scores along the way, as a cost per step
    c.step += final_per_token * static_cast<double>(c.eval_tokens) / static_cast<double>(seq_every);
  const lrt::TimePlan p = lrt::plan_time_budget(c);
  fmt::print(
      "time budget {}: {:.1f} s setup and timing ({:.3f} s/step over {} warm-up steps, evaluation {:.3g} ms per "
      "1k tokens{}); {:.0f} s training, {} steps; {:.1f} s evaluating, {} x {} tokens{} -> {} steps\n",
      tool::duration(budget), c.elapsed, step, t.size(), eval_per_token * 1e6,
      recurrent ? fmt::format(", sequential {:.3g} ms", final_per_token * 1e6) : std::string(), p.train_seconds,
      p.steps, p.eval_seconds + p.final_seconds, p.evaluations, p.eval_tokens,
      recurrent ? " and the sequential score at the end" : "", p.steps);
  if (!p.warning.empty()) fmt::print("warning: --time: {}\n", p.warning);
  return p;
}

/// lrt-train, part 1: the run's settings, from the command line and, with --resume, from the
/// checkpoint (what a flag does not give again). Usage errors before any work.
struct TrainSettings {
  std::string preset, out, data_path;
  bool resume = false;
  lrt::CheckpointLocation from;
  std::optional<lrt::CheckpointInfo> resumed;  // the checkpoint resumed from, checked by the one loader
  lrt::ModelConfig cfg;
  lrt::TrainOptions o;
  lrt::ScheduleOptions sched_opts;
  long long vocab_arg = 0, eval_tokens = 0, eval_every_arg = 0, seq_every = 0, steps_arg = 0;
  bool tune_split = false;  // --tune-split (or the resumed run's): the tuning slice is held out
  int modes = 0;            // how many of --steps, --time and --budget-forwards were given
  double time_arg = 0, tpp = 0, budget_forwards = 0;
  DeviceChoice device;
  // --core DIR: CORE scored into log.csv (rank 0) every core_every steps (0: at each evaluation)
  std::shared_ptr<const lrt::eval::CoreBundle> core;
  std::string core_dir, core_mode;  // core_mode: parallel, sequential or both
  long long core_every = 0;
  lrt::eval::CoreOptions core_options;
};

inline TrainSettings train_settings(const Entry& pair, const Args& a) {
  TrainSettings st;
  st.preset = a.str("preset"), st.out = a.str("out"), st.data_path = a.str("data");
  st.resume = a.has("resume");
  st.tune_split = a.has("tune-split");
  const std::string& preset = st.preset;
  const bool resume = st.resume;
  lrt::CheckpointLocation& from = st.from;
  std::optional<lrt::CheckpointInfo>& resumed = st.resumed;
  lrt::ModelConfig& cfg = st.cfg;
  lrt::TrainOptions& o = st.o;
  lrt::ScheduleOptions& sched_opts = st.sched_opts;
  long long &vocab_arg = st.vocab_arg, &eval_tokens = st.eval_tokens, &eval_every_arg = st.eval_every_arg;
  long long &seq_every = st.seq_every, &steps_arg = st.steps_arg;
  int& modes = st.modes;
  double &time_arg = st.time_arg, &tpp = st.tpp, &budget_forwards = st.budget_forwards;
  DeviceChoice& device = st.device;
  if (st.out.empty()) throw UsageError("--out needs a folder, got ''");
  tool::require_path(st.data_path, "--data");
  // The checkpoint to continue from: what DIR/latest names (trainer.hpp), a step directory, or a
  // run directory of the one-level layout.
  if (resume) from = resume_checkpoint(a.str("resume"));
  if (resume) {
    resumed = lrt::read_checkpoint(lrt::st::Reader::open(from.model_path()));
    if (resumed->run.structure != pair.structure)
      throw UsageError(fmt::format(
          "--resume '{}' holds variant {}, trained with {}, not --variant {}: drop --variant to continue it, or give "
          "--variant {}",
          a.str("resume"), lrt::variant_label(resumed->run.structure), resumed->run.schedule,
          lrt::variant_label(pair.structure), resumed->run.variant));
    cfg = resumed->config;
    // A run that held out the tuning slice keeps holding it out; one that trained on it cannot.
    const bool held = lrt::st::Reader::open(from.model_path()).meta("held_out") == std::optional<std::string>("tune");
    if (a.has("tune-split") && !held)
      throw UsageError(
          fmt::format("--tune-split on --resume '{}': that run trains on the tuning slice already", a.str("resume")));
    st.tune_split = held;
    // The GEMM path the run was trained on (on the CPU), so that it continues bit for bit.
    if (const auto gemm = lrt::st::Reader::open(from.model_path()).meta("cpu_gemm"))
      lrt::cpu::prefer_gemm_path(*gemm, "the GEMM path of the run resumed; LRT_GEMM overrides it");
  } else {
    try {
      cfg = lrt::preset(preset);
    } catch (const lrt::Error& e) {
      throw tool::UsageError(e.what());
    }
  }
  // On --resume, every flag that contradicts the checkpoint (its model, batch, seed, schedule and
  // its options, data): one refusal naming them all, below.
  std::vector<std::string> clashes;
  if (resume) {
    if (a.has("sequence-len") && a.integer("sequence-len", 1, 1 << 20) != cfg.sequence_len)
      clashes.push_back(
          fmt::format("--sequence-len {} (the checkpoint has {})", a.str("sequence-len"), cfg.sequence_len));
    if (a.has("preset")) {  // the model the command would make afresh, against the checkpoint's
      lrt::ModelConfig fresh;
      try {
        fresh = lrt::preset(preset);
        if (a.has("sequence-len")) fresh.sequence_len = a.integer("sequence-len", 1, 1 << 20);
        apply_model_flags(a, fresh, false);
      } catch (const std::exception&) {
        fresh = lrt::ModelConfig{};
      }
      if (fresh.n_layer != cfg.n_layer || fresh.n_embd != cfg.n_embd || fresh.n_head != cfg.n_head ||
          fresh.n_kv_head != cfg.n_kv_head || fresh.sequence_len != cfg.sequence_len)
        clashes.push_back(
            fmt::format("--preset {} (the checkpoint's model is {} layers of width {}, {} heads, "
                        "sequence length {})",
                        preset, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.sequence_len));
    }
    if (a.has("schedule") && a.str("schedule") != resumed->run.schedule)
      clashes.push_back(
          fmt::format("--schedule {} (the checkpoint was trained with {})", a.str("schedule"), resumed->run.schedule));
  } else if (a.has("sequence-len")) {
    cfg.sequence_len = a.integer("sequence-len", 1, 1 << 20);
  }
  apply_model_flags(a, cfg, resume, &clashes);
  if (pair.kv()) {
    if (a.has("ve-layout") && cfg.ve_layout != lrt::VELayout::Every)
      throw UsageError(
          fmt::format("--ve-layout {}: variant {} carries value embeddings on every layer (its gates "
                      "also project the memory into the values); --ve-layout is for the baseline and "
                      "residual variants",
                      a.str("ve-layout"), display_name(pair.structure)));
  }
  if (!pair.recurrent()) {
    for (const char* f : {"mem-offset", "reset-at-bos", "seq-eval-every"})
      if (a.has(f))
        throw UsageError(
            fmt::format("--{} is an LRT option: variant {} has no memory", f, display_name(pair.structure)));
  }
  if (a.has("tokenizer") && a.has("vocab-size"))
    throw tool::UsageError("give --tokenizer FILE or --vocab-size N, not both");
  if (a.has("pattern") && !a.has("vocab-size"))
    throw tool::UsageError("--pattern goes with --vocab-size (the pattern of the tokenizer lrt-train trains)");
  vocab_arg = a.has("vocab-size") ? a.integer("vocab-size", 257, 1LL << 24) : 0;
  if (a.has("tokenizer")) tool::require_path(a.str("tokenizer"), "--tokenizer");
  modes = int(a.has("steps")) + int(a.has("time")) + int(a.has("budget-forwards"));
  if (modes > 1) throw tool::UsageError("give at most one of --steps, --time and --budget-forwards");

  o.seed = static_cast<std::uint64_t>(a.integer("seed", 0, (1LL << 62)));
  o.batch_rows = a.has("batch-rows") ? a.integer("batch-rows", 1, 1 << 20) : preset_batch_rows(preset);
  o.micro_rows = a.has("micro-rows") ? a.integer("micro-rows", 1, 1 << 20) : preset_micro_rows(preset);
  // A preset's micro-batch is a memory bound, not a setting: with --batch-rows it does not divide,
  // the largest micro-batch below it that does.
  if (!a.has("micro-rows") && o.micro_rows > 0)
    for (o.micro_rows = std::min(o.micro_rows, o.batch_rows); o.batch_rows % o.micro_rows != 0;) --o.micro_rows;
  if (!resume && a.has("micro-rows") && o.batch_rows % o.micro_rows != 0)
    throw UsageError(fmt::format("--micro-rows {} must divide --batch-rows {}", o.micro_rows, o.batch_rows));
  o.matrix_lr = static_cast<float>(a.number("matrix-lr", 0, 10));
  o.embedding_lr = static_cast<float>(a.number("embedding-lr", 0, 100));
  o.unembedding_lr = static_cast<float>(a.number("unembedding-lr", 0, 10));
  o.scalar_lr = static_cast<float>(a.number("scalar-lr", 0, 10));
  if (a.has("gamma-lr")) o.gamma_lr = static_cast<float>(a.number("gamma-lr", 0, 10));
  o.muon_weight_decay = static_cast<float>(a.number("weight-decay", 0, 100));
  const std::string lr_rule = a.str("batch-lr-rule");
  if (lr_rule != "lrt" && lr_rule != "release")
    throw UsageError(fmt::format("--batch-lr-rule must be lrt or release, got '{}'", lr_rule));
  o.release_batch_scaling = lr_rule == "release";
  o.warmup_frac = a.number("warmup-frac", 0, 1);
  o.warmdown_frac = a.number("warmdown-frac", 0, 1);
  o.final_lr_frac = a.number("final-lr-frac", 0, 1);
  if (resume) {  // unless given again, the settings the checkpoint was trained with
    const auto orr = lrt::st::Reader::open(from.optim_path());
    if (const auto j = orr.meta("train_options")) {
      const auto t = lrt::json::parse(*j, orr.label() + " train_options");
      // The batch, its micro-batches and the seed fix the data each step sees: the checkpoint's.
      const lrt::index_t rows = t.at("batch_rows").as_int(), micro = t.at("micro_rows").as_int();
      const auto seed = static_cast<std::uint64_t>(t.at("seed").as_int());
      if (a.has("batch-rows") && o.batch_rows != rows)
        clashes.push_back(fmt::format("--batch-rows {} (the checkpoint has {})", o.batch_rows, rows));
      if (a.has("micro-rows") && o.micro_rows != (micro > 0 ? micro : rows))
        clashes.push_back(
            fmt::format("--micro-rows {} (the checkpoint has {})", o.micro_rows, micro > 0 ? micro : rows));
      if (a.has("seed") && o.seed != seed)
        clashes.push_back(fmt::format("--seed {} (the checkpoint has {})", o.seed, seed));
      o.batch_rows = rows, o.micro_rows = micro, o.seed = seed;
      if (!a.has("matrix-lr")) o.matrix_lr = static_cast<float>(t.at("matrix_lr").as_number());
      if (!a.has("embedding-lr")) o.embedding_lr = static_cast<float>(t.at("embedding_lr").as_number());
      if (!a.has("unembedding-lr")) o.unembedding_lr = static_cast<float>(t.at("unembedding_lr").as_number());
      if (!a.has("scalar-lr")) o.scalar_lr = static_cast<float>(t.at("scalar_lr").as_number());
      // Absent from checkpoints written before these flags: the defaults they were trained with.
      const auto num = [&](const char* k, double def) { return t.find(k) ? t.at(k).as_number() : def; };
      if (!a.has("weight-decay")) o.muon_weight_decay = static_cast<float>(num("muon_weight_decay", 0.1));
      if (!a.has("batch-lr-rule") && t.find("release_batch_scaling"))
        o.release_batch_scaling = t.at("release_batch_scaling").as_bool();
      if (!a.has("gamma-lr")) o.gamma_lr = static_cast<float>(num("gamma_lr", -1));
      if (!a.has("warmup-frac")) o.warmup_frac = num("warmup_frac", 0);
      if (!a.has("warmdown-frac")) o.warmdown_frac = num("warmdown_frac", 0.5);
      if (!a.has("final-lr-frac")) o.final_lr_frac = num("final_lr_frac", 0);
    }
  }
  if (a.has("lr-scale")) {  // a sweep's factor on the rates (each recorded as the product)
    if (resume)
      throw UsageError(
          "--lr-scale on --resume: the checkpoint's rates already include the scale it was trained with; give "
          "--matrix-lr etc. to change them");
    const double f = a.number("lr-scale", 1e-6, 1e6);
    o.matrix_lr = static_cast<float>(o.matrix_lr * f), o.embedding_lr = static_cast<float>(o.embedding_lr * f);
    o.unembedding_lr = static_cast<float>(o.unembedding_lr * f), o.scalar_lr = static_cast<float>(o.scalar_lr * f);
    if (o.gamma_lr >= 0) o.gamma_lr = static_cast<float>(o.gamma_lr * f);
  }
  if (o.warmup_frac + o.warmdown_frac > 1)
    throw UsageError(fmt::format("--warmup-frac {} plus --warmdown-frac {} exceed the run (their sum must be <= 1)",
                                 o.warmup_frac, o.warmdown_frac));
  // Schedule options (spec §4): the checkpoint's when resuming with its schedule, then the flags.
  if (resume && resumed->run.schedule == pair.schedule) sched_opts = resumed->run.options;
  if (resume) {
    const lrt::ScheduleOptions& was = resumed->run.options;
    if (a.has("kv-refresh") && !was.kv_refresh) clashes.push_back("--kv-refresh (the checkpoint was trained without)");
    if (a.has("detach") && !was.detach) clashes.push_back("--detach (the checkpoint was trained without)");
    if (a.has("loss-weights") && parse_weights(a.str("loss-weights")) != was.loss_weights)
      clashes.push_back(fmt::format(
          "--loss-weights {} (the checkpoint has {})", a.str("loss-weights"),
          was.loss_weights.empty() ? std::string("none") : fmt::format("{}", fmt::join(was.loss_weights, ","))));
  }
  if (!clashes.empty()) {
    std::string list;
    for (std::size_t i = 0; i < clashes.size(); ++i) list += (i == 0 ? "" : "; ") + clashes[i];
    throw UsageError(
        fmt::format("on --resume the run is the checkpoint's: drop {} (to change {}, start a new run "
                    "in another --out): {}",
                    clashes.size() == 1 ? "this flag" : "these flags", clashes.size() == 1 ? "it" : "them", list));
  }
  if (a.has("kv-refresh")) sched_opts.kv_refresh = true;
  if (a.has("loss-weights")) sched_opts.loss_weights = parse_weights(a.str("loss-weights"));
  if (a.has("detach")) sched_opts.detach = true;
  try {
    pair.check_options(sched_opts);
  } catch (const lrt::Error& e) {
    throw UsageError(fmt::format("{} with {}: {}", display_name(pair.structure), pair.schedule, e.what()));
  }
  if (a.has("core")) {
    st.core_dir = a.str("core");
    tool::require_path(st.core_dir, "--core");
    st.core_mode = a.has("core-mode") ? a.str("core-mode") : "parallel";
    if (st.core_mode != "parallel" && st.core_mode != "sequential" && st.core_mode != "both")
      throw UsageError(fmt::format("--core-mode must be parallel, sequential or both, got '{}'", st.core_mode));
    if (!pair.recurrent())
      if (st.core_mode != "parallel")
        throw UsageError(fmt::format("--core-mode {}: variant {} has no memory, so its one CORE mode is parallel",
                                     st.core_mode, display_name(pair.structure)));
    st.core_every = a.integer("core-every", 0, 1LL << 40);
    st.core_options.max_per_task = a.integer("core-max-per-task", -1, 1LL << 40);
    if (st.core_options.max_per_task == 0) throw UsageError("--core-max-per-task must be >= 1 (or -1: every item)");
    st.core = std::make_shared<const lrt::eval::CoreBundle>(lrt::eval::CoreBundle::open(st.core_dir));
    for (const auto& t : st.core->tasks())  // a bad data file or too few items fail before training
      (void)st.core->task_data(t, st.core_options.max_per_task);
  } else {
    for (const char* f : {"core-every", "core-max-per-task", "core-mode"})
      if (a.has(f)) throw UsageError(fmt::format("--{} goes with --core DIR", f));
  }
  eval_tokens = a.integer("eval-tokens", 1, 1LL << 40);
  if (a.integer("eval-bytes", 0, 1LL << 40) == 0 && eval_tokens < cfg.sequence_len)
    throw UsageError(
        fmt::format("--eval-tokens {} is less than one row of the model (sequence length {}): give at least {}",
                    eval_tokens, cfg.sequence_len, cfg.sequence_len));
  eval_every_arg = a.integer("eval-every", 0, 1LL << 40);
  seq_every = a.integer("seq-eval-every", 0, 1LL << 40);
  steps_arg = a.has("steps") ? a.integer("steps", 1, 1LL << 40) : 0;
  time_arg = a.has("time") ? a.number("time", 1, 1e9) : 0;
  tpp = a.number("tokens-per-param", 1e-6, 1e9);
  budget_forwards = a.has("budget-forwards") ? a.number("budget-forwards", 1, 1e18) : 0;

  device = device_choice(a);
  // A run trained with bf16 products on the CPU continues with them (bit for bit, on the same
  // path), unless --precision says otherwise.
  if (st.resume && device.device == DeviceKind::cpu && !a.has("precision"))
    if (const auto m = lrt::st::Reader::open(st.from.model_path()).meta("cpu_matmul"); m && m->starts_with("bf16")) {
      if (!lrt::cpu::bf16_gemm_supported())
        throw UsageError(
            fmt::format("--resume '{}' was trained with {} matrix products, which need AVX512-BF16 "
                        "(vdpbf16ps) or AMX: {}; give --precision fp32 to continue it in fp32",
                        a.str("resume"), *m, lrt::cpu::bf16_missing()));
      device.precision = Precision::bf16;
      fmt::print("--precision bf16: the matrix products the run resumed was trained with ({})\n", *m);
    }
  return st;
}

/// lrt-train, part 2: the data, the tokenizer (the checkpoint's when resuming, --tokenizer's, or
/// trained here on the training split with --vocab-size: that sets the model's vocabulary) and the
/// validation batches.
struct TrainData {
  lrt::data::TextTokenizer tok;
  lrt::data::TokenRows train_rows, val_rows;
  long long eval_bytes = 0;  // --eval-bytes (0: --eval-tokens sizes the evaluations)
  int val_rows_per_batch = 0;
  std::vector<lrt::data::Batch> val;
  lrt::TokenBytes token_bytes;
};

/// "2047 rows of 129 tokens, FNV-1a 0x1234abcd5678ef00": what a run trains on, for --resume's check.
inline std::string data_fingerprint(const lrt::data::TokenRows& rows) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto t : rows.tokens()) h = (h ^ static_cast<std::uint64_t>(t)) * 1099511628211ull;
  return fmt::format("{} rows of {} tokens, FNV-1a {:#018x}", rows.rows(), rows.seq_len() + 1, h);
}

template <class Now>
TrainData train_data(const Args& a, TrainSettings& st, const Now& now) {
  TrainData d;
  const std::string &out = st.out, &data_path = st.data_path, &preset = st.preset;
  const bool resume = st.resume;
  const std::optional<lrt::CheckpointInfo>& resumed = st.resumed;
  lrt::ModelConfig& cfg = st.cfg;
  const lrt::TrainOptions& o = st.o;
  const long long vocab_arg = st.vocab_arg, eval_tokens = st.eval_tokens;
  lrt::data::TextTokenizer& tok = d.tok;
  lrt::data::TokenRows &train_rows = d.train_rows, &val_rows = d.val_rows;
  long long& eval_bytes = d.eval_bytes;
  int& val_rows_per_batch = d.val_rows_per_batch;
  std::vector<lrt::data::Batch>& val = d.val;
  auto corpus = lrt::data::load_corpus(data_path);
  if (st.tune_split) {
    lrt::data::hold_out_tuning(corpus);
    fmt::print("tuning slice: {} docs, {} bytes of the training split held out (lrt-eval --split tune)\n",
               corpus.tune.size(), lrt::data::text_bytes(corpus.tune));
  }
  check_stop();
  // The tokenizer: the checkpoint's when resuming (--tokenizer, if given, must be the same), a
  // tokenizer file, one trained here on the training split (--vocab-size), or bytes.
  if (resume && resumed->bpe) tok = lrt::data::TextTokenizer(resumed->bpe);
  if (a.has("tokenizer")) {
    const auto given = lrt::data::TextTokenizer::load(a.str("tokenizer"));
    if (resume && !(given == tok))
      throw lrt::Error("resume", fmt::format("--tokenizer '{}' is {}, but the checkpoint was trained with {}",
                                             a.str("tokenizer"), given.describe(), tok.describe()));
    tok = given;
  } else if (vocab_arg > 0 && !resume) {
    lrt::tok::BpeTrainOptions bo;
    bo.vocab_size = static_cast<lrt::tok::token_t>(vocab_arg);
    if (a.has("pattern")) bo.pattern = a.str("pattern");
    std::vector<std::string_view> docs;
    for (const auto& d : corpus.train) docs.push_back(d.text);
    const auto t0 = now();
    try {
      tok = lrt::data::TextTokenizer(lrt::tok::train_bpe(docs, bo));
    } catch (const lrt::Error& e) {
      throw UsageError(fmt::format("--vocab-size {}: {}", vocab_arg, e.what()));
    }
    tok.bpe()->save(out + "/tokenizer.lrt");
    if (tok.vocab_size() < vocab_arg)
      fmt::print("warning: no pair of tokens occurs twice any more: {} ids instead of --vocab-size {}\n",
                 tok.vocab_size(), vocab_arg);
    fmt::print("tokenizer: trained {} on the training split in {:.1f} s, wrote {}/tokenizer.lrt\n", tok.describe(),
               now() - t0, out);
    check_stop();
  } else if (vocab_arg > 0 && vocab_arg != tok.vocab_size()) {
    throw UsageError(fmt::format("--vocab-size {} on --resume: the checkpoint's tokenizer has {} ids ({})", vocab_arg,
                                 tok.vocab_size(), tok.describe()));
  }
  if (!tok.is_bytes() && !resume) {
    cfg.vocab_size = tok.vocab_size();
    cfg.bos_id = static_cast<lrt::index_t>(tok.bos());
  } else if (tok.is_bytes() && cfg.vocab_size != lrt::data::ByteTokenizer::vocab_size) {
    throw UsageError(
        fmt::format("preset '{}' has a vocabulary of {} ids, not the byte vocabulary's 257: give "
                    "--tokenizer FILE or --vocab-size N",
                    preset, cfg.vocab_size));
  }
  const int T = static_cast<int>(cfg.sequence_len);
  const auto t_rows = now();
  train_rows = lrt::data::TokenRows::build(corpus.train, T, tok);
  val_rows = lrt::data::TokenRows::build(corpus.val, T, tok);
  fmt::print("data: {} ({}): train {} docs, {} bytes, {} rows; validation {} docs, {} rows\n", data_path, corpus.kind,
             corpus.train.size(), lrt::data::text_bytes(corpus.train), train_rows.rows(), corpus.val.size(),
             val_rows.rows());
  fmt::print("tokenizer: {}; {} on the training split (rows in {:.1f} s)\n", tok.describe(),
             bytes_per_token(train_rows), now() - t_rows);
  eval_bytes = a.integer("eval-bytes", 0, 1LL << 40);
  val_rows_per_batch = static_cast<int>(std::min<lrt::index_t>(o.batch_rows, 32));
  val = lrt::data::validation_batches(val_rows, val_rows_per_batch,
                                      eval_bytes > 0 ? std::numeric_limits<lrt::index_t>::max() : eval_tokens,
                                      static_cast<std::size_t>(eval_bytes));
  check_stop();
  d.token_bytes = tok.token_bytes_table(cfg.vocab_size);
  return d;
}

/// --time: a deadline, not only a plan. The plan (plan_time) is made again once, after step `at`
/// (a quarter into the run and before the warm-down, so the LR schedule has not bent yet), from
/// what the run measured: the step time with the optimizer's update and the evaluations' time (a
/// busy moment while the warm-up steps were timed then costs a quarter of the run's steps at most).
/// And after every step, where the steps left at the pace of the last few and the evaluations left
/// at their measured cost would end the run more than 5% of the budget late, the horizon is
/// shortened to what fits (time_deadline): the learning-rate schedule becomes that of the shorter
/// run, so its warm-down still ends at the last step. Rank 0 decides, every rank follows. Each
/// change is made before the step's checkpoint, which holds the horizon and this record (metadata
/// `time_budget`): a kill and --resume goes on as the run would have, and a resume that gives no
/// new horizon keeps the deadline, counting the run's seconds over its resumes.
struct TimeReplan {
  struct Change {
    std::int64_t after = 0, from = 0, to = 0;  // after step `after` (1-based), horizon from -> to
    double step_seconds = 0;                   // the pace that made it
    bool deadline = false;                     // shortened to keep the deadline (else the re-plan)
  };
  double budget = 0;        // 0: no --time
  double spent_before = 0;  // a resumed run's seconds before this process, which the budget counts
  double reserve = 0, final_seconds = 0, eval_each = 0, planned_step = 0;
  int evaluations = 1;           // the plan's evaluations (the last step's included)
  std::int64_t fixed_every = 0;  // --eval-every as given (kept); 0: re-spaced with the horizon
  std::int64_t at = -1;          // the step after which the re-plan is made (the same on every rank)
  std::int64_t planned = 0;      // the horizon first planned
  std::vector<Change> changes;

  /// The seconds left for the steps and evaluations still to come, `elapsed` into this process.
  double left(double elapsed) const { return budget - spent_before - elapsed - reserve - final_seconds; }
  /// An evaluation's cost: the mean of the `evaluations` made (in `eval_seconds`), else the plan's.
  double eval_cost(int evaluations, double eval_seconds) const {
    return evaluations > 0 ? eval_seconds / evaluations : eval_each;
  }

  /// The record saved in each checkpoint (metadata `time_budget`, as text) and read back by a resume.
  lrt::json::Value to_value() const {
    lrt::json::Value j = lrt::json::Value::object();
    j["budget"] = budget, j["reserve"] = reserve, j["final_seconds"] = final_seconds, j["eval_each"] = eval_each;
    j["planned_step"] = planned_step, j["evaluations"] = evaluations, j["fixed_every"] = fixed_every;
    j["at"] = at, j["planned"] = planned;
    lrt::json::Value c = lrt::json::Value::array();
    for (const Change& x : changes) {
      lrt::json::Value e = lrt::json::Value::object();
      e["after_step"] = x.after, e["from"] = x.from, e["to"] = x.to, e["step_seconds"] = x.step_seconds;
      e["why"] = x.deadline ? "deadline" : "re-plan";
      c.push_back(std::move(e));
    }
    j["changes"] = std::move(c);
    return j;
  }
  std::string to_json() const { return to_value().dump(); }
  static TimeReplan from_json(const std::string& text, const std::string& label) {
    const lrt::json::Value j = lrt::json::parse(text, label);
    TimeReplan r;
    r.budget = j.at("budget").as_number(), r.reserve = j.at("reserve").as_number();
    r.final_seconds = j.at("final_seconds").as_number(), r.eval_each = j.at("eval_each").as_number();
    r.planned_step = j.at("planned_step").as_number();
    r.evaluations = static_cast<int>(j.at("evaluations").as_int());
    r.fixed_every = j.at("fixed_every").as_int();
    r.at = j.at("at").as_int();
    r.planned = j.at("planned").as_int();
    for (const lrt::json::Value& e : j.at("changes").items())
      r.changes.push_back({e.at("after_step").as_int(), e.at("from").as_int(), e.at("to").as_int(),
                           e.at("step_seconds").as_number(), e.at("why").as_string() == "deadline"});
    return r;
  }
};

/// lrt-train, part 3: the horizon N of the schedules (--steps; --budget-forwards; --time, which
/// times steps and evaluations first; else --tokens-per-param), the same on every rank. Returns
/// the number of steps between evaluations.
template <class Now>
std::int64_t plan_horizon(const Entry& pair, const Args& a, const TrainSettings& st, TrainData& d, Session& tr,
                          const Now& now, lrt::dist::Group* group, TimeReplan& replan) {
  const bool resume = st.resume;
  const int modes = st.modes;
  const long long steps_arg = st.steps_arg, eval_every_arg = st.eval_every_arg, seq_every = st.seq_every;
  const double time_arg = st.time_arg, tpp = st.tpp, budget_forwards = st.budget_forwards;
  const lrt::ScheduleOptions& sched_opts = st.sched_opts;
  const lrt::data::TokenRows& val_rows = d.val_rows;
  const int val_rows_per_batch = d.val_rows_per_batch;
  const long long eval_bytes = d.eval_bytes;
  const lrt::TokenBytes& token_bytes = d.token_bytes;
  std::vector<lrt::data::Batch>& val = d.val;
  // The horizon N of the schedules.
  long long eval_every_plan = eval_every_arg;         // --time may choose the evaluations' spacing and size
  const std::int64_t resumed_horizon = tr.horizon();  // on --resume, the checkpoint's
  if (resume && modes == 0)                           // a --time run resumed without a new horizon keeps its deadline
    if (const auto was = lrt::st::Reader::open(st.from.model_path()).meta("time_budget")) {
      replan = TimeReplan::from_json(*was, st.from.model_path() + " time_budget");
      if (replan.at <= tr.step()) replan.at = -1;  // made before the checkpoint
    }
  if (!resume || modes > 0) {
    if (steps_arg > 0) {
      tr.set_horizon(steps_arg);
    } else if (a.has("budget-forwards")) {  // matched compute: N = floor(F / (B_tok x pass factor))
      tr.set_horizon(std::max<std::int64_t>(1, static_cast<std::int64_t>(budget_forwards / tr.forwards_per_step())));
      fmt::print("compute budget {:.4g} token-forwards / {:.4g} per step -> {} steps\n", budget_forwards,
                 tr.forwards_per_step(), tr.horizon());
    } else if (time_arg > 0) {
      const lrt::TimePlan p = plan_time(a, tr, tr, val_rows, val_rows_per_batch, token_bytes, sched_opts, time_arg, now,
                                        pair.recurrent(), seq_every);
      tr.set_horizon(tr.step() + p.steps);
      if (p.eval_every != eval_every_arg) eval_every_plan = p.eval_every;
      replan.budget = time_arg, replan.reserve = std::min(5.0, 0.02 * time_arg);
      replan.final_seconds = p.final_seconds, replan.eval_each = p.eval_seconds / std::max(1, p.evaluations);
      replan.planned_step = p.train_seconds / static_cast<double>(p.steps);
      replan.evaluations = p.evaluations, replan.fixed_every = eval_every_arg;
      if (eval_bytes == 0 && p.eval_tokens < static_cast<std::int64_t>(val_tokens(val)))
        val = lrt::data::validation_batches(val_rows, val_rows_per_batch, p.eval_tokens);
    } else {
      const double n_scal = static_cast<double>(tr.num_matmul_params());
      tr.set_horizon(std::max<std::int64_t>(1, static_cast<std::int64_t>(tpp * n_scal / double(tr.tokens_per_step()))));
      fmt::print("horizon: {} tokens/param x {} params / {} tokens/step = {} steps\n", tpp, n_scal,
                 tr.tokens_per_step(), tr.horizon());
    }
  }
  if (group != nullptr &&
      group->size() > 1) {  // rank 0's horizon and evaluations (a time budget is timed on each rank)
    const auto all =
        group->exchange(fmt::format("{} {}", tr.horizon(), eval_every_plan), "the exchange of the horizon");
    long long n = 0, every = 0;
    std::sscanf(all[0].c_str(), "%lld %lld", &n, &every);
    tr.set_horizon(n), eval_every_plan = every;
  }
  const std::int64_t N = tr.horizon();
  if (replan.budget > 0 && replan.planned == 0) {  // a fresh plan: re-planned a quarter in, before the
    replan.planned = N;                            // warm-down; not in runs too short to gain from it
    const lrt::TrainOptions& o = tr.train_options();
    const std::int64_t warm_up = lrt::optim::round_half_even(o.warmup_frac * static_cast<double>(N));
    const std::int64_t at = std::max(tr.step() + std::max<std::int64_t>(2, (N - tr.step()) / 4), warm_up);
    if (at < N - lrt::optim::warmdown_steps(N, o.warmdown_frac)) replan.at = at;
  }
  if (resume && tr.step() > N)
    throw UsageError(fmt::format(
        "the horizon N = {} ({}) is below the checkpoint's step {}: N counts all the run's steps, not the steps to "
        "add; give N > {} to train on, or N = {} to only evaluate",
        N, steps_arg > 0 ? "--steps" : "from the budget", tr.step(), tr.step(), tr.step()));
  if (resume && N != resumed_horizon) {  // a change the flags may make: said, with what it does to the rates
    const lrt::TrainOptions& o = tr.train_options();
    const auto mult = [&](std::int64_t n) {
      return lrt::optim::lr_multiplier(tr.step(), n, o.warmdown_frac, o.warmup_frac, o.final_lr_frac);
    };
    fmt::print(
        "resume: the horizon changes from {} to {} steps ({}); the learning-rate schedule is now that of a run of {} "
        "steps: at step {} its multiplier goes from {:.3g} to {:.3g}\n",
        resumed_horizon, N,
        steps_arg > 0   ? "--steps"
        : a.has("time") ? "--time"
                        : "the budget",
        N, tr.step(), mult(resumed_horizon), mult(N));
  }
  fmt::print("train options: {}\n", tr.train_options().to_json().dump());
  return eval_every_plan > 0 ? eval_every_plan : std::max<std::int64_t>(1, N / 10);
}

/// What lrt-train writes beside its checkpoints (rank 0): log.csv, one row a step, appended as
/// the run goes; memory.csv (LRT variants: gamma and gate statistics per layer at each
/// evaluation); loss.svg. The checkpoints carry their own copies (a unit with the weights).
struct RunLog {
  std::string log_path, svg_path, mem_path, title;
  std::vector<tool::LogRow> rows;
  std::string memory_text;    // memory.csv's rows
  std::FILE* csv = nullptr;   // log.csv, open for appending
  double seconds_before = 0;  // a resumed run's seconds before this process (its log's last row)

  RunLog() = default;
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;
  ~RunLog() { close(); }
  void close() {
    if (csv != nullptr) std::fclose(csv);
    csv = nullptr;
  }
  std::string memory_csv() const { return std::string(memory_header) + "\n" + memory_text; }
  std::string log_text() const {
    std::string t = std::string(tool::log_header) + "\n";
    for (const auto& r : rows) t += tool::log_line(r) + "\n";
    return t;
  }
  void append(const tool::LogRow& row) {
    rows.push_back(row);
    if (csv != nullptr) {
      std::fprintf(csv, "%s\n", tool::log_line(row).c_str());
      std::fflush(csv);
    }
  }
};

/// Opens the run's logs: a resumed run starts from the checkpoint's own copy (up to its step),
/// else the run directory's; the rows so far replace log.csv atomically (a kill here leaves the
/// old log, not an empty one) and each step then appends its row.
inline void open_run_log(const Entry& pair, RunLog& log, const Args& a, const TrainSettings& st, Session& tr,
                         bool root) {
  const std::string& out = st.out;
  log.log_path = out + "/log.csv", log.svg_path = out + "/loss.svg", log.mem_path = out + "/memory.csv";
  if (st.resume) {
    std::error_code ec;
    const auto pick = [&](const char* name) {
      const std::string own = st.from.dir + "/" + name;
      return std::filesystem::exists(own, ec) ? own : a.str("resume") + "/" + name;
    };
    for (const auto& r : tool::read_log(pick("log.csv")))
      if (r.step < tr.step()) log.rows.push_back(r);
    if (!log.rows.empty() && std::isfinite(log.rows.back().seconds)) log.seconds_before = log.rows.back().seconds;
    std::ifstream in(pick("memory.csv"));
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] >= '0' && line[0] <= '9' && std::atoll(line.c_str()) < tr.step())
        log.memory_text += line + "\n";
  }
  if (root) {
    lrt::write_file_atomic(log.log_path, log.log_text());
    log.csv = std::fopen(log.log_path.c_str(), "a");
    lrt::check(log.csv != nullptr, "lrt-train", "'", log.log_path,
               "': cannot open for appending: ", std::strerror(errno));
  }
  log.title =
      fmt::format("{} with {}{} (L={}, d={}), {} tokens/step", display_name(pair.structure), pair.schedule,
                  st.resume ? "" : ", preset " + st.preset, st.cfg.n_layer, st.cfg.n_embd, tr.tokens_per_step());
}

/// CORE of a session's model (lrt::eval::evaluate_core) through its scorer: on the CPU the examples
/// run on the thread pool; a GPU session takes them one at a time.
inline lrt::eval::CoreReport session_core(const Session& m, bool sequential, const lrt::eval::CoreBundle& bundle,
                                          const lrt::eval::CoreOptions& o, const lrt::data::TextTokenizer& tok,
                                          const std::function<void(const lrt::eval::CoreProgress&)>& progress = {}) {
  const bool cpu = m.device() == DeviceKind::cpu;
  auto one_at_a_time = std::make_shared<std::mutex>();
  const lrt::eval::CoreScorer scorer = [cpu, one_at_a_time,
                                        inner = m.core_scorer(sequential)](const lrt::eval::CoreSpans& s) {
    std::unique_lock<std::mutex> lk(*one_at_a_time, std::defer_lock);
    if (!cpu) lk.lock();
    return inner(s);
  };
  return lrt::eval::evaluate_core(bundle, o, tok, scorer, progress);
}

/// A shard's scored examples as text, one line each (task, index, line, correct, predicted, margin,
/// option losses; doubles in their shortest round-trip form), after a line per task with its seconds.
inline std::string core_shard_text(const lrt::eval::CoreReport& rep) {
  std::string s;
  for (std::size_t k = 0; k < rep.tasks.size(); ++k) {
    const auto& t = rep.tasks[k];
    s += fmt::format("T {} {}\n", k, t.seconds);
    for (std::size_t i = 0; i < t.per_example.size(); ++i) {
      const auto& e = t.per_example[i];
      if (!e.scored) continue;
      s += fmt::format("E {} {} {} {} {} {} {}", k, i, e.line, e.correct ? 1 : 0, e.predicted, e.margin,
                       e.option_losses.size());
      for (double l : e.option_losses) s += fmt::format(" {}", l);
      s += "\n";
    }
  }
  return s;
}

/// The report of one shard rebuilt from core_shard_text over `shape` (a report of the same bundle
/// and options: its tasks and example counts).
inline lrt::eval::CoreReport core_shard_from_text(const std::string& text, const lrt::eval::CoreReport& shape) {
  lrt::eval::CoreReport rep = shape;
  for (auto& t : rep.tasks)
    for (auto& e : t.per_example) e = {};
  std::istringstream in(text);
  const auto bad = [](const std::string& line) {
    return lrt::Error("lrt-eval", "a rank sent a bad CORE line: " + line);
  };
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string tag, num;
    std::size_t k = 0, i = 0;
    f >> tag >> k;
    if (!f || k >= rep.tasks.size()) throw bad(line);
    auto& t = rep.tasks[k];
    const auto real = [&] {
      if (!(f >> num)) throw bad(line);
      return std::strtod(num.c_str(), nullptr);  // "nan" and "inf" too
    };
    if (tag == "T") {
      t.seconds = real();
      continue;
    }
    std::size_t n = 0;
    int correct = 0;
    lrt::eval::CoreExample e;
    if (tag != "E" || !(f >> i >> e.line >> correct >> e.predicted) || i >= t.per_example.size()) throw bad(line);
    e.margin = real();
    if (!(f >> n) || n > 1024) throw bad(line);
    for (std::size_t j = 0; j < n; ++j) e.option_losses.push_back(real());
    e.correct = correct != 0, e.scored = true;
    t.per_example[i] = std::move(e);
  }
  return rep;
}

/// How the loop ended, and what the report needs of it.
struct LoopEnd {
  int stop = 0;       // the signal that stopped the run after a step (0: it reached the horizon)
  std::string saved;  // the last checkpoint written
  double last_bpb = NAN;
  long long tokens = 0;
  double train_seconds = 0, optimizer_seconds = 0, comm_seconds = 0, eval_seconds = 0;
  std::int64_t timed_steps = 0;
};

/// The re-plan of a --time run (TimeReplan) after `replan.at` steps, `elapsed` seconds into it: the
/// horizon that fits the time left at the measured `step_seconds`, with the evaluations still to
/// come at the measured cost of those made (`evaluations` of them in `eval_seconds`, rank 0's,
/// which every rank takes). Returns the steps between evaluations from here on.
inline std::int64_t time_replan(TimeReplan& r, Session& tr, double elapsed, double step_seconds, int evaluations,
                                double eval_seconds, std::int64_t eval_every, lrt::dist::Group* group, bool root) {
  const std::int64_t step = tr.step(), N = tr.horizon();
  const double each = r.eval_cost(evaluations, eval_seconds);
  double left = r.left(elapsed);
  std::int64_t more = 1, every = eval_every;
  if (r.fixed_every > 0) {  // an evaluation every fixed_every steps (and the last): its cost is paid per step
    more = static_cast<std::int64_t>(std::floor((left - each) / (step_seconds + each / double(r.fixed_every))));
  } else {  // the plan's count of evaluations, re-spaced over the new horizon
    more =
        static_cast<std::int64_t>(std::floor((left - each * std::max(1, r.evaluations - evaluations)) / step_seconds));
  }
  std::int64_t n = step + std::max<std::int64_t>(1, more);
  if (r.fixed_every == 0)
    every = r.evaluations <= 1 ? n : std::max<std::int64_t>(1, (n + r.evaluations - 2) / (r.evaluations - 1));
  if (group != nullptr && group->size() > 1) {  // rank 0's numbers on every rank
    const auto all = group->exchange(fmt::format("{} {}", n, every), "the exchange of the re-planned horizon");
    long long n0 = 0, every0 = 0;
    std::sscanf(all[0].c_str(), "%lld %lld", &n0, &every0);
    n = n0, every = every0;
  }
  if (std::llabs(n - N) * 20 < N) return eval_every;  // within 5%: the plan stands
  tr.set_horizon(n);
  r.changes.push_back({step, N, n, step_seconds, false});
  if (root)
    fmt::print(
        "time budget {}: re-planned after step {}: {:.3f} s/step measured (planned {:.3f}), evaluations {:.3g} s "
        "each -> {} steps (was {}), an evaluation every {}\n",
        tool::duration(r.budget), step, step_seconds, r.planned_step, each, n, N, every);
  return every;
}

/// --time as a deadline, after each step (TimeReplan): where the steps left at `pace` (seconds a
/// step, the last few steps' median) and the evaluations left at `each` would end the run more than
/// 5% of the budget past it (25% before the re-plan), the horizon becomes the largest that fits, at least one step more
/// (so the shortened warm-down ends at a step of its own). Rank 0's horizon on every rank (each calls this after every
/// step). Returns whether the horizon changed.
inline bool time_deadline(TimeReplan& r, Session& tr, double elapsed, double pace, double each, std::int64_t every,
                          lrt::dist::Group* group, bool root) {
  const std::int64_t done = tr.step(), N = tr.horizon();
  const double left = r.left(elapsed);
  const auto cost = [&](std::int64_t n) {  // steps done+1..n, with an evaluation every `every` and at n
    const std::int64_t evals = n / every - done / every + (n % every != 0 ? 1 : 0);
    return static_cast<double>(n - done) * pace + static_cast<double>(evals) * each;
  };
  std::int64_t n = N;
  // Late by more than 5% of the budget; 25% before the re-plan, which goes by the mean of more steps.
  const double slack = (r.at > done ? 0.25 : 0.05) * r.budget;
  if (done + 1 < N && cost(N) > left + slack) {
    std::int64_t lo = done + 1, hi = N - 1;  // the largest n in [lo, hi] with cost(n) <= left, else lo
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo + 1) / 2;
      if (cost(mid) <= left)
        lo = mid;
      else
        hi = mid - 1;
    }
    n = lo;
  }
  if (group != nullptr && group->size() > 1) {  // rank 0's horizon on every rank
    const auto all = group->exchange(std::to_string(n), "the exchange of the --time deadline");
    n = std::stoll(all[0]);
  }
  if (n == N) return false;
  tr.set_horizon(n);
  r.changes.push_back({done, N, n, pace, true});
  if (root) {
    const lrt::TrainOptions& o = tr.train_options();
    const auto mult = [&](std::int64_t m) {
      return lrt::optim::lr_multiplier(done, m, o.warmdown_frac, o.warmup_frac, o.final_lr_frac);
    };
    fmt::print(
        "time budget {}: the deadline: after step {} the steps take {:.3f} s (planned {:.3f}), evaluations {:.3g} s "
        "each; {} steps would end {} late, so the run ends at step {}: the learning-rate schedule is that of a "
        "{}-step run from step {} on (multiplier x{:.3f} -> x{:.3f}), its warm-down ending at step {}\n",
        tool::duration(r.budget), done, pace, r.planned_step, each, N, tool::duration(std::max(0.0, cost(N) - left)), n,
        n, done + 1, mult(N), mult(n), n);
  }
  fault_point("revised");
  return true;
}

/// lrt-train, part 4: the loop. Each step: Trainer::train_step (through the session), the log row,
/// an evaluation every `eval_every` steps and at the end (rank 0; the LRT's sequential score every
/// --seq-eval-every), a checkpoint with each evaluation, and on SIGINT/SIGTERM a checkpoint and
/// the command that continues the run.
template <class Now>
LoopEnd train_loop(const Entry& pair, const Args& a, const TrainSettings& st, const TrainData& d, Session& tr,
                   OutDir& out_dir, RunLog& log, std::int64_t eval_every, const Now& now, bool root, TimeReplan& replan,
                   lrt::dist::Group* group) {
  const std::string &out = st.out, &data_path = st.data_path;
  const long long seq_every = st.seq_every, eval_bytes = d.eval_bytes;
  const lrt::ScheduleOptions& sched_opts = st.sched_opts;
  const std::vector<lrt::data::Batch>& val = d.val;
  const lrt::TokenBytes& token_bytes = d.token_bytes;
  tool::Progress progress(10);
  int evaluations = 0;  // made by this loop (rank 0)
  LoopEnd end;
  std::string& saved = end.saved;  // the last checkpoint written
  double& last_bpb = end.last_bpb;
  long long& tokens = end.tokens;
  tokens = tr.step() * tr.tokens_per_step();
  double &train_seconds = end.train_seconds, &optimizer_seconds = end.optimizer_seconds;
  double &comm_seconds = end.comm_seconds, &eval_seconds = end.eval_seconds;
  std::int64_t& timed_steps = end.timed_steps;
  std::array<double, 3> recent{};  // the last steps' seconds, for --time's deadline
  while (!tr.done()) {
    const lrt::StepStats s = tr.train_step();
    const int stop = s.stop_signal;  // asked on some rank: every rank saves and stops after this step
    const double seconds = s.seconds + slow_point(s.step, tr.horizon());  // tests: the machine getting busier
    tokens += s.tokens;
    train_seconds += seconds;
    optimizer_seconds += s.optimizer_seconds;
    comm_seconds += s.comm_seconds;
    ++timed_steps;
    recent[static_cast<std::size_t>(timed_steps % 3)] = seconds;
    if (replan.budget > 0) {  // --time: a change of plan is made before this step's checkpoint
      // The pace: the median of the last 3 steps (one slow step is not a trend), this process's first
      // left out; the re-plan takes the mean of all steps where that is slower.
      std::array<double, 3> r = recent;
      std::sort(r.begin(), r.end());
      const double mean = train_seconds / double(timed_steps), pace = timed_steps >= 4 ? r[1] : mean;
      if (s.step + 1 == replan.at) {
        eval_every =
            time_replan(replan, tr, now(), std::max(mean, pace), evaluations, eval_seconds, eval_every, group, root);
      } else if (timed_steps >= 4) {
        time_deadline(replan, tr, now(), pace, replan.eval_cost(evaluations, eval_seconds), eval_every, group, root);
      }
    }
    tool::LogRow row;
    row.step = s.step, row.tokens = tokens, row.train_loss = s.loss, row.lr = s.lr_multiplier,
    row.seconds = log.seconds_before + now();  // the run's, over its resumes
    const bool last = tr.done();
    const bool eval_now = last || (s.step + 1) % eval_every == 0;
    const bool seq_now = pair.recurrent() && seq_every > 0 && (last || (s.step + 1) % seq_every == 0);
    const double t_eval = now();
    if (eval_now && root) {  // the other ranks wait for it in the next exchange
      const lrt::BpbResult r = tr.evaluate_parallel(val, token_bytes, sched_opts).merged;
      row.val_loss = r.loss(), row.val_bpb = last_bpb = r.bpb();
      if (pair.recurrent()) {
        if (!val.empty()) log.memory_text += memory_rows(s.step, tr.memory_statistics(val[0].inputs));
      }
    }
    if (seq_now && root) row.val_bpb_seq = tr.evaluate_sequential(val, token_bytes).bpb();
    const bool core_now = st.core && (last || (st.core_every > 0 ? (s.step + 1) % st.core_every == 0 : eval_now));
    if (core_now && root) {
      if (st.core_mode != "sequential")
        row.core = session_core(tr, false, *st.core, st.core_options, d.tok).core_metric;
      if (st.core_mode != "parallel")
        row.core_seq = session_core(tr, true, *st.core, st.core_options, d.tok).core_metric;
    }
    eval_seconds += now() - t_eval;
    evaluations += eval_now && root ? 1 : 0;
    log.append(row);
    const std::int64_t N = tr.horizon();
    const double tps = double(timed_steps * tr.tokens_per_step()) / train_seconds;
    const double eta = double(N - tr.step()) * train_seconds / double(timed_steps);
    std::string line = fmt::format("step {}/{} loss {:.4f} lr x{:.2f} {:.0f} tok/s elapsed {} ETA {}", s.step + 1, N,
                                   s.loss, s.lr_multiplier, tps, tool::duration(now()), tool::duration(eta));
    if (eval_now) line += fmt::format(" | val loss {:.4f} bpb {:.4f}", row.val_loss, row.val_bpb);
    if (seq_now) line += fmt::format(" (sequential {:.4f})", row.val_bpb_seq);
    if (core_now)
      line += st.core_mode == "both"
                  ? fmt::format(" | CORE {:.4f} (sequential {:.4f})", row.core, row.core_seq)
                  : fmt::format(" | CORE {:.4f}{}", st.core_mode == "parallel" ? row.core : row.core_seq,
                                st.core_mode == "parallel" ? "" : " (sequential)");
    if (root) progress.update(line, now(), eval_now || core_now || s.step == 0 || stop != 0);
    if (eval_now || stop != 0) {
      // A unit: model, optimizer state, the logs so far.
      if (saved.empty()) fault_point("first-save");
      if (replan.budget > 0) tr.set_metadata("time_budget", replan.to_json());
      saved = tr.save(out, pair.recurrent()
                               ? std::vector<std::pair<std::string, std::string>>{{"log.csv", log.log_text()},
                                                                                  {"memory.csv", log.memory_csv()}}
                               : std::vector<std::pair<std::string, std::string>>{{"log.csv", log.log_text()}});
      out_dir.keep();
      if (root) {
        lrt::write_file_atomic(log.svg_path, tool::loss_svg(log.rows, log.title));
        if (pair.recurrent()) lrt::write_file_atomic(log.mem_path, log.memory_csv());
      }
    }
    if (stop != 0) {
      log.close();
      // The command that continues the run as it would have gone on: the evaluations in effect
      // (they are not in the checkpoint), the rest from the checkpoint.
      std::string more = eval_bytes > 0 ? fmt::format(" --eval-bytes {}", eval_bytes)
                                        : fmt::format(" --eval-tokens {}", val_tokens(val));
      more += fmt::format(" --eval-every {}", eval_every);
      if (seq_every > 0) more += fmt::format(" --seq-eval-every {}", seq_every);
      if (st.core)
        more += fmt::format(" --core {} --core-every {} --core-max-per-task {} --core-mode {}", st.core_dir,
                            st.core_every, st.core_options.max_per_task, st.core_mode);
      for (const char* f : {"device", "precision"})
        if (a.has(f)) more += fmt::format(" --{} {}", f, a.str(f));
      if (root)
        fmt::print(
            "stopped by {} after step {} of {}: saved {} (named by {}/latest); continue with:\n  lrt-train "
            "--resume {} --out {} --data {}{}\n",
            signal_name(stop), tr.step(), N, saved, out, out, out, data_path, more);
      end.stop = stop;
      return end;
    }
  }
  log.close();
  if (saved.empty()) {  // resumed at the horizon: --out still gets the checkpoint (and fresh links)
    if (root) last_bpb = tr.evaluate_parallel(val, token_bytes, sched_opts).merged.bpb();
    if (replan.budget > 0) tr.set_metadata("time_budget", replan.to_json());
    saved = tr.save(out, {{"log.csv", log.log_text()}});
    out_dir.keep();
    if (root) lrt::write_file_atomic(log.svg_path, tool::loss_svg(log.rows, log.title));
  }
  return end;
}

/// lrt-train, part 5: the report (rank 0): throughput, where the time went, the final scores
/// (the LRT's exact recurrence too) and summary.json.
template <class Now>
int report_run(const Entry& pair, const TrainSettings& st, const TrainData& d, Session& tr, const RunLog& log,
               LoopEnd end, const TimeReplan& replan, const Now& now, lrt::dist::Group* group) {
  const bool root = group == nullptr || group->is_root();
  const std::string& out = st.out;
  const lrt::ModelConfig& cfg = st.cfg;
  const lrt::ScheduleOptions& sched_opts = st.sched_opts;
  const std::vector<lrt::data::Batch>& val = d.val;
  const lrt::TokenBytes& token_bytes = d.token_bytes;
  const std::string& saved = end.saved;
  double& last_bpb = end.last_bpb;
  const long long tokens = end.tokens;
  const double train_seconds = end.train_seconds, optimizer_seconds = end.optimizer_seconds;
  const double comm_seconds = end.comm_seconds, eval_seconds = end.eval_seconds;
  const std::int64_t timed_steps = end.timed_steps;
  if (!root) return 0;  // rank 0 reports
  const double tps = timed_steps > 0 ? double(timed_steps * tr.tokens_per_step()) / train_seconds : 0;
  const double fwd_per_tok = tr.forwards_per_step() / double(tr.tokens_per_step());
  fmt::print("done: {} steps, {} tokens, {:.4g} token-forwards, {:.0f} tokens/s ({:.1f} GFLOP/s model), wall {}\n",
             tr.step(), tokens, double(tokens) * fwd_per_tok, tps, tps * fwd_per_tok * tr.flops_per_token() * 1e-9,
             tool::duration(now()));
  fmt::print("time: training {:.1f} s ({:.0f}%), evaluations {:.1f} s, the rest (setup, checkpoints) {:.1f} s\n",
             train_seconds, 100 * train_seconds / now(), eval_seconds, now() - train_seconds - eval_seconds);
  if (train_seconds > 0)
    fmt::print("step time: optimizer {:.1f}%, data-parallel exchanges {:.1f}% ({} rank{})\n",
               100 * optimizer_seconds / train_seconds, 100 * comm_seconds / train_seconds,
               group != nullptr ? group->size() : 1, group != nullptr && group->size() > 1 ? "s" : "");
  lrt::json::Value summary = lrt::json::Value::object();
  summary["variant"] = display_name(pair.structure), summary["schedule"] = pair.schedule;
  summary["steps"] = tr.step(), summary["tokens"] = tokens;
  summary["token_forwards"] = double(tokens) * fwd_per_tok;
  summary["params"] = tr.num_params(), summary["matmul_params"] = tr.num_matmul_params();
  summary["train_seconds"] = train_seconds, summary["eval_seconds"] = eval_seconds, summary["wall_seconds"] = now();
  summary["run_seconds"] = log.seconds_before + now();  // over the run's resumes (log.csv's seconds)
  summary["device"] = to_string(st.device.device), summary["precision"] = to_string(st.device.precision);
  if (st.device.device == DeviceKind::cpu)  // the products' path: "fp32", or "bf16 (avx512_bf16)"
    summary["cpu_matmul"] = lrt::cpu::cpu_matmul_name();
  if (replan.budget > 0) {  // --time: how the plan changed, and the time the run took against it
    const double run_s = replan.spent_before + now();
    std::string how = replan.changes.empty() ? fmt::format("the plan of {} steps held", replan.planned)
                                             : fmt::format("planned {} steps", replan.planned);
    for (const TimeReplan::Change& c : replan.changes)
      how += fmt::format("; after step {} {} to {} ({:.3f} s/step)", c.after,
                         c.deadline ? "shortened for the deadline" : "re-planned", c.to, c.step_seconds);
    fmt::print("time budget {}: {}; the run took {:.1f} s, {:.0f}% of the budget\n", tool::duration(replan.budget), how,
               run_s, 100 * run_s / replan.budget);
    lrt::json::Value tb = replan.to_value();
    tb["steps"] = tr.step(), tb["seconds"] = run_s;
    summary["time_budget"] = std::move(tb);
  }
  summary["config"] = pair.release_config(cfg, pair.schedule, sched_opts);
  summary["lrt_config"] = pair.lrt_config(cfg);
  summary["train_options"] = tr.train_options().to_json();
  summary["val_bpb_parallel"] = last_bpb;
  if (pair.recurrent()) {  // the deployment number: the exact recurrence (not a row log.csv rounded)
    const bool have_seq = timed_steps > 0 && !log.rows.empty() && !std::isnan(log.rows.back().val_bpb_seq) &&
                          log.rows.back().step + 1 == tr.step();
    const double sq = have_seq ? log.rows.back().val_bpb_seq : tr.evaluate_sequential(val, token_bytes).bpb();
    fmt::print("val_bpb_parallel: {:.6f}\nval_bpb_sequential: {:.6f}\n", last_bpb, sq);
    summary["val_bpb_sequential"] = sq;
    last_bpb = sq;
    if (!val.empty()) {
      const auto st = tr.memory_statistics(val[0].inputs);
      std::string g, m;
      for (const auto& x : st) {
        if (!std::isnan(x.gamma)) g += fmt::format(" {:.4f}", x.gamma);
        if (!std::isnan(x.gate_mean)) m += fmt::format(" {:.3f}+-{:.3f}", x.gate_mean, x.gate_sd);
      }
      fmt::print("memory by layer: {}{}{}\n", g.empty() ? "" : "gamma" + g, !g.empty() && !m.empty() ? "; " : "",
                 m.empty() ? "" : "recurrent gate (mean+-sd)" + m);
    }
  }
  summary["val_bpb"] = last_bpb;
  if (tr.device() == DeviceKind::cpu) summary["cpu_gemm"] = lrt::cpu::gemm_summary();
  lrt::write_file_atomic(out + "/summary.json", summary.dump() + "\n");
  fmt::print("wrote {} (named by {}/latest; {}/model.safetensors and optim.safetensors link to it), {}, {}\n", saved,
             out, out, log.log_path, log.svg_path);
  fmt::print("wrote {}/summary.json\nval_bpb: {:.6f}\n", out, last_bpb);
  return 0;
}

/// lrt-train: settings (part 1), data (2), the model and its trainer, the horizon (3), the loop
/// (4), the report (5).
inline int train_run(const Entry& pair, const tool::Args& a) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  const auto now = [&] { return std::chrono::duration<double>(clock::now() - t_start).count(); };
  catch_stop_signals();  // SIGINT/SIGTERM: stop after the current step, with a checkpoint
  // A file-size limit (ulimit -f) then fails a save with EFBIG, reported as an error, instead of
  // killing the process with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  TrainSettings st = train_settings(pair, a);

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines appear in order with the progress on stderr
  // Before any work: an --out that holds another run, or that this process may not write, fails
  // here; until the first checkpoint, a failure removes what this run created in it.
  lrt::dist::Group* const group = dist_group();
  const bool root = group == nullptr || group->is_root();
  OutDir out_dir(st.out, st.resume && same_folder(run_folder_of(st.from), st.out), a.has("force"), root);
  if (!st.from.note.empty()) fmt::print("warning: {}\n", st.from.note);
  TrainData d = train_data(a, st, now);
  // The training rows a run sees, recorded in its checkpoints: --resume on other text is refused.
  const std::string data_print = data_fingerprint(d.train_rows);
  if (st.resume)
    if (const auto was = lrt::st::Reader::open(st.from.model_path()).meta("train_data"); was && *was != data_print)
      throw UsageError(
          fmt::format("on --resume the run is the checkpoint's: --data '{}' is not the text it was "
                      "trained on (its training rows: {}; the checkpoint's: {}); give that --data, or "
                      "start a new run in another --out",
                      st.data_path, data_print, *was));

  const lrt::ModelConfig& cfg = st.cfg;
  const lrt::TrainOptions& o = st.o;
  const lrt::ScheduleOptions& sched_opts = st.sched_opts;
  const bool resume = st.resume;
  const lrt::CheckpointLocation& from = st.from;
  const std::unique_ptr<Session> session = make_session(pair, st.device, cfg, o.seed);
  Session& tr = *session;
  fmt::print("lrt-train: device {}\n", describe(st.device, tr));
  tr.start_training(d.train_rows, o, d.tok, sched_opts);
  tr.set_stop_source(&stop_signal());
  if (st.tune_split) tr.set_metadata("held_out", "tune");  // lrt-eval --split tune checks it
  tr.set_metadata("train_data", data_print);
  // The CPU's GEMM path (lrt, openblas or eigen), which a --resume takes again.
  if (st.device.device == DeviceKind::cpu) {
    tr.set_metadata("cpu_gemm", lrt::cpu::gemm_path_key(lrt::cpu::gemm_choice().path));
    tr.set_metadata("cpu_matmul", lrt::cpu::cpu_matmul_name());  // "fp32", or "bf16 (avx512_bf16)"
  }
  if (group != nullptr) {
    tr.set_group(group, {{"arguments", program_arguments()}});
    fmt::print("data-parallel: {} ranks ({}), {} rows each per step, micro-batches of {} rows\n", group->size(),
               group->name(), o.batch_rows / group->size(), tr.train_options().micro_rows);
  }
  if (resume) {
    tr.resume(from.dir);
    fmt::print("resumed from {} at step {} of {}\n", from.dir, tr.step(), tr.horizon());
  }
  const std::string opts_text = describe(sched_opts).empty() ? "" : " (" + describe(sched_opts) + ")";
  fmt::print(
      "model: {} with {}{}: L={} d={} H={} T={} params {} (matmul {}), {:.3g} FLOP/token-forward; {} tokens/step "
      "({} x {} rows), {:.4g} token-forwards/step\n",
      display_name(pair.structure), pair.schedule, opts_text, cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.sequence_len,
      tr.num_params(), tr.num_matmul_params(), tr.flops_per_token(), tr.tokens_per_step(), tr.accumulation(),
      tr.train_options().micro_rows, tr.forwards_per_step());
  fmt::print("config: {}\n", describe_config(cfg));

  TimeReplan replan;
  const std::int64_t eval_every = plan_horizon(pair, a, st, d, tr, now, group, replan);
  RunLog log;
  open_run_log(pair, log, a, st, tr, root);
  if (st.resume && st.modes == 0) replan.spent_before = log.seconds_before;  // the deadline goes on
  const LoopEnd end = train_loop(pair, a, st, d, tr, out_dir, log, eval_every, now, root, replan, group);
  if (end.stop != 0) return 128 + end.stop;
  return report_run(pair, st, d, tr, log, end, replan, now, group);
}

/// lrt-eval --core DIR: CORE on a bundle (lrt::eval::evaluate_core), prompts never cropped,
/// scored in --mode parallel (the memory at zero, as the release scores: the default),
/// sequential (the exact recurrence, as the LRT runs when deployed) or both (the two columns and
/// their difference per task). A table per task (or one JSON object), a progress line with an
/// ETA on stderr, and with --examples FILE each example's outcome as tab-separated lines.
inline int core_run(const Entry& pair, const Args& a, const lrt::st::Reader& r, const lrt::ModelConfig& cfg) {
  const std::string mode = a.str("mode").empty() ? "parallel" : a.str("mode");
  if (mode != "parallel" && mode != "sequential" && mode != "both")
    throw UsageError(fmt::format("--mode with --core must be parallel, sequential or both, got '{}'", mode));
  for (const char* f : {"data", "split", "eval-tokens", "eval-bytes", "context", "sinks", "batch-rows"})
    if (a.has(f)) throw UsageError(fmt::format("--{} is for bits per byte; --core takes none", f));
  const std::string dir = a.str("core");
  tool::require_path(dir, "--core");
  lrt::eval::CoreOptions o;
  o.max_per_task = a.integer("max-per-task", -1, 1LL << 40);
  if (o.max_per_task == 0) throw UsageError("--max-per-task must be >= 1 (or -1: every item)");
  if (a.has("tasks")) o.tasks = a.items("tasks");
  const bool json = a.has("json");
  lrt::dist::Group* group = dist_group();  // under mpirun: each rank scores every N-th example
  if (group != nullptr && group->size() > 1) o.shards = group->size(), o.shard = group->rank();
  const bool root = group == nullptr || group->is_root();
  const auto bundle = lrt::eval::CoreBundle::open(dir);
  const lrt::data::TextTokenizer tok = checkpoint_tokenizer(a, r, cfg);
  const DeviceChoice device = device_choice(a);
  const std::unique_ptr<Session> model = make_session(pair, device, cfg);
  model->load(r);
  const char* parallel_text = "parallel (the memory at zero, as the release scores)";
  const char* sequential_text = pair.recurrent() ? "sequential (the exact recurrence, token by token)"
                                                 : "sequential (a model without memory: the same as parallel)";
  const std::string mode_text = mode == "parallel"     ? parallel_text
                                : mode == "sequential" ? sequential_text
                                                       : fmt::format("both: {}; {}", parallel_text, sequential_text);
  if (!json)
    fmt::print(
        "checkpoint {} (step {}): {} with {}, L={} d={} T={}\ntokenizer: {}\nCORE bundle {}: {} tasks{}\nmode: "
        "{}\ndevice: {}{}\n",
        a.str("checkpoint"), lrt::read_step(r), display_name(pair.structure), pair.schedule, cfg.n_layer, cfg.n_embd,
        cfg.sequence_len, tok.describe(), dir, o.tasks.empty() ? bundle.tasks().size() : o.tasks.size(),
        o.max_per_task > 0 ? fmt::format(", at most {} items each", o.max_per_task) : std::string(), mode_text,
        describe(device, *model),
        o.shards > 1 ? fmt::format(" x {} ranks ({}), the examples spread over them", o.shards, group->name()) : "");
  std::fflush(stdout);
  const auto run = [&](bool sequential) {
    const auto t0 = std::chrono::steady_clock::now();
    double last = 0;
    const char* label = mode == "both" ? (sequential ? " (sequential)" : " (parallel)") : "";
    const auto progress = [&](const lrt::eval::CoreProgress& p) {
      if (!root) return;  // rank 0 reports, its own share
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (p.done != p.total && el - last < 5) return;
      last = el;
      const double rate = static_cast<double>(p.done) / std::max(el, 1e-9);
      std::fprintf(stderr, "core%s: %lld/%lld examples (%.0f%%), task %zu/%zu %s, %.1f examples/s, ETA %s\n", label,
                   static_cast<long long>(p.done), static_cast<long long>(p.total),
                   100.0 * static_cast<double>(p.done) / static_cast<double>(p.total), p.task + 1, p.tasks,
                   p.label.c_str(), rate,
                   tool::duration(static_cast<double>(p.total - p.done) / std::max(rate, 1e-9)).c_str());
    };
    lrt::eval::CoreReport rep = session_core(*model, sequential, bundle, o, tok, progress);
    if (o.shards == 1) return rep;
    // every rank's examples to every rank, in rank order, then one report
    const std::vector<std::string> all = group->exchange(core_shard_text(rep), "the CORE examples of each rank");
    std::vector<lrt::eval::CoreReport> shards;
    for (const std::string& text : all) shards.push_back(core_shard_from_text(text, rep));
    return lrt::eval::merge_core(shards);
  };
  std::vector<std::pair<std::string, lrt::eval::CoreReport>> reps;  // (mode, report)
  if (mode != "sequential") reps.emplace_back("parallel", run(false));
  if (mode != "parallel") reps.emplace_back("sequential", run(true));
  if (a.has("examples") && root) {
    std::string out = "# mode\ttask\tidx\tline\tcorrect\tpredicted\tmargin\toption_losses\n";
    for (const auto& [name, rep] : reps)
      for (const auto& t : rep.tasks)
        for (std::size_t i = 0; i < t.per_example.size(); ++i) {
          const auto& e = t.per_example[i];
          std::string losses;
          for (double l : e.option_losses) losses += fmt::format("{}{:.9g}", losses.empty() ? "" : ",", l);
          out += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{:.9g}\t{}\n", name, t.task.label, i, e.line, e.correct ? 1 : 0,
                             e.predicted, e.margin, losses);
        }
    lrt::write_file_atomic(a.str("examples"), out);
  }
  // One mode's JSON: per task, the release's results / centered_results, core_metric.
  const auto mode_json = [](const lrt::eval::CoreReport& rep) {
    lrt::json::Value j = lrt::json::Value::object(), tasks = lrt::json::Value::object();
    lrt::json::Value results = lrt::json::Value::object(), centered = lrt::json::Value::object();
    for (const auto& t : rep.tasks) {
      lrt::json::Value x = lrt::json::Value::object();
      x["type"] = to_string(t.task.type), x["num_fewshot"] = t.task.num_fewshot, x["examples"] = t.examples;
      x["accuracy"] = t.accuracy, x["centered"] = t.centered, x["random_baseline"] = t.task.random_baseline;
      x["seconds"] = t.seconds;
      tasks[t.task.label] = std::move(x);
      results[t.task.label] = t.accuracy, centered[t.task.label] = t.centered;
    }
    j["tasks"] = std::move(tasks), j["results"] = std::move(results), j["centered_results"] = std::move(centered);
    j["core_metric"] = rep.core_metric;
    return j;
  };
  lrt::json::Value j = lrt::json::Value::object();
  j["checkpoint"] = a.str("checkpoint"), j["step"] = lrt::read_step(r), j["variant"] = display_name(pair.structure);
  j["schedule"] = pair.schedule, j["mode"] = mode, j["bundle"] = dir, j["tokenizer"] = tok.name();
  j["max_per_task"] = o.max_per_task, j["device"] = to_string(device.device);
  if (reps.size() == 1) {
    const lrt::json::Value one = mode_json(reps[0].second);
    for (const auto& [k, v] : one.members()) j[k] = v;
    if (!json) {
      fmt::print("{:<32} {:<17} {:>5} {:>8} {:>9} {:>9} {:>8}\n", "task", "type", "shots", "examples", "accuracy",
                 "centered", "seconds");
      for (const auto& t : reps[0].second.tasks)
        fmt::print("{:<32} {:<17} {:>5} {:>8} {:>9.4f} {:>9.4f} {:>8.1f}\n", t.task.label, to_string(t.task.type),
                   t.task.num_fewshot, t.examples, t.accuracy, t.centered, t.seconds);
    }
  } else {
    const auto& par = reps[0].second;
    const auto& seq = reps[1].second;
    j["parallel"] = mode_json(par), j["sequential"] = mode_json(seq);
    j["core_metric_difference"] = seq.core_metric - par.core_metric;
    if (!json) {
      fmt::print("{:<32} {:<17} {:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "task", "type", "shots", "examples",
                 "acc par", "acc seq", "seq-par", "cent par", "cent seq");
      for (std::size_t i = 0; i < par.tasks.size(); ++i) {
        const auto &p = par.tasks[i], &q = seq.tasks[i];
        fmt::print("{:<32} {:<17} {:>5} {:>8} {:>9.4f} {:>9.4f} {:>+9.4f} {:>9.4f} {:>9.4f}\n", p.task.label,
                   to_string(p.task.type), p.task.num_fewshot, p.examples, p.accuracy, q.accuracy,
                   q.accuracy - p.accuracy, p.centered, q.centered);
      }
    }
  }
  if (json)
    fmt::print("{}\n", j.dump());
  else if (reps.size() == 1)
    fmt::print("core_metric: {:.6f}\n", reps[0].second.core_metric);
  else
    fmt::print("core_metric_parallel: {:.6f}\ncore_metric_sequential: {:.6f}\ncore_metric_difference: {:+.6f}\n",
               reps[0].second.core_metric, reps[1].second.core_metric,
               reps[1].second.core_metric - reps[0].second.core_metric);
  return 0;
}

/// lrt-eval: bits per byte of a checkpoint (both modes for LRT models); the parallel mode runs
/// the schedule with the checkpoint's options `so` (kv_refresh, MultiRefine's loss weights).
inline int eval_run(const Entry& pair, const Args& a, const lrt::st::Reader& r, const lrt::ModelConfig& cfg,
                    const lrt::ScheduleOptions& so) {
  pair.check_options(so);
  if (a.has("core")) return core_run(pair, a, r, cfg);
  if (dist_group() != nullptr && dist_group()->size() > 1)
    throw UsageError(
        "under mpirun lrt-eval spreads --core's examples over the ranks; bits per byte (--data) run in "
        "one process");
  for (const char* f : {"max-per-task", "tasks", "examples"})
    if (a.has(f)) throw UsageError(fmt::format("--{} goes with --core DIR", f));
  if (!a.has("data")) throw UsageError("missing required option '--data' (or --core DIR for CORE)");
  const long long eval_tokens = a.integer("eval-tokens", 1, 1LL << 40);
  const int B = static_cast<int>(a.integer("batch-rows", 1, 1 << 16));
  const std::string mode = a.str("mode"), split = a.str("split");
  if (!mode.empty() && mode != "sequential" && mode != "parallel")
    throw UsageError(fmt::format("--mode must be sequential or parallel, got '{}'", mode));
  if (split != "val" && split != "all" && split != "tune" && split != "train")
    throw UsageError(fmt::format("--split must be val, tune, train or all, got '{}'", split));
  if (split == "tune" && r.meta("held_out") != std::optional<std::string>("tune"))
    throw UsageError(
        fmt::format("--split tune: '{}' was trained on the tuning slice (lrt-train --tune-split holds "
                    "it out); score it on val or all",
                    a.str("checkpoint")));
  const bool json = a.has("json");
  const lrt::data::TextTokenizer tok = checkpoint_tokenizer(a, r, cfg);
  const lrt::TokenBytes token_bytes = tok.token_bytes_table(cfg.vocab_size);
  const long long eval_bytes = a.integer("eval-bytes", 0, 1LL << 40);
  const DeviceChoice device = device_choice(a);
  const std::unique_ptr<Session> model = make_session(pair, device, cfg);
  model->load(r);
  // Rows of --context targets (default: the training context); past it the sequential mode also
  // reports bits per byte by position, in bands of sequence_len.
  const long long ctx = a.integer("context", 0, 1LL << 24);
  const int T = static_cast<int>(ctx > 0 ? ctx : cfg.sequence_len);
  const lrt::index_t sinks = a.integer("sinks", 0, 1LL << 20);
  const bool bands = T > cfg.sequence_len || sinks > 0;
  // val (tune, train): the validation split's (the tuning slice's, the training split's) packed
  // rows, as lrt-train evaluates; all: every byte of the text, each document cut into rows of T
  // targets, the last one padded (padding not scored). train is what the checkpoint trained on:
  // without the tuning slice when it held that out.
  auto corpus = split == "all" ? lrt::data::load_documents(a.str("data")) : lrt::data::load_corpus(a.str("data"));
  const bool held_tune = r.meta("held_out") == std::optional<std::string>("tune");
  if (split == "tune" || (split == "train" && held_tune)) lrt::data::hold_out_tuning(corpus);
  const std::vector<lrt::data::Document>& docs = split == "tune"    ? corpus.tune
                                                 : split == "train" ? corpus.train
                                                                    : corpus.val;
  const char* label = split == "all"     ? "all of it"
                      : split == "tune"  ? "tuning slice"
                      : split == "train" ? "training split"
                                         : "validation";
  std::vector<lrt::data::Batch> batches;
  std::string available;
  if (eval_bytes > 0) {  // the first N bytes of the split's text, every token scored: the same bytes for any tokenizer
    batches = lrt::data::scoring_batches(docs, T, B, std::numeric_limits<lrt::index_t>::max(), tok,
                                         static_cast<std::size_t>(eval_bytes));
    available = fmt::format("{}: the first {} of {} bytes", label,
                            std::min<std::size_t>(static_cast<std::size_t>(eval_bytes), lrt::data::text_bytes(docs)),
                            lrt::data::text_bytes(docs));
  } else if (split == "all") {
    batches = lrt::data::scoring_batches(docs, T, B, eval_tokens, tok);
    available = fmt::format("{}: {} docs, {} bytes", label, docs.size(), lrt::data::text_bytes(docs));
  } else {
    const auto rows = lrt::data::TokenRows::build(docs, T, tok);
    batches = lrt::data::validation_batches(rows, B, eval_tokens);
    available = fmt::format("{}: {} docs, {} rows available", label, docs.size(), rows.rows());
  }
  const std::string opts_text = describe(so).empty() ? "" : " (" + describe(so) + ")";
  if (!json)
    fmt::print("checkpoint {} (step {}): {} with {}{}, L={} d={} T={}; {}{}\ntokenizer: {}\n", a.str("checkpoint"),
               lrt::read_step(r), display_name(pair.structure), pair.schedule, opts_text, cfg.n_layer, cfg.n_embd,
               cfg.sequence_len, available,
               T != cfg.sequence_len ? fmt::format("; rows of {} targets", T) : std::string(), tok.describe());
  const lrt::WeightInfo weights = lrt::weight_info(r);
  if (!json && weights.format != lrt::WeightFormat::F32)
    fmt::print("weights: {}{} (lrt-quantize), evaluated as the float values they stand for\n",
               to_string(weights.format),
               weights.group > 0 ? fmt::format(" in groups of {}", weights.group) : std::string());
  if (!json) fmt::print("device: {}\n", describe(device, *model));
  const auto par = model->evaluate_parallel(batches, token_bytes, so);
  lrt::json::Value j = lrt::json::Value::object();
  j["checkpoint"] = a.str("checkpoint"), j["step"] = lrt::read_step(r), j["variant"] = display_name(pair.structure);
  j["schedule"] = pair.schedule, j["split"] = split, j["data"] = a.str("data");
  j["device"] = to_string(device.device), j["precision"] = to_string(device.precision);
  j["tokenizer"] = tok.name(), j["weights"] = std::string(to_string(weights.format));
  j["targets"] = par.merged.tokens, j["bytes"] = par.merged.bytes, j["val_loss"] = par.merged.loss();
  if (!json)
    fmt::print("targets scored: {} ({} bytes), val loss {:.6f} nats/token (parallel)\n", par.merged.tokens,
               par.merged.bytes, par.merged.loss());
  double bpb = par.merged.bpb();
  if (pair.recurrent()) {
    std::string per;
    lrt::json::Value passes = lrt::json::Value::array();
    for (std::size_t i = 0; i < par.passes.size(); ++i) {
      per += fmt::format(" pass{}={:.6f}", i, par.passes[i].bpb());
      passes.push_back(par.passes[i].bpb());
    }
    const auto seq = model->evaluate_sequential(batches, token_bytes);
    if (mode != "parallel") bpb = seq.bpb();
    j["val_bpb_parallel"] = par.merged.bpb(), j["val_bpb_passes"] = std::move(passes);
    j["val_bpb_sequential"] = seq.bpb(), j["mode"] = mode.empty() ? "sequential" : mode;
    if (!json) {
      fmt::print("val_bpb_parallel: {:.6f} ({})\n", par.merged.bpb(), per.substr(1));
      fmt::print("val_bpb_sequential: {:.6f}\n", seq.bpb());
    }
  }
  if (bands) {  // past the training context (or with sinks): the decoder, by position
    const auto by = model->evaluate_sequential_by_position(batches, token_bytes, cfg.sequence_len, sinks);
    lrt::json::Value arr = lrt::json::Value::array();
    std::string line;
    for (std::size_t i = 0; i < by.size(); ++i) {
      arr.push_back(by[i].bpb());
      line += fmt::format(" [{},{}) {:.6f}", static_cast<long long>(i) * cfg.sequence_len,
                          static_cast<long long>(i + 1) * cfg.sequence_len, by[i].bpb());
    }
    j["context"] = T, j["sinks"] = sinks, j["band"] = cfg.sequence_len, j["val_bpb_by_position"] = std::move(arr);
    if (!json)
      fmt::print("val_bpb by position (sequential{}):{}\n", sinks > 0 ? fmt::format(", {} sinks", sinks) : "", line);
  }
  j["val_bpb"] = bpb;
  if (json)
    fmt::print("{}\n", j.dump());
  else
    fmt::print("val_bpb: {:.6f}\n", bpb);
  return 0;
}

/// lrt-generate's --prefill: exact, zero, interleaved:S, fixed-point or approximate:TOL (a usage error naming
/// the option otherwise).
inline lrt::PrefillMode prefill_mode(const Args& a) {
  try {
    return lrt::PrefillMode::parse(a.str("prefill"));
  } catch (const lrt::Error&) {
    throw UsageError(
        fmt::format("--prefill expects exact, zero, interleaved:S (S >= 1), fixed-point or approximate:TOL (TOL > 0), "
                    "got '{}'",
                    a.str("prefill")));
  }
}

/// lrt-generate: the prompt fed per --prefill (spec §6), then one decode step per new token.
inline int generate_run(const Entry& pair, const Args& a, const lrt::st::Reader& r, const lrt::ModelConfig& cfg) {
  std::string text = a.str("prompt");
  if (a.has("prompt-file")) {
    const std::string f = a.str("prompt-file");
    if (f == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      lrt::check(!std::cin.bad(), "generate", "error while reading the prompt from standard input");
    } else {
      tool::require_path(f, "--prompt-file");
      text = lrt::read_file(f, "prompt");
    }
  }
  lrt::SamplerOptions so;
  so.temperature = a.number("temperature", 0, 1e6);
  so.top_k = a.integer("top-k", 0, 1LL << 30);
  so.top_p = a.number("top-p", 1e-9, 1);
  so.seed = static_cast<std::uint64_t>(a.integer("seed", 0, 1LL << 62));
  const lrt::PrefillMode mode = prefill_mode(a);
  const lrt::data::TextTokenizer tok = checkpoint_tokenizer(a, r, cfg);
  const DeviceChoice device = device_choice(a);
  const std::unique_ptr<Session> model = make_session(pair, device, cfg);
  model->load(r);
  std::vector<lrt::index_t> prompt{cfg.bos()};
  for (auto id : tok.encode(text)) prompt.push_back(static_cast<lrt::index_t>(id));
  // No length wall: the decoder's cache keeps what each layer's window reaches, so prompt and
  // generation may run past the training context (sequence_len).
  const bool fill = a.str("max-new-tokens") == "auto";
  const long long n_new = fill ? cfg.sequence_len : a.integer("max-new-tokens", 0, 1LL << 30);
  // Fixed-point prefill: up to ceil(P / mem_offset) whole-prompt passes, O(P^2) in all; past a
  // few thousand tokens that is minutes where exact prefill (the same bits) takes seconds.
  if (mode.kind == lrt::PrefillMode::Kind::FixedPoint && prompt.size() > 2048)
    std::fprintf(
        stderr,
        "warning: --prefill fixed-point on a prompt of %zu tokens: up to %lld whole-prompt passes (the cost "
        "grows as the prompt's length squared); --prefill exact gives the same bits in one pass per token\n",
        prompt.size(),
        static_cast<long long>((static_cast<lrt::index_t>(prompt.size()) + cfg.mem_offset - 1) / cfg.mem_offset));
  model->start_decoding(a.integer("sinks", 0, 1LL << 20));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  model->prefill(prompt, mode);  // the logits after the last prompt token
  for (long long i = 0; i < n_new; ++i) {
    const lrt::index_t next = model->sample(so);  // counter sample_counter(0, position)
    if (next == cfg.bos()) {
      if (a.has("stop-at-bos")) break;
      std::fputs("\n\n", stdout);
    } else if (next < tok.vocab_size()) {  // a token's bytes (a special's text); ids past the vocabulary print nothing
      const std::string bytes = tok.token_text(static_cast<lrt::data::token_t>(next));
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    }
    std::fflush(stdout);
    if (i + 1 < n_new) model->step(next);
  }
  std::fputc('\n', stdout);
  return 0;
}

/// Registers the pair (V, Sched) under its --variant name (static initialisation in a registry
/// TU: LRT_TOOL_PAIR, registry.hpp): its CPU session and what the bodies ask of its types.
template <class V, class Sched>
struct Register {
  explicit Register(std::string variant) {
    registry().push_back({std::move(variant), lrt::schedule_spec<Sched>(), lrt::structure_of<V>(),
                          &make_cpu_session<V, Sched>,
                          [](const lrt::ScheduleOptions& o) { lrt::check_schedule_options<Sched, V>(o); },
                          [](const lrt::ModelConfig& c, std::string_view schedule, const lrt::ScheduleOptions& o) {
                            return lrt::release_config_json<V>(c, schedule, o);
                          },
                          [](const lrt::ModelConfig& c) { return lrt::lrt_config_json<V>(c); }});
  }
};

}  // namespace tool
