// lrt-ablate: runs an ablation grid (arms x compute budgets x seeds) with lrt-train and lrt-eval
// as subprocesses, N at a time; resumable (a run with a result.json is done, one with a
// checkpoint resumes); writes results.csv, results.md, bpb_vs_compute.svg and passes.svg.
//   lrt-ablate grid.txt --jobs 2            (grid.txt: "variants baseline lrt", "budgets 1e5 2e5", "seeds 0")
// The grid format and the expansion are in examples/tools/ablate_util.hpp and the usage below.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <lrt/io/file.hpp>
#include <lrt/io/json.hpp>

#include "ablate_util.hpp"
#include "tool_util.hpp"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

const char* summary_text =
    "Runs an ablation grid with lrt-train and lrt-eval, N runs at a time, and tabulates and plots the results.\n\n"
    "GRID is a text file, one key and its values per line ('#' comments, \"...\" groups words):\n"
    "  variants baseline lrt kv            arms: the variants, each with its default schedule\n"
    "  schedules interleaved:2 chunked:2   crossed with the variants (pairs the build lacks are skipped)\n"
    "  options \"\" \"--mem-offset 2\"         lrt-train option sets crossed in (\"\": none)\n"
    "  arm NAME --variant lrt --n-layer 4  an arm of its own: a name, then lrt-train flags (--lr-scale F too,\n"
    "                                      where no lr-sweep line is)\n"
    "  budgets 2e5 1e6 5e6                 token-forwards per run (lrt-train --budget-forwards)\n"
    "  seeds 0 1 2                         (default 0)\n"
    "  train --preset tiny                 flags of every lrt-train run\n"
    "  eval --eval-tokens 65536            flags of every lrt-eval run\n"
    "  train-gap 308684                    also score each run on its training split's first N bytes\n"
    "                                      (lrt-eval --split train); results.md shows val - train\n"
    "  core DIR --mode sequential          also score each run on the CORE bundle DIR (lrt-eval --core; relative:\n"
    "                                      to the grid file's folder); --mode parallel (default) or sequential,\n"
    "                                      --max-per-task K, --tasks A,B; results.md and core_vs_compute.svg\n"
    "  lr-sweep 0.5 1 2                    each arm at lrt-train --lr-scale F; reported at its best F\n"
    "  pair lrt baseline 0.5               also run baseline at 0.5 x each budget, same seeds; results.md splits\n"
    "                                      lrt's gap to baseline into matched tokens (g) and data (delta), pairs.svg\n"
    "  baseline baseline                   the arm differences are taken to (default: 'baseline', else the first)\n"
    "  data PATH                           the text (relative: to the grid file's folder)\n"
    "Runs (smallest budget first, then seed, arm) go to OUT/runs/<arm>/f<budget>/s<seed>[/lr<F>]: one with a\n"
    "result.json is done, one with a checkpoint resumes. The results go to OUT/results.csv, results.md,\n"
    "bpb_vs_compute.svg, passes.svg (and pairs.svg, core_vs_compute.svg), rewritten after every finished run.";

// ---------------------------------------------------------------------------------------------
// Processes

/// The signal mask lrt-ablate started with. The scheduler blocks SIGCHLD, SIGINT and SIGTERM to
/// wait for them with sigwaitinfo; a mask survives exec, so every child gets this one back.
sigset_t& original_mask() {
  static sigset_t m;
  return m;
}

/// In a forked child: the original signal mask, then exec (status 127 when that fails).
[[noreturn]] void exec_child(const std::vector<std::string>& argv) {
  ::sigprocmask(SIG_SETMASK, &original_mask(), nullptr);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  std::fprintf(stderr, "lrt-ablate: cannot run '%s': %s\n", args[0], std::strerror(errno));
  ::_exit(127);
}

/// Opens a child's output file (close-on-exec: only the dup2'ed copies reach the child).
int open_output(const std::string& path, bool append) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0666);
  if (fd < 0) throw lrt::Error("lrt-ablate", "'" + path + "': cannot open: " + std::strerror(errno));
  return fd;
}

/// Starts argv with stdin from /dev/null and stdout, stderr on the given descriptors (-1: ours).
pid_t spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  std::fflush(stdout), std::fflush(stderr);  // else the child's copy of our buffers could be written twice
  const pid_t pid = ::fork();
  if (pid < 0) throw lrt::Error("lrt-ablate", std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    if (out_fd >= 0) ::dup2(out_fd, 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    exec_child(argv);
  }
  return pid;
}

/// waitpid for one child, through EINTR.
int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw lrt::Error("lrt-ablate", std::string("waitpid: ") + std::strerror(errno));
  return status;
}

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

/// "exited with status 1", "was killed by signal 9 (Killed)".
std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return "stopped";
}

/// A program's standard output (stderr passes through); an error unless it exits with 0.
std::string capture(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw lrt::Error("lrt-ablate", std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = spawn(argv, fds[1], -1);
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    const ::ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  const int status = wait_for(pid);
  if (!succeeded(status)) throw lrt::Error("lrt-ablate", fmt::format("'{}' {}", argv[0], describe_status(status)));
  return out;
}

/// A command line as a shell would take it back (for the logs and --dry-run).
std::string shell_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./:=+@,%") == std::string::npos;
    std::string q = "'";
    for (const char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    s += (s.empty() ? "" : " ") + (plain ? a : q + "'");
  }
  return s;
}

/// The last n non-empty lines of a file, indented, for a failure report.
std::string tail_lines(const std::string& path, std::size_t n) {
  std::string text;
  try {
    text = lrt::read_file(path, "log");
  } catch (const std::exception&) {
    return "    (no log)\n";
  }
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string line = text.substr(at, end - at);
    if (const std::size_t cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);  // a tty line
    if (!line.empty()) lines.push_back(line);
    at = end + 1;
  }
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += "    | " + lines[i] + "\n";
  return out.empty() ? "    (empty log)\n" : out;
}

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// ---------------------------------------------------------------------------------------------
// A run's outputs

lrt::json::Value number_or_null(double v) { return std::isfinite(v) ? lrt::json::Value(v) : lrt::json::Value(); }

/// What lrt-train reports of a run: RUNDIR/summary.json where it writes one, else its train.log's
/// "model: ... params P (matmul M)" and "done: N steps, T tokens, F token-forwards, X tokens/s" lines.
struct TrainInfo {
  lrt::json::Value steps, tokens, token_forwards, params, matmul_params, train_seconds;  // null: unknown
};

void from_summary(TrainInfo& t, const std::string& path) {
  if (!exists(path)) return;
  const lrt::json::Value j = lrt::json::parse(lrt::read_file(path, "summary"), path);
  const std::pair<const char*, lrt::json::Value*> keys[] = {{"steps", &t.steps},
                                                            {"tokens", &t.tokens},
                                                            {"token_forwards", &t.token_forwards},
                                                            {"params", &t.params},
                                                            {"matmul_params", &t.matmul_params},
                                                            {"train_seconds", &t.train_seconds}};
  for (const auto& [k, v] : keys)
    if (const lrt::json::Value* x = j.find(k); x != nullptr && x->is_number()) *v = *x;
}

/// The log's numbers. train_seconds is the last finished session's: (steps - the step it resumed
/// at) x tokens/step / tokens/s; a session killed before its "done" line is not counted.
void from_log(TrainInfo& t, const std::string& path) {
  std::string text;
  try {
    text = lrt::read_file(path, "log");
  } catch (const std::exception&) {
    return;
  }
  long long params = -1, matmul = -1, per_step = -1, resumed_at = 0, steps = -1, tokens = -1;
  double forwards = NAN, seconds = NAN;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.rfind("# lrt-ablate:", 0) == 0) resumed_at = 0;  // a new session
    if (line.rfind("resumed from ", 0) == 0) {
      if (const std::size_t k = line.find(" at step "); k != std::string::npos)
        resumed_at = std::atoll(line.c_str() + k + 9);
    } else if (line.rfind("model: ", 0) == 0) {
      if (const std::size_t k = line.find(" params "); k != std::string::npos)
        std::sscanf(line.c_str() + k, " params %lld (matmul %lld)", &params, &matmul);
      if (const std::size_t k = line.find(" tokens/step"); k != std::string::npos) {
        const std::size_t b = line.rfind(' ', k - 1);
        per_step = std::atoll(line.c_str() + (b == std::string::npos ? 0 : b + 1));
      }
    } else if (line.rfind("done: ", 0) == 0) {
      double tps = 0;
      if (std::sscanf(line.c_str(), "done: %lld steps, %lld tokens, %lf token-forwards, %lf tokens/s", &steps, &tokens,
                      &forwards, &tps) == 4 &&
          tps > 0 && per_step > 0)
        seconds = static_cast<double>(steps - resumed_at) * static_cast<double>(per_step) / tps;
    }
  }
  auto fill = [](lrt::json::Value& v, const lrt::json::Value& x) {
    if (v.is_null()) v = x;
  };
  if (steps >= 0) fill(t.steps, steps), fill(t.tokens, tokens), fill(t.token_forwards, number_or_null(forwards));
  if (params >= 0) fill(t.params, params), fill(t.matmul_params, matmul);
  fill(t.train_seconds, number_or_null(seconds));
}

TrainInfo train_info(const std::string& dir) {
  TrainInfo t;
  from_summary(t, dir + "/summary.json");
  from_log(t, dir + "/train.log");
  return t;
}

// ---------------------------------------------------------------------------------------------
// The grid's runs

enum class State { done, resume, start };

class Ablation {
 public:
  std::string grid_path, out, data, bin, after, title;
  std::string core;  // the core line's bundle folder, resolved ("" without one)
  ablate::Grid grid;
  std::vector<ablate::Arm> arms;
  std::vector<ablate::Run> runs;
  std::string baseline;
  std::size_t jobs = 2;

  /// done: result.json is there (and reads back); resume: a checkpoint is; start otherwise.
  State state(const ablate::Run& r) const {
    const std::string result = r.dir + "/result.json";
    if (exists(result)) {
      try {
        ablate::result_from_json(lrt::read_file(result, "result"), result);
        return State::done;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: %s does not read back (%s): the run is redone\n", result.c_str(), e.what());
      }
    }
    if (exists(r.dir + "/latest") || exists(r.dir + "/model.safetensors")) return State::resume;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(r.dir + "/checkpoints", ec))
      if (e.path().filename().string().rfind("step-", 0) == 0) return State::resume;
    return State::start;
  }

  std::vector<std::string> train_command(const ablate::Run& r, bool resume) const {
    std::vector<std::string> c{bin + "/lrt-train"};
    if (resume) {
      // The checkpoint records the pair, the model, the optimizer settings (the rates with a
      // swept --lr-scale already applied, which lrt-train refuses again on --resume) and the
      // horizon, not how the run evaluates or on which device: those flags go again.
      std::vector<std::string> given = grid.train_flags;
      given.insert(given.end(), arms[r.arm].flags.begin(), arms[r.arm].flags.end());
      const std::vector<std::string> again =
          ablate::pick_flags(given, {"eval-every", "eval-tokens", "eval-bytes", "seq-eval-every", "core", "core-every",
                                     "core-max-per-task", "core-mode", "device", "precision"});
      c.insert(c.end(), {"--resume", r.dir});
      c.insert(c.end(), again.begin(), again.end());
      c.insert(c.end(), {"--out", r.dir, "--data", data});
      return c;
    }
    // The grid's train flags first: an arm's own flags, later, win where both set one.
    c.insert(c.end(), grid.train_flags.begin(), grid.train_flags.end());
    c.insert(c.end(), arms[r.arm].flags.begin(), arms[r.arm].flags.end());
    c.insert(c.end(), {"--budget-forwards", ablate::shortest(r.budget), "--seed", std::to_string(r.seed)});
    if (r.lr) c.insert(c.end(), {"--lr-scale", ablate::shortest(*r.lr)});
    // The run's folder holds lrt-ablate's train.log, and what a try stopped before its first
    // checkpoint left: this run's own, so lrt-train may replace it (it names what it removes).
    c.insert(c.end(), {"--data", data, "--out", r.dir, "--force"});
    return c;
  }
  /// lrt-eval with the grid's eval flags; train: on the training split's first train-gap bytes
  /// instead of the eval line's split and amount.
  std::vector<std::string> eval_command(const ablate::Run& r, bool train = false) const {
    std::vector<std::string> c{bin + "/lrt-eval", "--checkpoint", r.dir, "--data", data, "--json"};
    if (!train) {
      c.insert(c.end(), grid.eval_flags.begin(), grid.eval_flags.end());
      return c;
    }
    const std::vector<std::string> others = ablate::drop_flags(grid.eval_flags, {"split", "eval-bytes", "eval-tokens"});
    c.insert(c.end(), others.begin(), others.end());
    c.insert(c.end(), {"--split", "train", "--eval-bytes", std::to_string(grid.train_gap_bytes)});
    return c;
  }

  /// lrt-eval --core on the grid's bundle with the core line's flags and the eval line's --device
  /// and --threads (its bits-per-byte flags do not apply).
  std::vector<std::string> core_command(const ablate::Run& r) const {
    std::vector<std::string> c{bin + "/lrt-eval", "--checkpoint", r.dir, "--core", core, "--json"};
    c.insert(c.end(), grid.core_flags.begin(), grid.core_flags.end());
    const std::vector<std::string> device = ablate::pick_flags(grid.eval_flags, {"device", "threads"});
    c.insert(c.end(), device.begin(), device.end());
    return c;
  }

  /// " (LRT_NUM_THREADS=1)": the threads of each child when several run at once.
  std::string threads_note() const {
    const char* t = std::getenv("LRT_NUM_THREADS");
    return jobs > 1 && t != nullptr ? fmt::format(" (LRT_NUM_THREADS={})", t) : "";
  }

  std::string tag(std::size_t i) const { return fmt::format("[{}/{}]", i + 1, runs.size()); }

  /// Prints the run list with each run's state (--dry-run).
  void print_plan(const std::vector<State>& states) const {
    print_counts(states);
    for (const ablate::Arm& a : arms)
      fmt::print("arm {}{}: lrt-train {}\n", a.name,
                 a.name == baseline && a.name != "baseline" ? " (the baseline)" : "", shell_line(a.flags));
    if (!grid.train_flags.empty()) fmt::print("every lrt-train run: {}\n", shell_line(grid.train_flags));
    if (!grid.eval_flags.empty()) fmt::print("every lrt-eval run: {}\n", shell_line(grid.eval_flags));
    if (!core.empty() && !runs.empty()) fmt::print("every run's CORE: {}\n", shell_line(core_command(runs[0])));
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const State s = states[i];
      fmt::print("{} {}: {}\n", tag(i), runs[i].label(arms),
                 s == State::done     ? "done"
                 : s == State::resume ? "to resume"
                                      : "to start");
      if (s != State::done) fmt::print("    {}\n", shell_line(train_command(runs[i], s == State::resume)));
    }
  }

  std::vector<State> states() const {
    std::vector<State> s;
    for (const ablate::Run& r : runs) s.push_back(state(r));
    return s;
  }

  /// The runs the pair lines add (the base arms' at the pairs' budgets that no grid budget gives).
  std::size_t paired_runs() const {
    return runs.size() -
           arms.size() * grid.budgets.size() * grid.seeds.size() * std::max<std::size_t>(1, grid.lr_scales.size());
  }

  /// The first line: how many runs, and how many are done, to resume and to start.
  void print_counts(const std::vector<State>& states) const {
    const auto count = [&](State s) { return std::count(states.begin(), states.end(), s); };
    fmt::print(
        "lrt-ablate: {} runs ({} arms x {} budgets x {} seeds{}{}): {} done, {} to resume, {} to start; {} at a "
        "time{}\n",
        runs.size(), arms.size(), grid.budgets.size(), grid.seeds.size(),
        grid.lr_scales.empty() ? "" : fmt::format(" x {} lr scales", grid.lr_scales.size()),
        paired_runs() == 0 ? "" : fmt::format(", + {} for the pairs", paired_runs()), count(State::done),
        count(State::resume), count(State::start), jobs, threads_note());
  }

  /// Reads every finished run of the grid and rewrites the results (atomically, each file).
  void write_results() const {
    std::vector<ablate::Result> results;
    for (const ablate::Run& r : runs) {
      const std::string path = r.dir + "/result.json";
      if (!exists(path)) continue;
      try {
        results.push_back(ablate::result_from_json(lrt::read_file(path, "result"), path));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: %s left out of the results: %s\n", path.c_str(), e.what());
      }
    }
    const ablate::Results res(arms, grid.budgets, baseline, std::move(results));
    lrt::ensure_directory(out);
    lrt::write_file_atomic(out + "/results.csv", ablate::results_csv(res));
    lrt::write_file_atomic(out + "/results.md", ablate::results_md(res, title, grid_path, data, runs.size(),
                                                                   grid.seeds.size(), grid.pairs, grid.eval_flags));
    lrt::write_file_atomic(out + "/bpb_vs_compute.svg", ablate::bpb_svg(res, title));
    lrt::write_file_atomic(out + "/passes.svg", ablate::passes_svg(res, title));
    if (!grid.pairs.empty()) lrt::write_file_atomic(out + "/pairs.svg", ablate::pairs_svg(res, grid.pairs, title));
    if (!core.empty()) lrt::write_file_atomic(out + "/core_vs_compute.svg", ablate::core_svg(res, title));
  }

  /// Runs the runs that are not done, `jobs` at a time. Returns the exit status.
  int run_all() {
    const std::vector<State> states = this->states();
    std::vector<std::size_t> todo;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (states[i] != State::done) todo.push_back(i);
    const std::size_t done = runs.size() - todo.size();
    print_counts(states);
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (states[i] == State::done)
        fmt::print("{} {}: done already (result.json), skipped\n", tag(i), runs[i].label(arms));
    if (todo.empty()) {
      write_results();
      fmt::print("lrt-ablate: all {} runs are done; nothing to run. Results: {}/results.md\n", runs.size(), out);
      return 0;
    }
    const Outcome o = schedule(todo, states);
    try {
      write_results();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: writing the results: %s\n", e.what());
      return 1;
    }
    if (o.stop_signal != 0) {
      fmt::print("lrt-ablate: stopped by {}: {} runs finished now, {} stopped (a rerun resumes them), {} not started\n",
                 signal_name(o.stop_signal), o.finished, o.stopped, todo.size() - o.started);
      return 128 + o.stop_signal;
    }
    fmt::print("lrt-ablate: {} of {} runs done ({} now){}. Results: {}/results.md\n", done + o.finished, runs.size(),
               o.finished, o.failed > 0 ? fmt::format(", {} FAILED", o.failed) : "", out);
    return o.failed > 0 ? 1 : 0;
  }

 private:
  enum class Stage { train, eval, eval_train, core };
  struct Job {
    std::size_t run;
    pid_t pid;
    Stage stage;
    Clock::time_point start;
  };
  struct Outcome {
    std::size_t started = 0, finished = 0, failed = 0, stopped = 0;
    int stop_signal = 0;
  };

  Job start_train(std::size_t i, bool resume) const {
    const ablate::Run& r = runs[i];
    lrt::ensure_directory(r.dir);
    const std::vector<std::string> cmd = train_command(r, resume);
    const int fd = open_output(r.dir + "/train.log", resume);  // a resume appends to the log
    const std::string head = "# lrt-ablate: " + shell_line(cmd) + "\n";
    const bool wrote = ::write(fd, head.data(), head.size()) == static_cast<::ssize_t>(head.size());
    const pid_t pid = spawn(cmd, fd, fd);
    ::close(fd);
    fmt::print("{} start {}{}\n", tag(i), r.label(arms), resume ? " (resume)" : "");
    if (!wrote) std::fprintf(stderr, "warning: %s/train.log: cannot write\n", r.dir.c_str());
    return {i, pid, Stage::train, Clock::now()};
  }

  /// The file names (without .json / .log) of a stage's lrt-eval.
  static const char* eval_name(Stage stage) {
    return stage == Stage::eval_train ? "/eval-train" : stage == Stage::core ? "/core" : "/eval";
  }

  /// The next lrt-eval of job j: on the eval line's split (eval.json), on the training split
  /// (eval-train.json), or on CORE (core.json).
  void start_eval(Job& j, Stage stage) const {
    const ablate::Run& r = runs[j.run];
    const std::string name = eval_name(stage);
    const int out_fd = open_output(r.dir + name + ".json", false);
    int err_fd = -1;
    try {
      err_fd = open_output(r.dir + name + ".log", false);
    } catch (...) {
      ::close(out_fd);
      throw;
    }
    j.pid = spawn(stage == Stage::core ? core_command(r) : eval_command(r, stage == Stage::eval_train), out_fd, err_fd);
    j.stage = stage;
    ::close(out_fd), ::close(err_fd);
  }

  /// The run's --lr-scale: the sweep's, else its arm's own, else 1.
  double lr_scale(const ablate::Run& r) const {
    if (r.lr) return *r.lr;
    const auto f = ablate::flag_value(arms[r.arm].flags, "lr-scale");
    return f ? tool::parse_finite(*f).value_or(1.0) : 1.0;
  }

  /// eval.json and the training numbers -> RUNDIR/result.json (written last: the done marker).
  lrt::json::Value finalize(const ablate::Run& r) const {
    const std::string eval_path = r.dir + "/eval.json";
    const lrt::json::Value e = lrt::json::parse(lrt::read_file(eval_path, "eval"), eval_path);
    const TrainInfo t = train_info(r.dir);
    const lrt::json::Value* passes = e.find("val_bpb_passes");
    const bool recurrent = passes != nullptr && passes->is_array();
    auto field = [&](const char* k) { return e.find(k) != nullptr ? *e.find(k) : lrt::json::Value(); };
    lrt::json::Value j = lrt::json::Value::object();
    j["arm"] = arms[r.arm].name, j["variant"] = field("variant"), j["schedule"] = field("schedule");
    j["budget"] = ablate::budget_value(r.budget), j["seed"] = r.seed, j["lr_scale"] = lr_scale(r);
    j["steps"] = t.steps, j["tokens"] = t.tokens, j["token_forwards"] = t.token_forwards;
    j["params"] = t.params, j["matmul_params"] = t.matmul_params;
    j["tokens_per_param"] = t.tokens.is_number() && t.matmul_params.is_number() && t.matmul_params.as_number() > 0
                                ? lrt::json::Value(t.tokens.as_number() / t.matmul_params.as_number())
                                : lrt::json::Value();
    j["train_seconds"] = t.train_seconds;
    j["val_bpb"] = e.at("val_bpb").as_number();
    j["val_bpb_parallel"] = field("val_bpb_parallel"), j["val_bpb_sequential"] = field("val_bpb_sequential");
    j["val_bpb_passes"] = recurrent ? *passes : lrt::json::Value::array();
    j["recurrent"] = recurrent;
    if (grid.train_gap_bytes > 0) {
      const std::string train_path = r.dir + "/eval-train.json";
      j["train_bpb"] = lrt::json::parse(lrt::read_file(train_path, "eval"), train_path).at("val_bpb").as_number();
    }
    if (!core.empty()) {
      const std::string core_path = r.dir + "/core.json";
      const lrt::json::Value c = lrt::json::parse(lrt::read_file(core_path, "CORE"), core_path);
      j["core"] = c.at("core_metric").as_number();
      j["core_mode"] = c.at("mode").as_string();
    }
    j["run_dir"] = fs::path(r.dir).lexically_relative(out).generic_string();
    if (t.tokens.is_null())
      std::fprintf(stderr, "warning: %s: no summary.json and no 'done:' line in train.log: steps and tokens unknown\n",
                   r.dir.c_str());
    lrt::write_file_atomic(r.dir + "/result.json", j.dump() + "\n");
    return j;
  }

  void report_failure(const Job& j, const std::string& what, const std::string& log) const {
    std::fprintf(stderr, "%s FAILED %s: %s; log %s:\n%s", tag(j.run).c_str(), runs[j.run].label(arms).c_str(),
                 what.c_str(), log.c_str(), tail_lines(log, 12).c_str());
  }

  /// --after CMD through /bin/sh -c, in the current folder; a failure is a warning.
  void run_after() const {
    if (after.empty()) return;
    try {
      const int status = wait_for(spawn({"/bin/sh", "-c", after}, -1, -1));
      if (!succeeded(status))
        std::fprintf(stderr, "warning: --after '%s' %s\n", after.c_str(), describe_status(status).c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: --after '%s': %s\n", after.c_str(), e.what());
    }
  }

  /// A child ended: the next stage, the run's result, or its failure. false: the slot is free.
  bool on_exit(Job& j, int status, Outcome& o) {
    const ablate::Run& r = runs[j.run];
    const char* prog = j.stage == Stage::train ? "lrt-train" : "lrt-eval";
    const std::string log =
        r.dir + (j.stage == Stage::train ? std::string("/train.log") : eval_name(j.stage) + std::string(".log"));
    if (o.stop_signal != 0 && (j.stage == Stage::train || !succeeded(status))) {  // no new child now
      ++o.stopped;
      fmt::print("{} stopped {} ({} {})\n", tag(j.run), r.label(arms), prog, describe_status(status));
      return false;
    }
    if (!succeeded(status)) {
      ++o.failed;
      report_failure(j, std::string(prog) + " " + describe_status(status), log);
      return false;
    }
    try {
      // train -> eval -> eval_train (a train-gap line) -> core (a core line) -> the result
      Stage next = j.stage;
      if (next == Stage::train)
        next = Stage::eval;
      else if (next == Stage::eval && grid.train_gap_bytes > 0)
        next = Stage::eval_train;
      else if ((next == Stage::eval || next == Stage::eval_train) && !core.empty())
        next = Stage::core;
      if (next != j.stage) {
        start_eval(j, next);
        return true;
      }
      const lrt::json::Value res = finalize(r);
      ++o.finished;
      try {
        write_results();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: writing the results: %s\n", e.what());
      }
      const double secs = std::chrono::duration<double>(Clock::now() - j.start).count();
      std::string bpb = fmt::format("val_bpb {:.4f}", res.at("val_bpb").as_number());
      if (res.at("recurrent").as_bool() && res.at("val_bpb_parallel").is_number())
        bpb += fmt::format(" (seq), {:.4f} (par)", res.at("val_bpb_parallel").as_number());
      if (const lrt::json::Value* t = res.find("train_bpb"); t != nullptr && t->is_number())
        bpb += fmt::format(", train_bpb {:.4f}", t->as_number());
      if (const lrt::json::Value* c = res.find("core"); c != nullptr && c->is_number())
        bpb += fmt::format(", CORE {:.4f} ({})", c->as_number(), res.at("core_mode").as_string());
      fmt::print("{} done {}: {}, {}\n", tag(j.run), r.label(arms), bpb, tool::duration(secs));
      run_after();
    } catch (const std::exception& e) {
      ++o.failed;
      report_failure(j, e.what(), log);
    }
    return false;
  }

  /// The scheduler: starts runs while slots are free and waits (sigwaitinfo) for a child to end or
  /// for SIGINT/SIGTERM, which go on to the children; their checkpoints make a rerun resume.
  Outcome schedule(const std::vector<std::size_t>& todo, const std::vector<State>& states) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (const int s : {SIGINT, SIGTERM}) {  // unless ignored (nohup, a script's background job): then so are they
      struct sigaction old {};
      if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&set, s);
    }
    ::sigprocmask(SIG_BLOCK, &set, &original_mask());
    Outcome o;
    std::vector<Job> active;
    std::size_t next = 0;
    for (;;) {
      while (o.stop_signal == 0 && active.size() < jobs && next < todo.size()) {
        const std::size_t i = todo[next++];
        ++o.started;
        try {
          active.push_back(start_train(i, states[i] == State::resume));
        } catch (const std::exception& e) {
          ++o.failed;
          std::fprintf(stderr, "%s FAILED %s: %s\n", tag(i).c_str(), runs[i].label(arms).c_str(), e.what());
        }
      }
      if (active.empty()) break;
      siginfo_t info;
      const int sig = ::sigwaitinfo(&set, &info);
      if (sig < 0) continue;  // EINTR (a stop and continue, say)
      if (sig == SIGINT || sig == SIGTERM) {
        if (o.stop_signal == 0)
          fmt::print("lrt-ablate: {}: stopping the {} running run(s); a rerun resumes each from its last checkpoint\n",
                     signal_name(sig), active.size());
        o.stop_signal = sig;
        for (const Job& j : active) ::kill(j.pid, sig);
        continue;
      }
      int status = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
        for (std::size_t k = 0; k < active.size(); ++k)
          if (active[k].pid == pid) {
            if (!on_exit(active[k], status, o)) active.erase(active.begin() + static_cast<std::ptrdiff_t>(k));
            break;
          }
      }
    }
    ::sigprocmask(SIG_SETMASK, &original_mask(), nullptr);
    return o;
  }
};

// ---------------------------------------------------------------------------------------------
// The command line

/// "~/x" -> "$HOME/x".
std::string expand_home(const std::string& p) {
  const char* home = std::getenv("HOME");
  if (home != nullptr && (p == "~" || p.rfind("~/", 0) == 0)) return home + p.substr(1);
  return p;
}

/// The folder of this program (/proc/self/exe), where the build puts lrt-train and lrt-eval too.
std::string own_folder() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

/// --data, else the grid's data line (relative to the grid's folder), else $LRT_DATA, else the
/// Brown Corpus where the README's run.sh puts it. A missing path is an error naming its origin.
std::string data_path(const tool::Args& a, const ablate::Grid& g) {
  std::string p, from;
  if (a.has("data")) {
    p = a.str("data"), from = "--data";
  } else if (!g.data.empty()) {
    p = expand_home(g.data), from = g.where(g.data_line) + ": data";
    if (fs::path(p).is_relative()) p = (fs::path(g.path).parent_path() / p).lexically_normal().string();
  } else if (const char* env = std::getenv("LRT_DATA"); env != nullptr && *env != '\0') {
    p = env, from = "$LRT_DATA";
  } else {
    p = expand_home("~/.cache/lrt-data/brown/package"),
    from = "the default, the Brown Corpus as scripts/run.sh fetches it";
  }
  if (!exists(p))
    throw tool::UsageError(fmt::format(
        "data '{}' ({}) does not exist: give --data PATH, a 'data' line in the grid, or $LRT_DATA", p, from));
  return p;
}

/// Takes the one positional argument (GRID) out of argv, so that tool::Args parses the options.
std::string take_grid(std::vector<char*>& args) {
  static const std::vector<std::string> with_value{"--out", "--data", "--bin", "--jobs", "--after"};
  std::string grid;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string s = args[i];
    if (std::find(with_value.begin(), with_value.end(), s) != with_value.end()) {
      ++i;
    } else if (s.rfind("-", 0) != 0) {
      if (!grid.empty()) throw tool::UsageError(fmt::format("one GRID file, not '{}' and '{}'", grid, s));
      grid = s;
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i--));
    }
  }
  return grid;
}

int ablate_main(const tool::Args& a, const std::string& grid_path) {
  if (grid_path.empty()) throw tool::UsageError("give the GRID file");
  tool::require_path(grid_path, "GRID");
  Ablation ab;
  ab.grid_path = grid_path;
  ab.grid = ablate::parse_grid(lrt::read_file(grid_path, "grid"), grid_path);
  ab.title = fs::path(grid_path).stem().string();
  ab.out = a.has("out") ? a.str("out") : "runs/ablate-" + ab.title;
  ab.bin = a.has("bin") ? a.str("bin") : own_folder();
  ab.after = a.str("after");
  ab.jobs = static_cast<std::size_t>(a.integer("jobs", 1, 256));
  for (const char* p : {"lrt-train", "lrt-eval"})
    if (::access((ab.bin + "/" + p).c_str(), X_OK) != 0)
      throw tool::UsageError(
          fmt::format("no program {} in '{}' (--bin: the folder of lrt-train and lrt-eval)", p, ab.bin));
  std::vector<std::string> notes;
  ab.arms =
      ablate::expand_arms(ab.grid, ablate::parse_pairs(capture({ab.bin + "/lrt-train", "--list-variants"})), notes);
  for (const std::string& n : notes) fmt::print("note: {}\n", n);
  ab.baseline = ablate::baseline_arm(ab.grid, ab.arms);
  ab.runs = ablate::expand_runs(ab.grid, ab.arms, ab.out);
  ab.data = data_path(a, ab.grid);
  if (ab.grid.core_line != 0) {  // relative to the grid's folder, like its data line
    std::string p = expand_home(ab.grid.core_dir);
    if (fs::path(p).is_relative()) p = (fs::path(ab.grid.path).parent_path() / p).lexically_normal().string();
    if (!exists(p + "/core.yaml"))
      throw tool::UsageError(
          fmt::format("{}: core: '{}' is not a CORE bundle (no core.yaml in it)", ab.grid.where(ab.grid.core_line), p));
    ab.core = p;
  }
  if (ab.jobs > 1) ::setenv("LRT_NUM_THREADS", "1", 0);  // N runs share the cores (a value set already stays)
  if (a.has("dry-run")) {
    ab.print_plan(ab.states());
    return 0;
  }
  return ab.run_all();
}

}  // namespace

int main(int argc, char** argv) {
  tool::Args a("lrt-ablate GRID", summary_text);
  a.option("out", "DIR", "where the runs and results go (default runs/ablate-<GRID's file stem>)")
      .option("data", "PATH",
              "the text to train and evaluate on (default: the grid's data line, $LRT_DATA, the Brown Corpus)")
      .option("bin", "DIR", "the folder of lrt-train and lrt-eval (default: this program's)")
      .option("jobs", "N", "runs at a time; above 1 each gets LRT_NUM_THREADS=1 unless it is set", "2")
      .flag("dry-run", "print the runs (done, to resume, to start) and their commands, and exit")
      .option("after", "CMD", "after each finished run (results rewritten): /bin/sh -c CMD; a failure is a warning");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ::signal(SIGCHLD, SIG_DFL);  // an ignored SIGCHLD (inherited) would reap the children before waitpid
  return tool::run_main(a, [&] {
    std::vector<char*> args(argv, argv + argc);
    const std::string grid = take_grid(args);
    if (!a.parse(static_cast<int>(args.size()), args.data())) return 0;
    try {
      return ablate_main(a, grid);
    } catch (const ablate::GridError& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 2;
    }
  });
}
