// examples/tools/capi/lrt_c.cpp: the one translation unit of the CMake target lrt::c (lrt's C API,
// include/lrt.h), whose implementation is the single-header library lrt/runtime/c_api.hpp.
#define LRT_C_IMPLEMENTATION
#include <lrt/runtime/c_api.hpp>
