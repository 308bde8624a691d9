# Without vLLM (docs/VLLM.md; scripts/vllm.sh not run): configure succeeds, says why, and the vLLM tests skip with that
# reason; with KVCONF_REQUIRE_VLLM (the ci preset) configure fails naming it. Two fresh configures of the source tree
# (no build). Run as: cmake -DSRC=<source dir> -DWORK=<scratch dir> -P <this file>
cmake_policy(VERSION 3.20)
file(REMOVE_RECURSE "${WORK}")
set(common -S "${SRC}" -DKVCONF_ENABLE_CUDA=OFF -DKVCONF_VLLM_PYTHON=${WORK}/absent/python)
execute_process(COMMAND ${CMAKE_COMMAND} ${common} -B "${WORK}/plain" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure without vLLM failed (exit ${rc}):\n${out}\n${err}")
endif()
set(reason "no ${WORK}/absent/python \\(run scripts/setup.sh, which runs scripts/vllm.sh, or set KVCONF_VLLM_PYTHON\\)")
if(NOT out MATCHES "kvconf: vLLM: not found: ${reason}")
  message(FATAL_ERROR "configure did not say why vLLM is missing:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir "${WORK}/plain" -R "^Vllm(Scenarios|Adapter)\\." -V
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "skipped: vLLM not found: ${reason}" skipped "${out}")
list(LENGTH skipped n)
if(NOT rc EQUAL 0 OR NOT n EQUAL 2 OR NOT out MATCHES "2 tests skipped|Skipped")
  message(FATAL_ERROR "expected the 2 vLLM tests skipped naming the reason, got exit ${rc} and ${n}:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${common} -B "${WORK}/required" -DKVCONF_REQUIRE_VLLM=ON
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "[ \n]+" " " err_line "${err}")  # CMake wraps its messages
if(rc EQUAL 0 OR NOT err_line MATCHES "KVCONF_REQUIRE_VLLM is ON but vLLM was not found")
  message(FATAL_ERROR "configure with KVCONF_REQUIRE_VLLM and no vLLM: exit ${rc}, expected a failure naming it:\n${err}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "ok: without vLLM its tests skip with the reason (${n} cases); required, configure fails")
