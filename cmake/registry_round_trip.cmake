# The registry round trip: every (variant, schedule) pair that `lrt-train --list-variants` prints
#  1. trains 6 steps on generated text (exit 0, `model: V with S`, model.safetensors and
#     optim.safetensors written, the last step's training loss below the first's);
#  2. evaluates the checkpoint with lrt-eval --mode sequential and --mode parallel (exit 0,
#     `checkpoint ... (step 6): V with S`; recurrent variants print val_bpb_parallel (per pass),
#     val_bpb_sequential and val_bpb = the mode's value, the baseline only val_bpb; the numbers
#     equal the ones lrt-train printed for the model it saved);
#  3. samples from it with lrt-generate (exit 0, the output starts with the prompt);
#  4. resumes it with lrt-train --resume DIR --steps 8 (no --variant: the checkpoint's own pair;
#     `resumed from DIR at step 6`, `done: 8 steps`, the same `model:` line).
# V is the registry name or, for the entries without a preset name (lrt-src1, lrt-src2), the
# descriptive injection/projection/source name the checkpoint records. Every pair is run; the
# failures are listed together at the end.
#   cmake -DBIN=<dir of the programs> -DWORK_DIR=<scratch dir> [-DONLY=<regex on "V S">]
#         -P registry_round_trip.cmake
cmake_policy(VERSION 3.25)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(text "")
foreach(i RANGE 1 300)
  math(EXPR a "${i} % 7")
  string(APPEND text "Sentence ${a}: the quick brown fox jumps over the lazy dog ${a} times.\n")
endforeach()
set(corpus "${WORK_DIR}/corpus.txt")
file(WRITE "${corpus}" "${text}")

execute_process(COMMAND "${BIN}/lrt-train" --list-variants OUTPUT_VARIABLE list ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "lrt-train --list-variants failed (${rc}):\n${list}${err}")
endif()
# The CPU pairs: not the "--device cuda --variant ..." lines of a build with CUDA sessions.
string(REGEX REPLACE "--device [^\n]*" "" list "${list}")
string(REGEX MATCHALL "--variant [^ \n]+ --schedule [^ \n]+" pairs "${list}")
list(LENGTH pairs n)
if(n LESS 5 OR n GREATER 16)  # 12 built-in pairs, and the test build's lrt_add_variant pairs
  message(FATAL_ERROR "the registry lists ${n} pairs (expected 5..16):\n${list}")
endif()

# run(<name of the output variable> <what> <command...>): runs the command; sets <name> to its
# output (stdout + stderr) and `failed` to a message when it did not exit with status 0.
function(run var what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE o TIMEOUT 300)
  set(${var} "${o}" PARENT_SCOPE)
  if(NOT rc STREQUAL "0")
    set(failed "${what} exited with '${rc}':\n${o}" PARENT_SCOPE)
  endif()
endfunction()
# expect(<name of an output variable> <regex> <what>): sets `failed` unless the output matches.
function(expect var regex what)
  if(NOT failed AND NOT "${${var}}" MATCHES "${regex}")
    set(failed "${what}: the output does not match '${regex}':\n${${var}}" PARENT_SCOPE)
  endif()
endfunction()
# stage_end(): moves a stage's failure into the pair's report, so that the next stage runs.
macro(stage_end)
  if(failed)
    string(APPEND report "  - ${failed}\n")
    set(failed "")
  endif()
endmacro()
set(num "[0-9]+\\.[0-9]+")

set(failures "")
set(i 0)
foreach(pair IN LISTS pairs)
  string(REGEX REPLACE "^--variant ([^ ]+) --schedule ([^ ]+)$" "\\1;\\2" vs "${pair}")
  list(GET vs 0 variant)
  list(GET vs 1 schedule)
  if(DEFINED ONLY AND NOT "${variant} ${schedule}" MATCHES "${ONLY}")
    continue()
  endif()
  math(EXPR i "${i} + 1")
  set(out "${WORK_DIR}/run${i}")
  set(failed "")
  set(report "")  # the failed stages of this pair
  string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" vre "${variant}")
  string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" sre "${schedule}")
  set(name_re "(${vre}|[a-z]+/[a-z]+/(final|block[0-9]+))")

  # 1. train
  run(o_train "lrt-train" "${BIN}/lrt-train" --variant ${variant} --schedule ${schedule} --data "${corpus}" --steps 6
      --batch-rows 4 --sequence-len 32 --eval-every 6 --eval-tokens 128 --seed 1 --out "${out}")
  expect(o_train "\nmodel: ${name_re} with ${sre}[:( ]" "lrt-train")
  expect(o_train "\ndone: 6 steps.*\nval_bpb: ${num}\n$" "lrt-train")
  if(NOT failed)
    foreach(f model.safetensors optim.safetensors log.csv)
      if(NOT EXISTS "${out}/${f}")
        set(failed "lrt-train did not write ${out}/${f}")
      endif()
    endforeach()
  endif()
  if(failed)  # nothing to evaluate, sample or resume
    message(STATUS "${variant} ${schedule}: FAILED: ${failed}")
    list(APPEND failures "${variant} ${schedule}")
    continue()
  endif()
  string(REGEX MATCH "\nmodel: [^\n]*" model_line "${o_train}")
  file(STRINGS "${out}/log.csv" lines)
  list(GET lines 1 first)
  list(GET lines -1 last)
  string(REPLACE "," ";" first "${first}")
  string(REPLACE "," ";" last "${last}")
  list(GET first 2 l0)
  list(GET last 2 l1)
  if(NOT l1 LESS l0)
    set(failed "the training loss did not fall (${l0} -> ${l1})")
  endif()
  # The numbers lrt-train printed for the model it saved.
  set(recurrent OFF)
  if(o_train MATCHES "\nval_bpb_parallel: (${num})\nval_bpb_sequential: (${num})\n")
    set(recurrent ON)
    set(bpb_parallel "${CMAKE_MATCH_1}")
    set(bpb_sequential "${CMAKE_MATCH_2}")
  else()
    string(REGEX MATCH "\nval_bpb: (${num})\n$" _m "${o_train}")
    set(bpb_parallel "${CMAKE_MATCH_1}")
    set(bpb_sequential "${CMAKE_MATCH_1}")
  endif()
  stage_end()

  # 2. evaluate, both modes (--batch-rows 4 as in training: the same batches)
  foreach(mode sequential parallel)
    run(o_eval "lrt-eval --mode ${mode}" "${BIN}/lrt-eval" --checkpoint "${out}/model.safetensors" --data "${corpus}"
        --eval-tokens 128 --batch-rows 4 --mode ${mode})
    expect(o_eval "(^|\n)checkpoint [^\n]* \\(step 6\\): ${name_re} with ${sre}[,( ]" "lrt-eval --mode ${mode}")
    if(recurrent)
      if(mode STREQUAL "parallel")
        set(want "${bpb_parallel}")
      else()
        set(want "${bpb_sequential}")
      endif()
      string(REPLACE "." "\\." p_re "${bpb_parallel}")
      string(REPLACE "." "\\." s_re "${bpb_sequential}")
      string(REPLACE "." "\\." w_re "${want}")
      expect(o_eval "\nval_bpb_parallel: ${p_re} \\(pass0=${num}( pass[0-9]+=${num})+\\)\nval_bpb_sequential: ${s_re}\nval_bpb: ${w_re}\n$"
             "lrt-eval --mode ${mode} (lrt-train printed val_bpb_parallel ${bpb_parallel}, val_bpb_sequential ${bpb_sequential})")
    else()
      string(REPLACE "." "\\." w_re "${bpb_parallel}")
      expect(o_eval "\nval_bpb: ${w_re}\n$" "lrt-eval --mode ${mode} (lrt-train printed val_bpb ${bpb_parallel})")
      if(NOT failed AND o_eval MATCHES "val_bpb_(parallel|sequential)")
        set(failed "lrt-eval --mode ${mode}: the baseline printed a recurrent mode's line:\n${o_eval}")
      endif()
    endif()
    stage_end()
  endforeach()

  # 3. sample
  run(o_gen "lrt-generate" "${BIN}/lrt-generate" --checkpoint "${out}/model.safetensors" --prompt "Sentence"
      --max-new-tokens 8 --seed 1)
  expect(o_gen "^Sentence" "lrt-generate")
  stage_end()

  # 4. resume from the checkpoint (its own pair) to step 8
  run(o_res "lrt-train --resume" "${BIN}/lrt-train" --resume "${out}" --data "${corpus}" --steps 8 --eval-every 8
      --eval-tokens 128 --out "${out}-resumed")
  string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" model_re "${model_line}")
  expect(o_res "\nresumed from [^\n]* at step 6 of [0-9]+\n" "lrt-train --resume")
  expect(o_res "${model_re}\n" "lrt-train --resume (the same model line as the first run)")
  expect(o_res "\ndone: 8 steps.*\nval_bpb: ${num}\n$" "lrt-train --resume")
  if(NOT failed)
    file(STRINGS "${out}-resumed/log.csv" lines)
    list(LENGTH lines nl)
    if(NOT nl EQUAL 9)  # header + 8 steps
      set(failed "the resumed run's log.csv has ${nl} lines, expected 9")
    endif()
  endif()
  stage_end()

  if(report)
    message(STATUS "${variant} ${schedule}: FAILED:\n${report}")
    list(APPEND failures "${variant} ${schedule}")
  else()
    message(STATUS "${variant} ${schedule}: ok (loss ${l0} -> ${l1}, val_bpb ${bpb_sequential})")
  endif()
endforeach()

if(i EQUAL 0)
  message(FATAL_ERROR "no pair matches ONLY='${ONLY}'")
endif()
if(failures)
  list(LENGTH failures nf)
  list(JOIN failures ", " failures)
  message(FATAL_ERROR "registry round trip: ${nf} of ${i} pairs failed: ${failures}")
endif()
message(STATUS "registry round trip: all ${i} pairs ok")
