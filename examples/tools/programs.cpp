// The one translation unit of lrt_tool_programs: programs.hpp's functions over runner.hpp's
// bodies (linked into lrt-train, lrt-eval, lrt-generate and their emulator builds).
#include "programs.hpp"

#include "mpi_join.hpp"
#include "runner.hpp"

namespace tool {

std::vector<std::pair<std::string, std::string>> registered_pairs() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Entry& e : registry()) out.emplace_back(e.variant, e.schedule);
  return out;
}

void check_device(const Args& a) { device_choice(a); }

void set_program_arguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) program_arguments_slot() += std::string(i > 1 ? " " : "") + argv[i];
}

namespace {
std::unique_ptr<lrt::dist::Group>& job_group() {
  static std::unique_ptr<lrt::dist::Group> g;
  return g;
}
}  // namespace

int join_mpi(const char* program) { return join_mpi(job_group(), program); }

void end_job(const char* program, int rc) {
  const auto& group = job_group();
  if (rc == 0 || group == nullptr || group->size() <= 1) return;
  std::fprintf(stderr, "%s: rank %d of %d stopped with exit code %d: ending the job\n", program, group->rank(),
               group->size(), rc);
  group->abort(rc);
}

int train_program(const Args& a) {
  try {
    if (a.has("resume") && !a.has("variant")) {  // the checkpoint's own pair, found by its structure
      const auto r = lrt::st::Reader::open(resume_checkpoint(a.str("resume")).model_path());
      const lrt::CheckpointSchedule cs = lrt::read_checkpoint(r).run;  // the one loader's checks
      return train_run(find_entry(cs.structure, a.has("schedule") ? a.str("schedule") : cs.schedule), a);
    }
    return train_run(find_entry(a.str("variant"), a.str("schedule")), a);
  } catch (const Interrupted& i) {  // before the first step: nothing to save
    std::fprintf(stderr, "lrt-train: stopped by %s before training started; nothing was saved\n",
                 signal_name(i.signal));
    return 128 + i.signal;
  }
}

int eval_program(const Args& a) {
  if (a.has("data")) require_path(a.str("data"), "--data");
  const auto r = lrt::st::Reader::open(checkpoint_file(a.str("checkpoint")));
  const auto c = checkpoint_run(a, r);  // the schedule and options it was trained with
  return eval_run(find_entry(c.schedule.structure, c.schedule.schedule), a, r, c.config, c.schedule.options);
}

int generate_program(const Args& a) {
  prefill_mode(a);
  const auto r = lrt::st::Reader::open(checkpoint_file(a.str("checkpoint")));
  const auto [cfg, variant, schedule] = checkpoint_model(a, r);
  return generate_run(find_entry(variant, schedule), a, r, cfg);
}

}  // namespace tool
