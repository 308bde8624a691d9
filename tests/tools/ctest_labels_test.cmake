# The labels users filter on (DESIGN.md): every test whose name says Slow carries `slow`, and `-L '^gpu$'`,
# `-L '^unit$'`, `-L '^slow$'`, `-L '^equivalence$'` each select tests. Catches a CMake whose gtest_discover_tests
# escapes PROPERTIES lists differently (cmake/KvconfTest.cmake), which turns a label list into one label.
# Run: cmake -DCTEST=<ctest> -DBUILD=<build dir> -P ctest_labels_test.cmake
function(count out)
  execute_process(COMMAND "${CTEST}" --test-dir "${BUILD}" -N ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE text
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT text MATCHES "Total Tests: ([0-9]+)")
    message(FATAL_ERROR "ctest -N ${ARGN}: exit ${rc}\n${text}\n${err}")
  endif()
  set(${out} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

foreach(label gpu unit slow equivalence)
  count(n -L "^${label}$")
  if(n EQUAL 0)
    message(FATAL_ERROR "ctest -L '^${label}$' selects no test: the labels are not a list (cmake/KvconfTest.cmake)")
  endif()
  message(STATUS "-L ^${label}$: ${n} tests")
endforeach()
count(unlabelled -R "Slow" -LE "^slow$")
if(NOT unlabelled EQUAL 0)
  message(FATAL_ERROR "${unlabelled} tests named *Slow* lack the slow label, so the default run would include them")
endif()
# The batched suites (kvconf_add_batched_test: one case per kernel, read from the suite's case list at ctest time,
# cmake/KvconfBatchDiscovery.cmake) exist and carry their labels: every TorchCuda/ case is a gpu test.
count(torch_cuda -R "^TorchCuda/")
count(torch_cuda_gpu -L "^gpu$" -R "^TorchCuda/")
if(torch_cuda EQUAL 0 OR NOT torch_cuda EQUAL torch_cuda_gpu)
  message(FATAL_ERROR "TorchCuda/ batches: ${torch_cuda}, of which labelled gpu: ${torch_cuda_gpu}")
endif()
message(STATUS "TorchCuda/ batches: ${torch_cuda}, all labelled gpu")
