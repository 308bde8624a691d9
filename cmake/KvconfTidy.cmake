# KVCONF_TIDY=ON (scripts/tidy.sh sets it in build-tidy/): registers Tidy/clang-tidy, label tidy, which runs clang-tidy
# with .clang-tidy over kvconf's own sources and fails on any finding (docs/TIDY.md). Off in every preset, so the
# default run (`ctest --preset ci`) has no tidy test.
option(KVCONF_TIDY "Register the clang-tidy check as a CTest test (label tidy; scripts/tidy.sh)" OFF)
if(KVCONF_TIDY)
  enable_testing()
  add_test(NAME Tidy/clang-tidy COMMAND ${PROJECT_SOURCE_DIR}/scripts/tidy.sh --no-install --no-configure
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(Tidy/clang-tidy PROPERTIES LABELS tidy TIMEOUT 7200)
endif()
