// The model work of lrt-train, lrt-eval and lrt-generate, compiled once (programs.cpp, the
// library lrt_tool_programs) instead of in each program: a program's own source defines its
// options (cli/args.hpp), parses them, checks what it can from them alone and calls one of these.
// This header includes no lrt, Eigen or fmt header; the bodies are runner.hpp's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/args.hpp"

namespace tool {

/// The (variant, schedule) pairs of this build's registry, in its order (--list-variants).
std::vector<std::pair<std::string, std::string>> registered_pairs();
/// The pairs --device cuda reaches, "\n  --variant V --schedule S" each ("" without CUDA).
std::string cuda_pairs_text();
/// Checks --device and --precision against this build (a UsageError, or an lrt::Error when the
/// GPU cannot be used), before any work.
void check_device(const Args& a);
/// "lrt-train ARGS...": the arguments every rank of a data-parallel run must share.
void set_program_arguments(int argc, char** argv);

/// Under an MPI launcher, joins the job's group (rank 0 reports; the others' standard output goes
/// to /dev/null). Returns 0, or the exit status after an error on stderr naming `program`.
int join_mpi(const char* program);
/// After a rank of a job of several ranks stopped with `rc` (not 0): ends the job (MPI_Abort),
/// saying why; nothing in one process.
void end_job(const char* program, int rc);

/// lrt-train after its arguments: trains the pair --variant/--schedule names (or, with --resume
/// and no --variant, the checkpoint's own); the exit status.
int train_program(const Args& a);
/// lrt-eval after its arguments: scores the checkpoint (--checkpoint) on --data or --core.
int eval_program(const Args& a);
/// lrt-generate after its arguments: continues the prompt with the checkpoint's model.
int generate_program(const Args& a);

}  // namespace tool
