# Shared by the CLI end-to-end scripts: running kvconf with an expected exit status, and the bad-input contract (exit
# 2, exactly one stderr line naming the problem).

# kv(WANT ARGS...): runs `${KVCONF} ARGS...`, expects exit status WANT; sets last_out / last_err in the caller.
function(kv want)
  execute_process(COMMAND "${KVCONF}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL want)
    message(FATAL_ERROR "kvconf ${ARGN}: exit ${rc}, expected ${want}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
endfunction()

# kvconf_expect_bad(WHAT PATTERN ARGS...): runs `${KVCONF} ARGS...`, expects exit 2 and exactly one non-empty stderr
# line matching PATTERN (a regex, case-insensitive by lowering).
function(kvconf_expect_bad what pattern)
  execute_process(COMMAND "${KVCONF}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "${what}: expected exit 2, got ${rc}\nstdout: ${out}\nstderr: ${err}")
  endif()
  string(REGEX REPLACE "\n$" "" body "${err}")
  if(body STREQUAL "" OR body MATCHES "\n")
    message(FATAL_ERROR "${what}: expected exactly one stderr line, got:\n${err}")
  endif()
  string(TOLOWER "${body}" lower)
  string(TOLOWER "${pattern}" lpattern)
  if(NOT lower MATCHES "${lpattern}")
    message(FATAL_ERROR "${what}: the stderr line does not match '${pattern}': ${body}")
  endif()
  message(STATUS "ok ${what}: ${body}")
endfunction()

# kvconf_records(OUT DIR...): the records of folders' pairs.jsonl, each without "seconds", sorted: what must agree
# between a merge of shards and one run.
function(kvconf_records out)
  set(all "")
  foreach(dir ${ARGN})
    file(STRINGS "${dir}/pairs.jsonl" lines)
    foreach(line IN LISTS lines)
      string(JSON line REMOVE "${line}" seconds)
      list(APPEND all "${line}")
    endforeach()
  endforeach()
  list(SORT all)
  set(${out} "${all}" PARENT_SCOPE)
endfunction()
