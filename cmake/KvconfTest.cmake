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

# kvconf_add_batched_test(NAME name PREFIX Torch/gemm BATCHES k1 k2 ... SOURCES ... LIBS ... LABELS ... [TIMEOUT s])
# One GoogleTest executable run as one CTest case per batch instead of one per GoogleTest case: <PREFIX>/<batch> runs
# every case named */<batch>__* (a kernel's cases: `<kernel>__<case_id>`), <PREFIX>/<batch>/Slow its Slow ones (label
# slow), <PREFIX>/other every case no batch selects (the registry tests; it may select none). For executables whose start-up dominates a case: a libtorch process
# spends ~0.35 s in libtorch's static initialisers before its first case. Each batch writes GoogleTest XML (every
# case's error/bound/headroom properties) to <build>/gtest-xml/<name>.<batch>.xml; its output lists every check.
# A batch that selects no case fails; one whose cases all skip (no libtorch in a non-ci build) is reported skipped.
function(kvconf_add_batched_test)
  cmake_parse_arguments(T "" "NAME;PREFIX;TIMEOUT" "SOURCES;LIBS;LABELS;BATCHES" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  _kvconf_test_executable(${T_NAME} "${T_SOURCES}" "${T_LIBS}")
  set(_xml ${PROJECT_BINARY_DIR}/gtest-xml)
  set(_props SKIP_REGULAR_EXPRESSION "\\[  PASSED  \\] 0 tests\\.[\r\n]+\\[  SKIPPED \\]"
             FAIL_REGULAR_EXPRESSION "\\[==========\\] 0 tests from 0 test suites ran")
  set(_rest "*:-")
  foreach(_b ${T_BATCHES})
    string(APPEND _rest "*/${_b}__*:")
  endforeach()
  foreach(_b ${T_BATCHES} other)
    if(_b STREQUAL "other")
      set(_fast "${_rest}")
      unset(_slow)
    else()
      set(_fast "*/${_b}__*:-*Slow*")
      set(_slow "*/${_b}__*Slow*")
    endif()
    add_test(NAME ${T_PREFIX}/${_b} COMMAND ${T_NAME} --gtest_filter=${_fast}
             --gtest_output=xml:${_xml}/${T_NAME}.${_b}.xml)
    if(_b STREQUAL "other")
      set_tests_properties(${T_PREFIX}/${_b} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
    else()
      set_tests_properties(${T_PREFIX}/${_b} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ${_props})
    endif()
    if(DEFINED _slow)
      add_test(NAME ${T_PREFIX}/${_b}/Slow COMMAND ${T_NAME} --gtest_filter=${_slow}
               --gtest_output=xml:${_xml}/${T_NAME}.${_b}.slow.xml)
      set_tests_properties(${T_PREFIX}/${_b}/Slow PROPERTIES LABELS "${T_LABELS};slow" TIMEOUT 3600 ${_props})
    endif()
  endforeach()
endfunction()
