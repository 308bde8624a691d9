# Accumulation-order primitives and the tensor-core block-FMA model (included from CMakeLists.txt).
kvconf_add_test(NAME numerics_accumulate_test
  SOURCES accumulate_test.cpp
  LIBS kvconf::numerics
  LABELS unit)
kvconf_add_test(NAME numerics_tensor_core_test
  SOURCES tensor_core_test.cpp
  LIBS kvconf::numerics
  LABELS unit)
