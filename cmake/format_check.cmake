# format_check.cmake -- the sources follow .clang-format (clang-format 14, Debian 12's).
#
#   cmake -DCLANG_FORMAT=<clang-format> -DSOURCE_DIR=<repo> -P format_check.cmake
#
# Checks include/, tests/, examples/ and bench/ (C++ and CUDA sources and headers) with
# `clang-format --dry-run --Werror` and names every file that would change. To fix:
#   clang-format-14 -i $(git ls-files '*.hpp' '*.cuh' '*.cpp' '*.cu' '*.h')
cmake_minimum_required(VERSION 3.25)
foreach(_v CLANG_FORMAT SOURCE_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "format_check.cmake: -D${_v}=... is required")
  endif()
endforeach()
set(_files)
foreach(_dir include tests examples bench)
  foreach(_ext hpp cuh cpp cu h)
    file(GLOB_RECURSE _f "${SOURCE_DIR}/${_dir}/*.${_ext}")
    list(APPEND _files ${_f})
  endforeach()
endforeach()
list(FILTER _files EXCLUDE REGEX "/tests/fuzz/corpus/")
list(SORT _files)
list(LENGTH _files _n)
set(_bad)
foreach(_f IN LISTS _files)
  execute_process(COMMAND "${CLANG_FORMAT}" --style=file --dry-run --Werror "${_f}"
    WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    file(RELATIVE_PATH _rel "${SOURCE_DIR}" "${_f}")
    list(APPEND _bad "${_rel}")
    string(SUBSTRING "${_err}" 0 600 _err)
    message("${_rel} does not follow .clang-format:\n${_err}")
  endif()
endforeach()
list(LENGTH _bad _nb)
if(_nb GREATER 0)
  message(FATAL_ERROR "${_nb} of ${_n} files do not follow .clang-format (run clang-format-14 -i on them)")
endif()
message(STATUS "${_n} files follow .clang-format")
