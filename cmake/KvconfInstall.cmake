# `cmake --install build --prefix P`: the kvconf libraries (static), their public headers, the `kvconf` program and an
# exported CMake package (P/lib/cmake/kvconf: kvconfConfig.cmake, kvconfConfigVersion.cmake, kvconfTargets.cmake,
# targets kvconf::<library>), so another project's tests can find_package(kvconf CONFIG REQUIRED), register their
# kernels and run kvconf's checks (examples/consumer, docs/INSTALL.md). Included once every library target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The exported libraries: the chain from the numerics to the protocol. Left out: tools (the CLI layer, whose defaults
# name build-tree folders), kernels_torch / kernel_mutants / kernels_plugin (they load modules and a worker program by
# their build-tree paths), the tests and the fixtures' generated files.
set(KVCONF_EXPORTED_LIBRARIES
    kvconf_numerics kvconf_results kvconf_reference kvconf_kernels kvconf_kernels_cuda kvconf_kernels_cublas kvconf_kernels_gpu
    kvconf_engine kvconf_engine_faults kvconf_analysis kvconf_conformance kvconf_fixtures kvconf_golden kvconf_reports
    kvconf_protocol)
# Interface targets they use: compile flags (strict_fp is public: the numerics headers need it), MPFR/GMP.
set(KVCONF_EXPORTED_INTERFACES kvconf_flags kvconf_strict_fp kvconf_mpfr)
# Folders whose include/ holds public headers (include/kvconf/<library>/...), installed to P/include.
set(KVCONF_PUBLIC_HEADER_DIRS numerics results reference kernels engine engine/faults analysis conformance fixtures golden reports protocol)

# Each library's include folders are paths in the source tree: used as they are in the build ($<BUILD_INTERFACE>),
# P/include once installed.
foreach(_t IN LISTS KVCONF_EXPORTED_LIBRARIES KVCONF_EXPORTED_INTERFACES)
  if(NOT TARGET ${_t})
    message(FATAL_ERROR "KvconfInstall.cmake: no target ${_t} (renamed? update KVCONF_EXPORTED_LIBRARIES)")
  endif()
  get_target_property(_dirs ${_t} INTERFACE_INCLUDE_DIRECTORIES)
  if(_dirs)
    set(_new "")
    set(_in_tree FALSE)
    foreach(_d IN LISTS _dirs)
      if(_d MATCHES "^\\$<" OR NOT (_d MATCHES "^${PROJECT_SOURCE_DIR}/" OR _d MATCHES "^${PROJECT_BINARY_DIR}/"))
        list(APPEND _new "${_d}")  # a generator expression or a system folder (MPFR's): kept
      else()
        list(APPEND _new "$<BUILD_INTERFACE:${_d}>")
        set(_in_tree TRUE)
      endif()
    endforeach()
    if(_in_tree)
      list(APPEND _new "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    endif()
    set_property(TARGET ${_t} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_new}")
  endif()
endforeach()
foreach(_t IN LISTS KVCONF_EXPORTED_LIBRARIES KVCONF_EXPORTED_INTERFACES)
  string(REGEX REPLACE "^kvconf_" "" _short "${_t}")
  set_property(TARGET ${_t} PROPERTY EXPORT_NAME "${_short}")  # kvconf::engine, kvconf::conformance, ...
endforeach()

install(TARGETS ${KVCONF_EXPORTED_LIBRARIES} ${KVCONF_EXPORTED_INTERFACES} EXPORT kvconfTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(_d IN LISTS KVCONF_PUBLIC_HEADER_DIRS)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_d}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/kvconf/plugin.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvconf)
# The program as built (install(PROGRAMS): its build RUNPATH, CUDA's folders at most, is kept rather than rewritten).
install(PROGRAMS $<TARGET_FILE:kvconf> DESTINATION ${CMAKE_INSTALL_BINDIR})

set(KVCONF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvconf)
install(EXPORT kvconfTargets NAMESPACE kvconf:: DESTINATION ${KVCONF_INSTALL_CMAKEDIR} FILE kvconfTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvconfConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kvconfConfig.cmake INSTALL_DESTINATION ${KVCONF_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvconfConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvconfConfig.cmake ${PROJECT_BINARY_DIR}/kvconfConfigVersion.cmake
        DESTINATION ${KVCONF_INSTALL_CMAKEDIR})
