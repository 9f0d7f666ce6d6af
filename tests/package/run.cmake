# run.cmake -- build and run one consumer project of lrt (CTest: package.find_package,
# package.add_subdirectory). Usage:
#   cmake -DKIND=find_package|add_subdirectory -DLRT_SOURCE_DIR=<repo> -DLRT_BINARY_DIR=<lrt build>
#         -DWORK_DIR=<scratch dir> [-DGENERATOR=Ninja] [-DCXX_COMPILER=g++] [-DLAUNCHER=ccache]
#         [-DBUILD_TYPE=Release] [-DEXPECT_RUNTIME=ON] -P run.cmake
#
# find_package:     `cmake --install LRT_BINARY_DIR --prefix WORK_DIR/find_package/prefix`, then
#                   configure tests/package/find_package with CMAKE_PREFIX_PATH=<that prefix>.
# add_subdirectory: configure tests/package/add_subdirectory, which adds LRT_SOURCE_DIR itself
#                   and fails if lrt's own tests/benches/examples were configured.

cmake_minimum_required(VERSION 3.25)

foreach(_v KIND LRT_SOURCE_DIR LRT_BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "run.cmake: -D${_v}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

function(run_step what)
  string(JOIN " " _shown ${ARGN})
  message(STATUS "[${KIND}] ${what}: ${_shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "[${KIND}] ${what} failed (exit ${_rc}):\n${_out}")
  endif()
  set(LAST_OUTPUT "${_out}" PARENT_SCOPE)
endfunction()

set(_work "${WORK_DIR}/${KIND}")
set(_build "${_work}/build")
file(REMOVE_RECURSE "${_build}")
file(MAKE_DIRECTORY "${_work}")

set(_configure "${CMAKE_COMMAND}" -S "${LRT_SOURCE_DIR}/tests/package/${KIND}" -B "${_build}"
    "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
if(GENERATOR)
  list(APPEND _configure -G "${GENERATOR}")
endif()
if(CXX_COMPILER)
  list(APPEND _configure "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(LAUNCHER)
  list(APPEND _configure "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()

if(KIND STREQUAL "find_package")
  set(_prefix "${_work}/prefix")
  file(REMOVE_RECURSE "${_prefix}")
  # Only the library component: the examples need not be built for this test.
  run_step("install lrt" "${CMAKE_COMMAND}" --install "${LRT_BINARY_DIR}" --prefix "${_prefix}"
           --config "${BUILD_TYPE}" --component lrt_Development)
  foreach(_f include/lrt/lrt.hpp lib/cmake/lrt/lrtConfig.cmake lib/cmake/lrt/lrtConfigVersion.cmake
             lib/cmake/lrt/lrtTargets.cmake)
    if(NOT EXISTS "${_prefix}/${_f}")
      message(FATAL_ERROR "[${KIND}] install tree lacks ${_f}")
    endif()
  endforeach()
  list(APPEND _configure "-DCMAKE_PREFIX_PATH=${_prefix}" "-DLRT_EXPECTED_PREFIX=${_prefix}"
       "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON")
  # The build has the runtime library (examples built): the package must give lrt::runtime.
  if(EXPECT_RUNTIME)
    list(APPEND _configure "-DLRT_EXPECT_RUNTIME=ON")
  endif()
elseif(KIND STREQUAL "add_subdirectory")
  # No nvcc probing in the consumer: it is slow and covered by the main build.
  list(APPEND _configure "-DLRT_SOURCE_DIR=${LRT_SOURCE_DIR}" "-DLRT_ENABLE_CUDA=OFF")
else()
  message(FATAL_ERROR "run.cmake: unknown KIND '${KIND}'")
endif()

run_step("configure" ${_configure})
run_step("build" "${CMAKE_COMMAND}" --build "${_build}" --config "${BUILD_TYPE}")

set(_exe "${_build}/lrt_consumer")
if(NOT EXISTS "${_exe}")
  file(GLOB_RECURSE _exe "${_build}/lrt_consumer" "${_build}/lrt_consumer.exe")
endif()
run_step("run" ${_exe})
message(STATUS "[${KIND}] OK: ${LAST_OUTPUT}")

# find_package: the runtime library under a portable host and a native one (runtime_host.cpp) prints
# the same lines.
if(EXISTS "${_build}/runtime_host")
  run_step("run runtime_host" "${_build}/runtime_host")
  set(_portable "${LAST_OUTPUT}")
  string(REGEX MATCHALL "runtime: [^\n]*" _portable_lines "${_portable}")
  list(LENGTH _portable_lines _n)
  if(_n LESS 7)
    message(FATAL_ERROR "[${KIND}] runtime_host printed ${_n} runtime lines, expected 7:\n${_portable}")
  endif()
  if(EXISTS "${_build}/runtime_host_native")
    run_step("run runtime_host_native" "${_build}/runtime_host_native")
    string(REGEX MATCHALL "runtime: [^\n]*" _native_lines "${LAST_OUTPUT}")
    if(NOT _native_lines STREQUAL _portable_lines)
      message(FATAL_ERROR "[${KIND}] the runtime library printed other figures under a -march=native host:\n"
                          "portable:\n${_portable}\nnative:\n${LAST_OUTPUT}")
    endif()
    message(STATUS "[${KIND}] the runtime library under a portable and a -march=native host: the same ${_n} lines")
  endif()
elseif(EXPECT_RUNTIME AND KIND STREQUAL "find_package")
  message(FATAL_ERROR "[${KIND}] runtime_host was not built")
endif()

# find_package(lrt COMPONENTS runtime): found with the library installed; without it, refused with
# the reason.
if(EXPECT_RUNTIME AND KIND STREQUAL "find_package")
  set(_req "${CMAKE_COMMAND}" -S "${LRT_SOURCE_DIR}/tests/package/runtime_required" "-DCMAKE_PREFIX_PATH=${_prefix}"
      "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON")
  file(REMOVE_RECURSE "${_work}/required")
  run_step("configure a project requiring the runtime" ${_req} -B "${_work}/required")
  file(GLOB _libs "${_prefix}/lib*/*lrt_runtime*")
  file(REMOVE ${_libs})
  file(REMOVE_RECURSE "${_work}/required-missing")
  execute_process(COMMAND ${_req} -B "${_work}/required-missing" RESULT_VARIABLE _rc OUTPUT_VARIABLE _out
                  ERROR_VARIABLE _out)
  if(_rc EQUAL 0 OR NOT _out MATCHES "lrt::runtime is not installed under")
    message(FATAL_ERROR "[${KIND}] without liblrt_runtime, find_package(lrt COMPONENTS runtime) gave (exit ${_rc}):\n${_out}")
  endif()
  message(STATUS "[${KIND}] find_package(lrt COMPONENTS runtime) without the library: refused with the reason")
endif()
