# cmake/runtime_symbols.cmake: tree.runtime_symbols -- a runtime library (lrt::c, lrt_runtime) keeps
# its own code local (cmake/runtime_library.cmake): the only lrt or Eigen symbols it defines for the
# linker are the ones marked LRT_API. Any other (a kernel, the lean decoder, an Eigen product) could
# be merged with a host's copy compiled for another instruction set.
#   cmake -DNM=nm -DLIB=liblrt_c.a -P cmake/runtime_symbols.cmake
foreach(_v NM LIB)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "runtime_symbols: -D${_v}=... is required")
  endif()
endforeach()
execute_process(COMMAND "${NM}" -C --defined-only --extern-only "${LIB}" OUTPUT_VARIABLE _out
                RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "runtime_symbols: ${NM} ${LIB} failed: ${_err}")
endif()
# What may stay global: the runtime's entry points, the C API, the classes thrown or called across
# the library, and the process-wide state of lrt/core/config.hpp's list.
set(_state "ThreadPool::global\\(\\)|cpu::CachingAllocator::global\\(\\)|cpu::detail::gemm_state\\(\\)|cpu::gemm_choice\\(\\)|cpu::detail::rowwise_level_slot\\(\\)|cpu::detail::gemm_profile_slot\\(\\)|cpu::detail::cpu_matmul_slot\\(\\)|detail::device_allocations\\(\\)|detail::error_handler_slot\\(\\)|detail::in_pool_task|ad::detail::grad_mode")
set(_allowed
  "^lrt_[a-z_]+$"
  "^lrt::v0::runtime::(open_decoding|decoding_variants|decoding_variant_names|detail::register_decoding|checkpoint_model_file|quantize_checkpoint_file|sample|Text::(vocab_size|encode|token_text)|make_model|open_model|model_pairs|products|detail::register_model|Score::(bits_per_byte|loss))(\\[abi:cxx11\\])?\\("
  "^(typeinfo|typeinfo name|vtable) for lrt::v0::(Error|runtime::Decoding|runtime::VariantNotBuilt|runtime::Model|runtime::Training)$"
  # the instantiations lrt::runtime holds for programs that include the templates (compiled_pairs.cpp)
  "^((typeinfo|typeinfo name|vtable|guard variable) for )?lrt::v0::(Model|Trainer|Decoder)<lrt::v0::Variant<"
  "^(guard variable for )?lrt::v0::(${_state})(::[a-z_]+)?$")
string(REPLACE "\n" ";" _lines "${_out}")
set(_bad "")
set(_n_api 0)
set(_n_total 0)
foreach(_line IN LISTS _lines)
  # "ADDRESS TYPE NAME" (NAME may hold spaces)
  if(NOT _line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (.*)$")
    continue()
  endif()
  set(_name "${CMAKE_MATCH_1}")
  math(EXPR _n_total "${_n_total} + 1")
  # lrt's and Eigen's own (a standard library template over an lrt type, such as the thread pool's
  # std::thread state, keeps the standard library's default visibility: not checked here).
  if(NOT _name MATCHES "^((guard variable|typeinfo|typeinfo name|vtable|VTT|construction vtable) for )?(lrt::|Eigen::|lrt_)")
    continue()
  endif()
  set(_ok OFF)
  foreach(_re IN LISTS _allowed)
    if(_name MATCHES "${_re}")
      set(_ok ON)
    endif()
  endforeach()
  if(_ok)
    if(_name MATCHES "^lrt_open$|runtime::open_decoding")
      math(EXPR _n_api "${_n_api} + 1")
    endif()
  else()
    list(APPEND _bad "${_name}")
  endif()
endforeach()
list(LENGTH _bad _n_bad)
if(_n_bad GREATER 0)
  list(SUBLIST _bad 0 20 _show)
  string(REPLACE ";" "\n  " _show "${_show}")
  message(FATAL_ERROR "runtime_symbols: ${LIB} leaves ${_n_bad} of its own symbols global, which a host's "
                      "copies could replace (cmake/runtime_library.cmake; mark process-wide state LRT_API):\n  ${_show}")
endif()
# The entry points must be there (lrt_open for lrt::c, open_decoding for both).
if(_n_api EQUAL 0)
  message(FATAL_ERROR "runtime_symbols: ${LIB} defines neither lrt_open nor lrt::runtime::open_decoding")
endif()
message(STATUS "runtime_symbols: ${LIB}: ${_n_total} global symbols; every lrt and Eigen one is LRT_API")
