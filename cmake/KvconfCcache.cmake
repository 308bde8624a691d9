# Compiler cache: ccache (a Debian package that scripts/setup.sh installs) in front of the C and C++ compilers when it
# is found. The Python package's build (`pip install .`, in build/pip/) compiles the same core libraries with the same
# flags as the main build; through ccache it takes those objects instead of compiling them a second time (README,
# "Where .ci/run's time goes"). -DKVCONF_CCACHE=OFF, or a launcher of one's own, leaves the compilers alone.
option(KVCONF_CCACHE "Compile C and C++ through ccache when it is found" ON)
if(KVCONF_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(KVCONF_CCACHE_PROGRAM ccache)
  if(KVCONF_CCACHE_PROGRAM)
    set(CMAKE_C_COMPILER_LAUNCHER "${KVCONF_CCACHE_PROGRAM}")
    set(CMAKE_CXX_COMPILER_LAUNCHER "${KVCONF_CCACHE_PROGRAM}")
    message(STATUS "kvconf: compiling through ${KVCONF_CCACHE_PROGRAM}")
  endif()
endif()
