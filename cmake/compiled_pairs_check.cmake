# cmake/compiled_pairs_check.cmake: tree.compiled_pairs -- a program that links lrt::runtime and
# includes the templates (LRT_COMPILED_PAIRS: the README's quick start) compiles none of the
# instantiations the library holds (include/lrt/runtime/compiled_pairs.cpp): its object refers to
# Model<V>, Trainer<V> and Decoder<V> of the paper's LRT and defines none of their functions (but
# the destructors the compiler writes itself), and the library defines them for the linker.
#   cmake -DNM=nm -DOBJ=quickstart.cpp.o -DLIB=liblrt_runtime.a -P cmake/compiled_pairs_check.cmake
foreach(_v NM OBJ LIB)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "compiled_pairs_check: -D${_v}=... is required")
  endif()
endforeach()
set(_lrt "lrt::v0::Variant<\\(lrt::v0::Injection\\)3, \\(lrt::v0::Projection\\)0, lrt::v0::FinalSource>")
set(_classes "Model<${_lrt}, float, lrt::v0::cpu::Device>::" "Trainer<${_lrt}, lrt::v0::Interleaved<2>, float, lrt::v0::cpu::Device>::"
             "Decoder<${_lrt}, float, lrt::v0::cpu::Device>::")
function(symbols file flags out)
  execute_process(COMMAND "${NM}" -C ${flags} "${file}" OUTPUT_VARIABLE _o RESULT_VARIABLE _rc ERROR_VARIABLE _e)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "compiled_pairs_check: ${NM} ${file} failed: ${_e}")
  endif()
  set(${out} "${_o}" PARENT_SCOPE)
endfunction()
symbols("${OBJ}" "--defined-only" _obj_defined)
symbols("${OBJ}" "--undefined-only" _obj_undefined)
symbols("${LIB}" "--defined-only;--extern-only" _lib_defined)
# Destructors the compiler writes (implicitly defined, inline) are the program's own, as always.
string(REGEX REPLACE "[^\n]*::~[A-Za-z]+\\(\\)\n" "" _obj_defined "${_obj_defined}")
foreach(_c IN LISTS _classes)
  string(REGEX MATCH "[^\n]*lrt::v0::${_c}[^\n]*" _def "${_obj_defined}")
  if(_def)
    message(FATAL_ERROR "compiled_pairs_check: ${OBJ} compiles a function the runtime library holds:\n  ${_def}")
  endif()
  string(REGEX MATCH "lrt::v0::${_c}[^\n]*" _use "${_obj_undefined}")
  if(NOT _use)
    message(FATAL_ERROR "compiled_pairs_check: ${OBJ} refers to no function of lrt::v0::${_c} (is it still the quick start?)")
  endif()
  string(FIND "${_lib_defined}" "${_use}" _at)
  if(_at EQUAL -1)
    message(FATAL_ERROR "compiled_pairs_check: ${LIB} does not define ${_use}")
  endif()
  message(STATUS "compiled_pairs_check: ${_use}: from the library")
endforeach()
