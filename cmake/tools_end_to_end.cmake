# End-to-end run of the programs on generated text: lrt-train (2 steps), resume to 3 steps,
# lrt-eval (ends with "val_bpb: X"), lrt-generate; checks the files the interface promises.
#   cmake -DBIN=<dir of the programs> -DWORK_DIR=<scratch dir> -P tools_end_to_end.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(words the quick brown fox jumps over a lazy dog and then runs far away from home)
set(text "")
foreach(i RANGE 1 400)
  math(EXPR a "(${i} * 7) % 15")
  math(EXPR b "(${i} * 11) % 15")
  list(GET words ${a} wa)
  list(GET words ${b} wb)
  string(APPEND text "Line ${i}: ${wa} ${wb} ${wa}, said the ${wb}.\n")
endforeach()
file(WRITE "${WORK_DIR}/corpus.txt" "${text}")

function(run expect_regex)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 600)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "status '${rc}' from: ${ARGN}\n${out}")
  endif()
  if(NOT out MATCHES "${expect_regex}")
    message(FATAL_ERROR "output does not match '${expect_regex}': ${ARGN}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(out "${WORK_DIR}/run")
run("val_bpb: [0-9.]+" "${BIN}/lrt-train" --preset tiny --data "${WORK_DIR}/corpus.txt" --steps 3 --seed 1
    --batch-rows 4 --eval-every 2 --eval-tokens 512 --out "${out}")
foreach(f model.safetensors optim.safetensors log.csv loss.svg)
  if(NOT EXISTS "${out}/${f}")
    message(FATAL_ERROR "lrt-train did not write ${out}/${f}")
  endif()
endforeach()
file(READ "${out}/loss.svg" svg)
if(NOT svg MATCHES "^<svg" OR NOT svg MATCHES "</svg>")
  message(FATAL_ERROR "loss.svg is not an SVG document")
endif()
file(STRINGS "${out}/log.csv" lines)
list(LENGTH lines n)
if(NOT n EQUAL 4)  # header + 3 steps
  message(FATAL_ERROR "log.csv has ${n} lines, expected 4")
endif()
# Resume the 3-step run's checkpoint (saved at step 2 and 3) and continue to step 5.
run("resumed from .* at step 3" "${BIN}/lrt-train" --data "${WORK_DIR}/corpus.txt" --resume "${out}" --steps 5
    --batch-rows 4 --eval-every 1 --eval-tokens 512 --out "${WORK_DIR}/run2")
run("val_bpb: [0-9.]+\n$" "${BIN}/lrt-eval" --checkpoint "${out}/model.safetensors" --data "${WORK_DIR}/corpus.txt"
    --eval-tokens 512)
run("^Line" "${BIN}/lrt-generate" --checkpoint "${out}/model.safetensors" --prompt "Line" --max-new-tokens 20
    --temperature 0.7 --top-k 20 --top-p 0.9 --seed 3)
set(first "${last_output}")
run("^Line" "${BIN}/lrt-generate" --checkpoint "${out}/model.safetensors" --prompt "Line" --max-new-tokens 20
    --temperature 0.7 --top-k 20 --top-p 0.9 --seed 3)
if(NOT first STREQUAL last_output)
  message(FATAL_ERROR "lrt-generate with the same seed gave different text:\n${first}\n${last_output}")
endif()
# The baseline and an LRT at matched compute; the LRT checkpoint evaluates in both modes.
run("compute budget 4096 token-forwards.* -> 8 steps" "${BIN}/lrt-train" --variant baseline --data "${WORK_DIR}/corpus.txt"
    --budget-forwards 4096 --batch-rows 4 --eval-tokens 256 --out "${WORK_DIR}/base")
run("compute budget 4096 token-forwards.* -> 4 steps" "${BIN}/lrt-train" --variant lrt --data "${WORK_DIR}/corpus.txt"
    --budget-forwards 4096 --batch-rows 4 --eval-tokens 256 --out "${WORK_DIR}/lrt")
run("val_bpb_parallel: [0-9.]+ \\(pass0=[0-9.]+ pass1=[0-9.]+ pass2=[0-9.]+\\)\nval_bpb_sequential: [0-9.]+\nval_bpb: [0-9.]+\n$"
    "${BIN}/lrt-eval" --checkpoint "${WORK_DIR}/lrt/model.safetensors" --data "${WORK_DIR}/corpus.txt" --eval-tokens 256)
run("^Line" "${BIN}/lrt-generate" --checkpoint "${WORK_DIR}/lrt/model.safetensors" --prompt "Line" --max-new-tokens 10)
# --checkpoint also takes the run directory: the same numbers as its model.safetensors.
run("val_bpb: [0-9.]+\n$" "${BIN}/lrt-eval" --checkpoint "${WORK_DIR}/lrt" --data "${WORK_DIR}/corpus.txt" --eval-tokens 256)
string(REGEX MATCH "val_bpb: [0-9.]+" by_dir "${last_output}")
run("val_bpb: [0-9.]+\n$" "${BIN}/lrt-eval" --checkpoint "${WORK_DIR}/lrt/model.safetensors" --data "${WORK_DIR}/corpus.txt"
    --eval-tokens 256)
string(REGEX MATCH "val_bpb: [0-9.]+" by_file "${last_output}")
if(NOT by_dir STREQUAL by_file)
  message(FATAL_ERROR "lrt-eval on the run directory gave '${by_dir}', on its model.safetensors '${by_file}'")
endif()
run("^Line" "${BIN}/lrt-generate" --checkpoint "${WORK_DIR}/lrt" --prompt "Line" --max-new-tokens 10)
message(STATUS "tools end to end: ok")
