# Runs one command and checks its exit status and output (stdout + stderr).
#   cmake -DCMD=<;-list> -DEXPECT_RC=<n> -DEXPECT_REGEX=<regex> [-DEXPECT_MIN_LENGTH=<bytes>]
#         [-DWORK_DIR=dir] -P expect_run.cmake
# A crash (signal) never matches an expected status: execute_process reports it as a string.
if(WORK_DIR)
  file(MAKE_DIRECTORY "${WORK_DIR}")
else()
  set(WORK_DIR ".")
endif()
execute_process(COMMAND ${CMD} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out TIMEOUT 600)
if(NOT rc STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "expected exit status ${EXPECT_RC}, got '${rc}' from: ${CMD}\n--- output ---\n${out}")
endif()
if(DEFINED EXPECT_REGEX AND NOT out MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}': ${CMD}\n--- output ---\n${out}")
endif()
if(DEFINED EXPECT_MIN_LENGTH)
  string(LENGTH "${out}" len)
  if(len LESS EXPECT_MIN_LENGTH)
    message(FATAL_ERROR "output has ${len} bytes, expected at least ${EXPECT_MIN_LENGTH}: ${CMD}\n--- output ---\n${out}")
  endif()
endif()
message(STATUS "ok (${rc}): ${CMD}")
