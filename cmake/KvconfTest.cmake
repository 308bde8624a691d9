# kvconf_add_test(): one GoogleTest executable, discovered per case, with CTest labels.
# Cases whose name contains "Slow" (e.g. Fp16Conversion.SlowAllFloat32Patterns) also get the
# `slow` label, so the default run (`ctest -LE slow`) skips the heavy sweeps.
include(GoogleTest)

# kvconf_add_test(NAME name SOURCES a.cpp ... LIBS lib ... LABELS unit ... [TIMEOUT s])
function(kvconf_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # gtest_discover_tests flattens PROPERTIES lists twice (GoogleTest.cmake, GoogleTestAddTests.cmake in
  # CMake 3.25): escape the list separators so LABELS stays a list in the generated set_tests_properties.
  string(REPLACE ";" "\\\\\\\\\\\\\\;" _labels "${T_LABELS}")
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main kvconf::flags)
  target_compile_definitions(${T_NAME} PRIVATE KVCONF_SHARED_DIR="${KVCONF_SHARED_DIR}")
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
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
    PROPERTIES LABELS "${_labels}\\\\\\\\\\\\\\;slow" TIMEOUT 3600)
endfunction()
