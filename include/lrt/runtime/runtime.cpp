// include/lrt/runtime/runtime.cpp: the one translation unit of lrt's runtime library: quantizing
// (lrt/runtime/quantize.hpp) and the table of decoders behind lrt/runtime/decoding.hpp, with
// lrt::LeanVariants and, in lrt's own build, the variants of the build's (variant, schedule)
// pairs (LRT_RUNTIME_PAIRS names a generated file of the pair files, examples/CMakeLists.txt). A
// project that does not link lrt's CMake targets may compile this file itself (any flags;
// -DLRT_RUNTIME_PAIRS is optional).
#define LRT_RUNTIME_IMPLEMENTATION 1
#include "decoding_impl.hpp"
#include "quantize_impl.hpp"

#if defined(LRT_RUNTIME_PAIRS)
#define LRT_TOOL_DECODE 1
#include LRT_RUNTIME_PAIRS
#endif
