# headers_compile.cmake -- every public header compiles on its own (include what you use).
#
#   cmake -DARGS_FILE=... -DHEADERS=<include/lrt> -DKIND=hpp|cuh [-DEMU_DIR=tests/emu/fake]
#         -DWORK_DIR=<scratch dir> -P headers_compile.cmake
#
# For each include/lrt/**/*.<KIND> a one-line translation unit `#include <lrt/...>` is compiled
# (and, with the .cuh ones, lrt/cuda.hpp) with -fsyntax-only and the compile-fail tests' command line (ARGS_FILE: the compiler, lrt::lrt's
# include directories and definitions). .cuh headers are compiled by the host compiler against the
# CUDA emulator (EMU_DIR first on the path, its <cuda_runtime.h> pre-included as nvcc pre-includes
# the real one). Fails listing every header that does not compile, with the first errors of each.

cmake_minimum_required(VERSION 3.25)
foreach(_v ARGS_FILE HEADERS KIND WORK_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "headers_compile.cmake: -D${_v}=... is required")
  endif()
endforeach()
include("${ARGS_FILE}")

set(_cmd "${CF_COMPILER}" -std=c++20 -fsyntax-only -Wall -Wextra)
if(KIND STREQUAL "cuh")
  if(NOT DEFINED EMU_DIR)
    message(FATAL_ERROR "headers_compile.cmake: KIND=cuh needs -DEMU_DIR=<tests/emu/fake>")
  endif()
  list(APPEND _cmd "-I${EMU_DIR}" -include cuda_runtime.h -Wno-unknown-pragmas)
endif()
include("${CMAKE_CURRENT_LIST_DIR}/compile_command.cmake")

# <lrt/cuda.hpp> is the CUDA umbrella: it needs nvcc (or the emulator), so it goes with the .cuh ones.
file(GLOB_RECURSE _headers RELATIVE "${HEADERS}" "${HEADERS}/*.${KIND}")
if(KIND STREQUAL "cuh")
  list(APPEND _headers cuda.hpp)
else()
  list(REMOVE_ITEM _headers cuda.hpp)
endif()
list(SORT _headers)
# dist/mpi.hpp needs <mpi.h>: compiled with MPI_INCLUDE (|-separated directories) when CMake found
# an MPI, else left out with a note.
string(REPLACE "|" ";" MPI_INCLUDE "${MPI_INCLUDE}")
if("dist/mpi.hpp" IN_LIST _headers AND NOT MPI_INCLUDE)
  list(REMOVE_ITEM _headers dist/mpi.hpp)
  message(STATUS "dist/mpi.hpp left out: no MPI found (scripts/setup.sh --mpi)")
endif()
list(LENGTH _headers _n)
if(_n EQUAL 0)
  message(FATAL_ERROR "no *.${KIND} headers under ${HEADERS}")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}")
set(_failed)
foreach(_h IN LISTS _headers)
  string(MAKE_C_IDENTIFIER "${_h}" _id)
  set(_tu "${WORK_DIR}/${_id}.cpp")
  file(WRITE "${_tu}" "#include <lrt/${_h}>\n")
  set(_extra)
  if(_h STREQUAL "dist/mpi.hpp")
    foreach(_d IN LISTS MPI_INCLUDE)
      list(APPEND _extra "-I${_d}")
    endforeach()
  endif()
  execute_process(COMMAND ${_cmd} ${_extra} "${_tu}" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    string(SUBSTRING "${_out}" 0 3000 _out)
    message("FAILED lrt/${_h} does not compile on its own:\n${_out}")
    list(APPEND _failed "${_h}")
  elseif(_out MATCHES "warning:")
    string(SUBSTRING "${_out}" 0 3000 _out)
    message("FAILED lrt/${_h} compiles with warnings:\n${_out}")
    list(APPEND _failed "${_h}")
  endif()
endforeach()
list(LENGTH _failed _nf)
if(_nf GREATER 0)
  string(JOIN ", " _list ${_failed})
  message(FATAL_ERROR "${_nf} of ${_n} .${KIND} headers do not compile on their own: ${_list}")
endif()
message(STATUS "${_n} .${KIND} headers under include/lrt compile on their own")
