# Runs two commands and requires both to succeed with the same standard output (the lean
# decoder's prefill modes: greedy text after fixed-point prefill is the text after exact prefill).
#   cmake -DCMD_A=<;-list> -DCMD_B=<;-list> [-DWORK_DIR=dir] -P same_output.cmake
if(NOT WORK_DIR)
  set(WORK_DIR ".")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}")
foreach(_w IN ITEMS A B)
  execute_process(COMMAND ${CMD_${_w}} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out_${_w}
                  ERROR_VARIABLE err TIMEOUT 600)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "exit status '${rc}' from: ${CMD_${_w}}\n--- output ---\n${out_${_w}}${err}")
  endif()
endforeach()
if(NOT out_A STREQUAL out_B)
  message(FATAL_ERROR "outputs differ:\n${CMD_A}\n--- output ---\n${out_A}\n${CMD_B}\n--- output ---\n${out_B}")
endif()
string(LENGTH "${out_A}" _len)
message(STATUS "same output (${_len} bytes): ${CMD_A} / ${CMD_B}")
