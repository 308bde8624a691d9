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
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir "${WORK}/plain" -R "^Vllm(Scenarios|Adapter|CrossCheck)\\." -V
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "Test +#[0-9]+: Vllm[A-Za-z]+\\.[A-Za-z0-9]+ \\.+\\*\\*\\*Skipped" skipped "${out}")
list(LENGTH skipped n)
string(REGEX REPLACE "[ \n]+" " " out_line "${out}")  # ctest wraps long lines
string(REGEX REPLACE "\\\\" "" plain_reason "${reason}")
string(FIND "${out_line}" "skipped: vLLM not found: ${plain_reason}" at)
if(NOT rc EQUAL 0 OR NOT n EQUAL 3 OR at EQUAL -1)
  message(FATAL_ERROR "expected the 3 vLLM tests skipped naming the reason, got exit ${rc}, ${n} skipped:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${common} -B "${WORK}/required" -DKVCONF_REQUIRE_VLLM=ON
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "[ \n]+" " " err_line "${err}")  # CMake wraps its messages
if(rc EQUAL 0 OR NOT err_line MATCHES "KVCONF_REQUIRE_VLLM is ON but vLLM was not found")
  message(FATAL_ERROR "configure with KVCONF_REQUIRE_VLLM and no vLLM: exit ${rc}, expected a failure naming it:\n${err}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "ok: without vLLM its tests skip with the reason (${n} cases); required, configure fails")
