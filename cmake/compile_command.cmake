# compile_command.cmake -- included by compile_fail.cmake and headers_compile.cmake after their
# ARGS_FILE: appends to _cmd lrt's own headers with -I (their warnings matter), dependencies with
# -isystem like CMake does for imported targets, and lrt::lrt's definitions. The compiler's
# implicit directories (/usr/include) are left out because passing them again breaks libstdc++'s
# #include_next.
foreach(_inc IN LISTS CF_INCLUDES)
  if(NOT _inc OR _inc IN_LIST CF_IMPLICIT_INCLUDES)
    continue()
  endif()
  if(_inc STREQUAL CF_OWN_INCLUDE)
    list(APPEND _cmd "-I${_inc}")
  else()
    list(APPEND _cmd -isystem "${_inc}")
  endif()
endforeach()
foreach(_def IN LISTS CF_DEFINITIONS)
  if(_def)
    list(APPEND _cmd "-D${_def}")
  endif()
endforeach()
