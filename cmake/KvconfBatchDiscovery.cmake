# Read by ctest before it lists the tests (TEST_INCLUDE_FILES, written by kvconf_add_batched_test in
# cmake/KvconfTest.cmake): the batches of one batched GoogleTest executable are the kernels its cases name, taken
# from `<exe> --gtest_list_tests` (a case `Suite.Claim/<kernel>__<case_id>` belongs to batch <kernel>), so a kernel
# the registry gains has its CTest cases with no CMake list to edit. The list is kept in KVCONF_BATCH_LIST and
# re-read when the executable is newer. Inputs: KVCONF_BATCH_{EXE,PREFIX,LABELS,TIMEOUT,XML,LIST}.
if(NOT EXISTS "${KVCONF_BATCH_EXE}")
  # Not built yet: one case that fails, naming what to build (as GoogleTest's discovery does).
  add_test("${KVCONF_BATCH_PREFIX}/NOT_BUILT" "${KVCONF_BATCH_EXE}")
  return()
endif()
if(NOT EXISTS "${KVCONF_BATCH_LIST}" OR "${KVCONF_BATCH_EXE}" IS_NEWER_THAN "${KVCONF_BATCH_LIST}")
  execute_process(COMMAND "${KVCONF_BATCH_EXE}" --gtest_list_tests OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                  RESULT_VARIABLE _rc TIMEOUT 60)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "kvconf: listing the cases of ${KVCONF_BATCH_EXE} failed (${_rc}):\n${_out}${_err}")
  endif()
  set(_ids "")
  set(_other 0)
  string(REPLACE "\n" ";" _lines "${_out}")
  foreach(_line IN LISTS _lines)
    if(NOT _line MATCHES "^  ")  # suite lines and GoogleTest's own messages
      continue()
    endif()
    string(REGEX REPLACE "#.*" "" _case "${_line}")
    string(STRIP "${_case}" _case)
    if(_case MATCHES "/([A-Za-z0-9_]+)__")
      string(REGEX REPLACE "__.*" "" _id "${CMAKE_MATCH_1}")
      list(FIND _ids "${_id}" _at)
      if(_at EQUAL -1)
        list(APPEND _ids "${_id}")
      endif()
    else()
      set(_other 1)
    endif()
  endforeach()
  if(NOT _ids)
    message(FATAL_ERROR "kvconf: ${KVCONF_BATCH_EXE} lists no case named <kernel>__<case_id>: nothing to batch")
  endif()
  file(WRITE "${KVCONF_BATCH_LIST}.tmp" "set(_ids [==[${_ids}]==])\n")
  file(RENAME "${KVCONF_BATCH_LIST}.tmp" "${KVCONF_BATCH_LIST}")
endif()
include("${KVCONF_BATCH_LIST}")

# One case per kernel (its fast cases), one per kernel's Slow cases (label slow) and `other`: every case no
# kernel selects (the registry tests). A kernel batch that runs nothing fails; one whose cases all skip is skipped.
set(_skip "\\[  PASSED  \\] 0 tests\\.[\r\n]+\\[  SKIPPED \\]")
set(_none "\\[==========\\] 0 tests from 0 test suites ran")
set(_rest "*:-")
foreach(_id IN LISTS _ids)
  string(APPEND _rest "*/${_id}__*:")
  set(_t "${KVCONF_BATCH_PREFIX}/${_id}")
  add_test("${_t}" "${KVCONF_BATCH_EXE}" "--gtest_filter=*/${_id}__*:-*Slow*"
           "--gtest_output=xml:${KVCONF_BATCH_XML}.${_id}.xml")
  set_tests_properties("${_t}" PROPERTIES LABELS "${KVCONF_BATCH_LABELS}" TIMEOUT ${KVCONF_BATCH_TIMEOUT}
                       SKIP_REGULAR_EXPRESSION "${_skip}" FAIL_REGULAR_EXPRESSION "${_none}")
  add_test("${_t}/Slow" "${KVCONF_BATCH_EXE}" "--gtest_filter=*/${_id}__*Slow*"
           "--gtest_output=xml:${KVCONF_BATCH_XML}.${_id}.slow.xml")
  set_tests_properties("${_t}/Slow" PROPERTIES LABELS "${KVCONF_BATCH_LABELS};slow" TIMEOUT 3600
                       SKIP_REGULAR_EXPRESSION "${_skip}" FAIL_REGULAR_EXPRESSION "${_none}")
endforeach()
add_test("${KVCONF_BATCH_PREFIX}/other" "${KVCONF_BATCH_EXE}" "--gtest_filter=${_rest}"
         "--gtest_output=xml:${KVCONF_BATCH_XML}.other.xml")
set_tests_properties("${KVCONF_BATCH_PREFIX}/other" PROPERTIES LABELS "${KVCONF_BATCH_LABELS}"
                     TIMEOUT ${KVCONF_BATCH_TIMEOUT})
