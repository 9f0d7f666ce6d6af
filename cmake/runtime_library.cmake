# cmake/runtime_library.cmake: lrt_runtime_library(TARGET) makes a static library of lrt's compiled
# runtime (lrt::c, lrt_runtime) keep its own code to itself.
#
# A host that links the library may also include lrt's templates, compiled with other flags (a
# native host beside a portable package, or the reverse). Both then hold inline code of the same
# name -- lrt's kernels, the lean decoder, Eigen's products -- compiled for different instruction
# sets, and a linker keeps one copy of each for both sides: the portable library could run AVX-512
# code on a CPU without it. So the library's units are compiled with hidden visibility; after the
# archive is made, its objects are linked into one (ld -r), every hidden symbol is made local and the
# COMDAT groups are dropped (objcopy --localize-hidden --remove-section=.group), so that the linker
# can neither merge its copies with the host's nor discard them. What stays global is marked LRT_API
# (lrt/core/config.hpp): the runtime's entry points and the C API, the classes thrown or called
# across (lrt::Error, runtime::Decoding), and process-wide state (the thread pool, the GEMM path,
# the error handler). tree.runtime_symbols checks the archive.
#
# Where the toolchain lacks what it needs (ld -r and objcopy, i.e. not Linux/ELF), or with
# -DLRT_RUNTIME_LOCAL=OFF, the library is an ordinary archive and a host must use the library's flags.
include_guard(GLOBAL)

set(_lrt_local_default OFF)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_LINKER AND CMAKE_OBJCOPY AND CMAKE_AR AND CMAKE_RANLIB
   AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(_lrt_local_default ON)
endif()
option(LRT_RUNTIME_LOCAL "Keep the runtime library's inline code local (hidden visibility, ld -r, objcopy)"
       ${_lrt_local_default})

# lrt_runtime_objects(TARGET): the compile settings of a runtime library's units, for an OBJECT
# library whose objects a runtime library takes in (lrt_runtime_library(... OBJECTS TARGET)).
function(lrt_runtime_objects target)
  if(NOT LRT_RUNTIME_LOCAL)
    return()
  endif()
  set_target_properties(${target} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  # g++ gives the statics of inline functions STB_GNU_UNIQUE binding, which objcopy does not make
  # local and the linker merges whatever their visibility: ordinary weak symbols instead.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -fno-gnu-unique)
  endif()
endfunction()

# lrt_runtime_library(TARGET [OBJECTS OBJLIB...]): TARGET's archive becomes one object of its own
# units and those of the OBJECT libraries OBJLIB (added to its sources by the caller), its inline
# code local.
function(lrt_runtime_library target)
  cmake_parse_arguments(PARSE_ARGV 1 _arg "" "" "OBJECTS")
  if(NOT LRT_RUNTIME_LOCAL)
    return()
  endif()
  lrt_runtime_objects(${target})
  set(_extra)
  foreach(_lib IN LISTS _arg_OBJECTS)
    list(APPEND _extra "$<TARGET_OBJECTS:${_lib}>")
  endforeach()
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${target}.local")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${_dir}"
    COMMAND "${CMAKE_LINKER}" -r -o "${_dir}/all.o" $<TARGET_OBJECTS:${target}> ${_extra}
    COMMAND "${CMAKE_OBJCOPY}" --localize-hidden --remove-section=.group "${_dir}/all.o" "${_dir}/${target}.o"
    COMMAND "${CMAKE_COMMAND}" -E rm -f $<TARGET_FILE:${target}>
    COMMAND "${CMAKE_AR}" qc $<TARGET_FILE:${target}> "${_dir}/${target}.o"
    COMMAND "${CMAKE_RANLIB}" $<TARGET_FILE:${target}>
    COMMENT "Keeping ${target}'s own code local (cmake/runtime_library.cmake)"
    COMMAND_EXPAND_LISTS VERBATIM)
endfunction()
