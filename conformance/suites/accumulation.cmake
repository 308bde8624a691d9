# The accumulation and propagation suites (the seed paper's Experiments 1 and 2), included from
# conformance/suites/CMakeLists.txt with `include(accumulation.cmake)`. Sources are named relative to this file.
kvconf_add_test(NAME conformance_accumulation_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/accumulation_test.cpp
  LIBS kvconf::conformance kvconf::reference kvconf::numerics
  LABELS equivalence accumulation)
kvconf_add_test(NAME conformance_propagation_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/propagation_test.cpp
  LIBS kvconf::conformance kvconf::kernel_mutants kvconf::kernels kvconf::reference
  LABELS equivalence attention)
# The propagation suite over the libtorch kernels: Torch/PropagationConformance..., one CTest case per kernel.
kvconf_add_batched_test(NAME conformance_torch_propagation_test PREFIX Torch/propagation
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/propagation_test.cpp
  LIBS kvconf::conformance kvconf::kernel_mutants kvconf::kernels kvconf::kernels_torch kvconf::reference
  LABELS equivalence attention)
target_compile_definitions(conformance_torch_propagation_test PRIVATE KVCONF_SUITE_TORCH=1)
