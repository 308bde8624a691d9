# `kvconf model` sharded by a Slurm array's variables and merged by `kvconf report`: three shards (SLURM_ARRAY_TASK_ID
# 4..6, MIN 4, COUNT 3) equal one unsharded run (records without wall times); a missing shard, a duplicated shard and
# an unfinished shard are exit 2 naming the pair and the folders; --partial reports them; --shard beats the variables;
# malformed variables are exit 2 naming the variable. Needs -DKVCONF, -DOUT.
foreach(v KVCONF OUT)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "cli_report_shards_test.cmake: -D${v}=... is required")
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/cli_support.cmake)
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
set(RUN model --model fixture:llama2-tiny --profile fp16-eager --n 3 --seeds 0 --strategies greedy,topk
    --max-new-tokens 8)

# kv_env(WANT "VAR=V;VAR=V" ARGS...): kv() with environment variables set (cmake -E env).
function(kv_env want env)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} "${KVCONF}" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL want)
    message(FATAL_ERROR "${env} kvconf ${ARGN}: exit ${rc}, expected ${want}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
endfunction()


# Three array tasks, ids 4..6 (an array not starting at 0), and the same options unsharded.
foreach(i 0 1 2)
  math(EXPR id "${i} + 4")
  kv_env(0 "SLURM_ARRAY_TASK_ID=${id};SLURM_ARRAY_TASK_MIN=4;SLURM_ARRAY_TASK_COUNT=3" ${RUN} --out "${OUT}/s${i}")
  if(NOT last_out MATCHES "shard ${i}/3 from SLURM_ARRAY_TASK_ID=${id} - SLURM_ARRAY_TASK_MIN=4 of SLURM_ARRAY_TASK_COUNT=3")
    message(FATAL_ERROR "task ${id}: no line naming shard ${i}/3 and the Slurm variables:\n${last_out}")
  endif()
  file(READ "${OUT}/s${i}/manifest.json" manifest)
  string(JSON shard GET "${manifest}" options shard)
  if(NOT shard STREQUAL "${i}/3")
    message(FATAL_ERROR "task ${id}: manifest shard ${shard}, expected ${i}/3")
  endif()
endforeach()
kv(0 ${RUN} --out "${OUT}/single")
kvconf_records(merged "${OUT}/s0" "${OUT}/s1" "${OUT}/s2")
kvconf_records(single "${OUT}/single")
list(LENGTH single n_single)
if(NOT n_single EQUAL 6 OR NOT merged STREQUAL single)
  message(FATAL_ERROR "the three shards' records differ from the unsharded run's (${n_single} records):\n"
                      "shards: ${merged}\nsingle: ${single}")
endif()

# The complete merge: exit 0, every planned pair once.
kv(0 report --in "${OUT}/s0" "${OUT}/s1" "${OUT}/s2" --out "${OUT}/merged")
if(NOT last_out MATCHES "fixture:llama2-tiny: 3 of 3 shards, 6 of 6 planned pairs, each once" OR
   NOT last_out MATCHES "6 run pairs")
  message(FATAL_ERROR "complete merge: no coverage line or not 6 pairs:\n${last_out}")
endif()

# A shard left out, a shard given twice, a copy of a shard, an unfinished shard: exit 2 naming the pair and folders.
# (the manifests list the sampled prompt ids, so the missing pair is named with the shard that should hold it)
kvconf_expect_bad("a shard left out"
                  "pair 'fixture:llama2-tiny\\|fp16-eager\\|[a-z]+\\|0\\|ids:[0-9]+' \\(plan item [0-9]+, shard 1/3\\) is missing: no --in folder is shard 1/3.*--partial"
                  report --in "${OUT}/s0" "${OUT}/s2" --out "${OUT}/bad")
kvconf_expect_bad("a shard given twice" "pair 'fixture:llama2-tiny\\|fp16-eager\\|[a-z]+\\|0\\|ids:[0-9]+' is in both .*s2 \\(shard 2/3\\) and .*s2 \\(shard 2/3\\)"
                  report --in "${OUT}/s0" "${OUT}/s1" "${OUT}/s2" "${OUT}/s2" --out "${OUT}/bad")
file(COPY "${OUT}/s1/" DESTINATION "${OUT}/s1copy")
kvconf_expect_bad("a copy of a shard" "is in both .*s1 \\(shard 1/3\\) and .*s1copy \\(shard 1/3\\)"
                  report --in "${OUT}/s0" "${OUT}/s1" "${OUT}/s1copy" "${OUT}/s2" --out "${OUT}/bad")
file(STRINGS "${OUT}/s1/pairs.jsonl" s1_lines)
list(GET s1_lines 0 kept)
file(MAKE_DIRECTORY "${OUT}/s1cut")
file(COPY "${OUT}/s1/manifest.json" DESTINATION "${OUT}/s1cut")
file(WRITE "${OUT}/s1cut/pairs.jsonl" "${kept}\n")
kvconf_expect_bad("an unfinished shard" "pair 'fixture:llama2-tiny\\|fp16-eager\\|topk\\|0\\|ids:[0-9]+' \\(plan item [0-9]+, shard 1/3\\) is missing: .*s1cut does not hold it.*--resume"
                  report --in "${OUT}/s0" "${OUT}/s1cut" "${OUT}/s2" --out "${OUT}/bad")
kv(0 report --in "${OUT}/s0" "${OUT}/s1cut" "${OUT}/s2" --out "${OUT}/partial" --partial)
if(NOT last_out MATCHES "5 of 6 planned pairs.*missing: pair" OR NOT last_out MATCHES "5 run pairs")
  message(FATAL_ERROR "--partial: no line naming the missing pair, or not 5 pairs:\n${last_out}")
endif()
# Shards of one run split into different numbers of shards.
kv(0 ${RUN} --shard 0/2 --out "${OUT}/half0")
kvconf_expect_bad("different shard counts" "split into different numbers of shards"
                  report --in "${OUT}/s0" "${OUT}/half0" --out "${OUT}/bad")

# --shard beats the variables; malformed or inconsistent variables are exit 2 naming them.
kv_env(0 "SLURM_ARRAY_TASK_ID=2;SLURM_ARRAY_TASK_COUNT=3" ${RUN} --shard 1/2 --out "${OUT}/flag")
file(READ "${OUT}/flag/manifest.json" manifest)
string(JSON shard GET "${manifest}" options shard)
if(NOT shard STREQUAL "1/2" OR NOT last_out MATCHES "shard 1/2 from --shard")
  message(FATAL_ERROR "--shard 1/2 with SLURM_ARRAY_TASK_ID=2 set: manifest shard ${shard}\n${last_out}")
endif()
foreach(case "SLURM_ARRAY_TASK_ID=x|SLURM_ARRAY_TASK_COUNT=3|SLURM_ARRAY_TASK_ID='x': expected a non-negative decimal integer"
             "SLURM_ARRAY_TASK_ID=1|SLURM_ARRAY_TASK_COUNT|SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not"
             "SLURM_ARRAY_TASK_ID=3|SLURM_ARRAY_TASK_COUNT=3|SLURM_ARRAY_TASK_ID=3 of SLURM_ARRAY_TASK_COUNT=3: expected")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 a)
  list(GET parts 1 b)
  list(GET parts 2 pattern)
  if(b STREQUAL "SLURM_ARRAY_TASK_COUNT")
    set(b "SLURM_ARRAY_TASK_COUNT_UNSET=1")
  endif()
  set(KVCONF_REAL "${KVCONF}")
  set(KVCONF "${CMAKE_COMMAND}")
  kvconf_expect_bad("${a} ${b}" "${pattern}" -E env --unset=SLURM_ARRAY_TASK_COUNT "${a}" "${b}" "${KVCONF_REAL}"
                    ${RUN} --out "${OUT}/envbad")
  set(KVCONF "${KVCONF_REAL}")
endforeach()
