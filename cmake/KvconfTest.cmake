# kvconf_add_test(): one GoogleTest executable, discovered per case, with CTest labels.
# Cases whose name contains "Slow" (e.g. Fp16Conversion.SlowAllFloat32Patterns) also get the
# `slow` label, so the default run (`ctest -LE slow`) skips the heavy sweeps.
include(GoogleTest)

# The GoogleTest executable of a test target: sources, libraries, gtest_main, the shared-data path, tests/support.
function(_kvconf_test_executable name sources libs)
  add_executable(${name} ${sources})
  target_link_libraries(${name} PRIVATE ${libs} GTest::gtest GTest::gtest_main kvconf::flags)
  target_compile_definitions(${name} PRIVATE KVCONF_SHARED_DIR="${KVCONF_SHARED_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  kvconf_light_optimisation(${name})  # cmake/KvconfWarnings.cmake: the test's own code is not what is measured
endfunction()

# kvconf_add_test(NAME name SOURCES a.cpp ... LIBS lib ... LABELS unit ... [TIMEOUT s])
function(kvconf_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # How many times gtest_discover_tests flattens PROPERTIES lists depends on the CMake version: twice before 3.31,
  # once from 3.31 to 4.3, not at all from 4.4 on (checked with 3.25, 3.30, 3.31, 4.0, 4.1, 4.2, 4.3, 4.4.0 and
  # 4.4.3: the GPU machine's 4.4.3 made "equivalence;gpu;..." one label under the 4.1 escaping, so
  # `ctest -L '^gpu$'` selected none of them). Escape the list separators so LABELS stays a list;
  # KvconfCtest.LabelsAreLists fails when it does not.
  if(CMAKE_VERSION VERSION_LESS 3.31)
    set(_sep "\\\\\\\\\\\\\\;")
  elseif(CMAKE_VERSION VERSION_LESS 4.4)
    set(_sep "\\;")
  else()
    set(_sep ";")
  endif()
  string(REPLACE ";" "${_sep}" _labels "${T_LABELS}")
  _kvconf_test_executable(${T_NAME} "${T_SOURCES}" "${T_LIBS}")
  gtest_discover_tests(${T_NAME}
    TEST_FILTER "*-*Slow*"
    TEST_LIST ${T_NAME}_FAST
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    NO_PRETTY_VALUES
    PROPERTIES LABELS "${_labels}" TIMEOUT ${T_TIMEOUT})
  gtest_discover_tests(${T_NAME}
    TEST_FILTER "*Slow*"
    TEST_LIST ${T_NAME}_SLOW
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    NO_PRETTY_VALUES
    PROPERTIES LABELS "${_labels}${_sep}slow" TIMEOUT 3600)
endfunction()

# kvconf_add_batched_test(NAME name PREFIX Torch/gemm SOURCES ... LIBS ... LABELS ... [TIMEOUT s])
# One GoogleTest executable run as one CTest case per kernel instead of one per GoogleTest case: <PREFIX>/<kernel>
# runs every case named */<kernel>__* (a kernel's cases: `<kernel>__<case_id>`), <PREFIX>/<kernel>/Slow its Slow ones
# (label slow), <PREFIX>/other every case no kernel selects (the registry tests; it may select none). The kernels are
# read from the executable's own case list when ctest lists the tests (cmake/KvconfBatchDiscovery.cmake), so the
# registry is the only list. For executables whose start-up dominates a case: a libtorch process spends ~0.35 s in
# libtorch's static initialisers before its first case. Each batch writes GoogleTest XML (every case's
# error/bound/headroom properties) to <build>/gtest-xml/<name>.<kernel>.xml; its output lists every check. A batch
# that selects no case fails; one whose cases all skip (no libtorch in a non-ci build) is reported skipped.
function(kvconf_add_batched_test)
  cmake_parse_arguments(T "" "NAME;PREFIX;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  _kvconf_test_executable(${T_NAME} "${T_SOURCES}" "${T_LIBS}")
  set(_include ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_batches_include.cmake)
  file(GENERATE OUTPUT ${_include} CONTENT "set(KVCONF_BATCH_EXE [==[$<TARGET_FILE:${T_NAME}>]==])
set(KVCONF_BATCH_PREFIX [==[${T_PREFIX}]==])
set(KVCONF_BATCH_LABELS [==[${T_LABELS}]==])
set(KVCONF_BATCH_TIMEOUT ${T_TIMEOUT})
set(KVCONF_BATCH_XML [==[${PROJECT_BINARY_DIR}/gtest-xml/${T_NAME}]==])
set(KVCONF_BATCH_LIST [==[${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_batches.cmake]==])
include([==[${PROJECT_SOURCE_DIR}/cmake/KvconfBatchDiscovery.cmake]==])
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_include})
endfunction()

# kvconf_test_setup_case(<target> <case> <fixture>): GoogleTest case <case> of kvconf_add_test's <target> is the CTest
# fixture setup of its other cases (FIXTURES_SETUP <fixture> on it, FIXTURES_REQUIRED on the rest), so that CTest runs
# it first, and alone of them, also when a filter selects only the others: e.g. one process writing what every case
# reads. Set when ctest reads the discovered list (<target>_FAST), in a file included after discovery's.
function(kvconf_test_setup_case target case fixture)
  set(_include ${CMAKE_CURRENT_BINARY_DIR}/${target}_setup_case.cmake)
  file(WRITE ${_include} "foreach(_t IN LISTS ${target}_FAST)
  if(_t STREQUAL [==[${case}]==])
    set_tests_properties(\"\${_t}\" PROPERTIES FIXTURES_SETUP ${fixture})
  else()
    set_tests_properties(\"\${_t}\" PROPERTIES FIXTURES_REQUIRED ${fixture})
  endif()
endforeach()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_include})
endfunction()
