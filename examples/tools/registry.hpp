// What a pair file of examples/tools/registry/ includes. A pair file holds one line,
//   LRT_TOOL_PAIR("lrt-src1", lrt::Variant<...>, lrt::Interleaved<2>);
// the pair's --variant name, its variant type and its schedule type. Compiled by the host
// compiler it registers the pair's CPU session and what the tools' bodies ask of its types
// (runner.hpp's Entry; the bodies themselves are compiled once, in programs.cpp), and the pair's
// model in the runtime's table (lrt/runtime/training.hpp: the same trainer, compiled once for
// both); compiled with LRT_TOOL_CUDA defined
// (by nvcc, or against the CUDA emulator of the tests) it registers the pair's CUDA session (cuda_session.hpp), which
// --device cuda uses; compiled with LRT_TOOL_DECODE defined (the runtime library's unit,
// include/lrt/runtime/runtime.cpp) it adds the variant's lean decoder to the decoding table of
// lrt/runtime/decoding.hpp. examples/CMakeLists.txt reads the name and the schedule from the line (LRT_TOOL_PAIRS
// selects pairs by them) and builds the CUDA units as a target of their own.
//
// The registration is a static object named from __COUNTER__: the pair files are compiled together
// as one unity unit (LRT_REGISTRY_BATCH), where every pair's object needs a name of its own, and
// no person has to write one.
#pragma once

#define LRT_TOOL_CAT_(a, b) a##b
#define LRT_TOOL_CAT(a, b) LRT_TOOL_CAT_(a, b)

#if defined(LRT_TOOL_DECODE)
#include <lrt/runtime/decoding_impl.hpp>
namespace lrt {  // the schedules a pair names, declared only: its decoder does not use them
inline namespace v0 {
struct Standard;
struct Exact;
template <int S>
struct Interleaved;
template <int K>
struct MultiRefine;
template <int C>
struct Chunked;
}  // namespace v0
}  // namespace lrt
namespace tool {
template <class V, class Sched>
using DecodingOfPair = lrt::runtime::DecodingRegistration<V>;
}
#define LRT_TOOL_PAIR(NAME, ...) \
  static const ::tool::DecodingOfPair<__VA_ARGS__> LRT_TOOL_CAT(lrt_tool_pair_decoding_, __COUNTER__) { NAME }
#elif defined(LRT_TOOL_CUDA)
#include "cuda_session.hpp"
#define LRT_TOOL_PAIR(NAME, ...) \
  static const ::tool::CudaRegistration<__VA_ARGS__> LRT_TOOL_CAT(lrt_tool_pair_cuda_, __COUNTER__) {}
#else
#include <lrt/runtime/training_impl.hpp>

#include "runner.hpp"
#define LRT_TOOL_PAIR(NAME, ...)                                                              \
  static const ::tool::Register<__VA_ARGS__> LRT_TOOL_CAT(lrt_tool_pair_, __COUNTER__){NAME}; \
  static const ::lrt::runtime::ModelRegistration<__VA_ARGS__> LRT_TOOL_CAT(lrt_tool_model_, __COUNTER__) { NAME }
#endif
