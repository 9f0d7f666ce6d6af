# tree.light_sources: the programs' own sources (lrt-train, lrt-eval, lrt-generate, lrt-quantize,
# lrt-server, lrt-ablate) and a unit on the runtime's light header include no Eigen and no lrt
# header but the light ones (core/, io/file.hpp and io/json.hpp, the model config and variant
# structure, the training options (train/options.hpp, optim/lr_schedule.hpp), runtime/decoding.hpp,
# runtime/quantize.hpp, runtime/text.hpp and runtime/training.hpp);
# FMT_FREE files reach no fmt either. What a file reaches is the compiler's own dependency list (-M).
#   cmake -DCXX=c++ -DSOURCE_DIR=... "-DFILES=a.cpp|b.cpp" "-DFMT_FREE=b.cpp" "-DINCLUDES=dir|dir"
#         -P light_sources.cmake
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
string(REPLACE "|" ";" _files "${FILES}")
string(REPLACE "|" ";" _fmt_free "${FMT_FREE}")
string(REPLACE "|" ";" _incs "${INCLUDES}")
set(_flags -std=c++20 -M)
foreach(_i IN LISTS _incs)
  list(APPEND _flags "-I${_i}")
endforeach()
set(_allowed "lrt/core/[a-z_]+\\.hpp|lrt/io/(file|json)\\.hpp|lrt/model/(config|variant|variant_structure)\\.hpp|lrt/optim/lr_schedule\\.hpp|lrt/train/options\\.hpp|lrt/runtime/(decoding|quantize|text|training)\\.hpp")
set(_bad 0)
foreach(_f IN LISTS _files)
  execute_process(COMMAND "${CXX}" ${_flags} "${SOURCE_DIR}/${_f}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _deps
                  ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${_f}: the dependency list failed: ${_err}")
  endif()
  string(REGEX MATCHALL "[^ \\\n]+\\.(hpp|hh|tcc|h)" _headers "${_deps}")
  set(_n 0)
  foreach(_h IN LISTS _headers)
    cmake_path(NORMAL_PATH _h)
    math(EXPR _n "${_n} + 1")
    set(_why "")
    if(_h MATCHES "[Ee]igen")
      set(_why "Eigen")
    elseif(_h MATCHES "include/lrt/(.*)$" AND NOT _h MATCHES "include/(${_allowed})$")
      set(_why "an lrt header that is not light")
    elseif(_h MATCHES "/fmt/" AND _f IN_LIST _fmt_free)
      set(_why "fmt")
    endif()
    if(_why)
      message(STATUS "${_f}: reaches ${_h}: ${_why}")
      math(EXPR _bad "${_bad} + 1")
    endif()
  endforeach()
  message(STATUS "${_f}: ${_n} headers")
endforeach()
if(_bad GREATER 0)
  message(FATAL_ERROR "${_bad} header(s) a light source must not reach")
endif()
message(STATUS "light sources: none reaches Eigen or a heavy lrt header")
