# Without llama.cpp (docs/LLAMA_CPP.md): configure succeeds and the llama.cpp tests show as skipped with the reason;
# with KVCONF_REQUIRE_LLAMA_CPP (the ci preset) configure fails naming it. Two fresh configures of the source tree
# (no build). Run as: cmake -DSRC=<source dir> -DWORK=<scratch dir> -P llama_missing_test.cmake
cmake_policy(VERSION 3.20)
file(REMOVE_RECURSE "${WORK}")
set(common -S "${SRC}" -DKVCONF_ENABLE_CUDA=OFF -DKVCONF_LLAMA_CPP_DIR=${WORK}/no-llama)
execute_process(COMMAND ${CMAKE_COMMAND} ${common} -B "${WORK}/plain" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure without llama.cpp failed (exit ${rc}):\n${out}\n${err}")
endif()
if(NOT out MATCHES "llama.cpp: not found: no llama-config.cmake under ${WORK}/no-llama")
  message(FATAL_ERROR "configure did not say why llama.cpp is missing:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir "${WORK}/plain" -R "^LlamaCpp\\." -E MissingSkips
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "LlamaCpp\\.[A-Za-z0-9]+ \\(Skipped\\)" skipped "${out}")
list(LENGTH skipped n)
if(NOT rc EQUAL 0 OR n LESS 3)
  message(FATAL_ERROR "expected the llama.cpp tests to skip (exit 0, 3 skipped), got exit ${rc}:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${common} -B "${WORK}/required" -DKVCONF_REQUIRE_LLAMA_CPP=ON
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "KVCONF_REQUIRE_LLAMA_CPP is ON but llama.cpp was not found")
  message(FATAL_ERROR "configure with KVCONF_REQUIRE_LLAMA_CPP and no llama.cpp: exit ${rc}, expected a failure "
                      "naming it:\n${err}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "ok: without llama.cpp ${n} tests skip with the reason; required, configure fails naming it")
