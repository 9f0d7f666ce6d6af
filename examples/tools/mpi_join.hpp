// examples/tools/mpi_join.hpp: how a tool joins the MPI job that mpirun started (lrt-train: data
// parallel training; lrt-eval --core: examples over ranks), or refuses mpirun in a build without
// MPI, where each rank would run alone.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>

#include <lrt/dist/group.hpp>
#ifdef LRT_TOOLS_MPI
#include <lrt/dist/mpi.hpp>
#endif

#include "runner.hpp"

namespace tool {

/// The number of ranks an MPI launcher started (1 without one).
inline int launched_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v)) return std::max(1, std::atoi(s));
  return 1;
}

/// Under an MPI launcher: the job's group, published in dist_group_slot(); every rank but 0 has
/// its standard output sent to /dev/null (rank 0 reports). Returns 0, or the exit status after
/// an error on stderr (`program` names the tool in it).
inline int join_mpi(std::unique_ptr<lrt::dist::Group>& group, const char* program) {
#ifdef LRT_TOOLS_MPI
  (void)program;
  if (!lrt::dist::launched_by_mpi()) return 0;
  try {
    group = std::make_unique<lrt::dist::MpiGroup>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  dist_group_slot() = group.get();
  if (!group->is_root() && std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
#else
  (void)group;
  if (launched_ranks() > 1) {
    std::fprintf(stderr,
                 "error: %s was started as one of %d MPI ranks, but this build has no MPI (CMake found no OpenMPI "
                 "when it was configured): each rank would run alone. Install it (bash scripts/setup.sh --mpi, or "
                 "apt-get install openmpi-bin libopenmpi-dev), reconfigure and rebuild\n",
                 program, launched_ranks());
    return 2;
  }
#endif
  return 0;
}

}  // namespace tool
