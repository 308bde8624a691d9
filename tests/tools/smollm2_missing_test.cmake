# Without SmolLM2-135M-Instruct (docs/MODELS.md; scripts/smollm2.sh not run): configure succeeds, says why, and the
# model's tests skip with that reason; with KVCONF_REQUIRE_SMOLLM2 (the ci preset) configure fails naming it. Two
# fresh configures of the source tree (no build). Run as: cmake -DSRC=<source dir> -DWORK=<scratch dir> -P <this file>
cmake_policy(VERSION 3.20)
file(REMOVE_RECURSE "${WORK}")
set(common -S "${SRC}" -DKVCONF_ENABLE_CUDA=OFF -DKVCONF_SMOLLM2_GGUF=${WORK}/absent/SmolLM2.gguf)
execute_process(COMMAND ${CMAKE_COMMAND} ${common} -B "${WORK}/plain" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure without the model failed (exit ${rc}):\n${out}\n${err}")
endif()
set(reason "no ${WORK}/absent/SmolLM2.gguf \\(run scripts/setup.sh, which runs scripts/smollm2.sh\\)")
if(NOT out MATCHES "SmolLM2-135M-Instruct: not found: ${reason}")
  message(FATAL_ERROR "configure did not say why the model is missing:\n${out}")
endif()
# The converters' test needs no build: its SmolLM2 cases skip naming the reason, the others run.
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir "${WORK}/plain" -R "^RealFixtures\\.Converters$" -V
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "SKIPPED[^\n]*SmolLM2-135M-Instruct: ${reason}" skipped "${out}")
list(LENGTH skipped n)
if(NOT rc EQUAL 0 OR n LESS 2)
  message(FATAL_ERROR "expected RealFixtures.Converters to pass with its 2 SmolLM2 cases skipped naming the reason, "
                      "got exit ${rc} and ${n}:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${common} -B "${WORK}/required" -DKVCONF_REQUIRE_SMOLLM2=ON
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX REPLACE "[ \n]+" " " err_line "${err}")  # CMake wraps its messages
if(rc EQUAL 0 OR NOT err_line MATCHES "KVCONF_REQUIRE_SMOLLM2 is ON but the SmolLM2-135M-Instruct model cannot be conv")
  message(FATAL_ERROR "configure with KVCONF_REQUIRE_SMOLLM2 and no model: exit ${rc}, expected a failure naming "
                      "it:\n${err}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "ok: without the model its tests skip with the reason (${n} cases); required, configure fails")
