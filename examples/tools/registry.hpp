// What a pair file of examples/tools/registry/ includes. A pair file defines
//   struct NAME { using variant = ...; using schedule = ...; static constexpr const char* name = "..."; };
//   LRT_TOOL_REGISTER(NAME);
// in namespace tool::pairs. Compiled by the host compiler it registers the pair's CPU tool bodies
// (runner.hpp: lrt-train, lrt-eval, lrt-generate); compiled with LRT_TOOL_CUDA defined (by nvcc,
// or against the CUDA emulator of the tests) it registers the pair's CUDA session (cuda_session.hpp),
// which --device cuda uses. examples/CMakeLists.txt builds the CUDA units as a target of their own.
#pragma once

#if defined(LRT_TOOL_CUDA)
#include "cuda_session.hpp"
#define LRT_TOOL_REGISTER(P) static const ::tool::CudaRegistration<P> registered_cuda_##P
#else
#include "runner.hpp"
#define LRT_TOOL_REGISTER(P) \
  static const ::tool::Register<P::variant, P::schedule> registered_##P { P::name }
#endif
