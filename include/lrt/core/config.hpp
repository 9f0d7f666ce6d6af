// lrt/core/config.hpp: environment macros shared by every header (host and device).
// Macros here describe the compiler and platform only; model choices are template parameters.
#pragma once

#include <cstddef>
#include <cstdint>

#define LRT_VERSION_MAJOR 0
#define LRT_VERSION_MINOR 1
#define LRT_VERSION_PATCH 0

// LRT_HD marks code that runs on the host and, under nvcc, on the device too: functors,
// evaluators, shape maths, the RNG. Everything else is host-only.
#if defined(__CUDACC__)
#define LRT_HD __host__ __device__
#else
#define LRT_HD
#endif

#if defined(__CUDA_ARCH__)
#define LRT_ON_DEVICE 1
#else
#define LRT_ON_DEVICE 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define LRT_ALWAYS_INLINE inline __attribute__((always_inline))
#define LRT_COLD __attribute__((cold, noinline))
#else
#define LRT_COLD
#define LRT_ALWAYS_INLINE inline
#endif

// LRT_API marks what stays one per process when a compiled lrt library (the runtime, lrt::c) is
// linked beside a host's own instantiations of the templates: the runtime library's entry points,
// the classes thrown or called across it, and process-wide state (the thread pool, the GEMM path,
// the error handler). That library is compiled with hidden visibility and its other symbols are
// made local (cmake/runtime_library.cmake), so neither side's inline code, compiled with its own
// instruction-set flags, can replace the other's.
#if defined(__GNUC__) || defined(__clang__)
#define LRT_API __attribute__((visibility("default")))
#else
#define LRT_API
#endif

// LRT_EXCEPTIONS: 1 when the translation unit is compiled with exceptions (the default); 0 under
// -fno-exceptions, where lrt's errors go to the error handler (core/error.hpp) instead of a throw.
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define LRT_EXCEPTIONS 1
#else
#define LRT_EXCEPTIONS 0
#endif

namespace lrt {
inline namespace v0 {

/// Index and extent type of every tensor (signed: differences of indices are common).
using index_t = std::int64_t;

namespace detail {
template <class...>
inline constexpr bool always_false = false;
}  // namespace detail

}  // namespace v0
}  // namespace lrt
