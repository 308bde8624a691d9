# `kvconf kernels --plugin` end to end: bad plugins are refused (exit 2, one stderr line naming the plugin and the
# fault); the example plugin's quick sweep passes (exit 0); the planted-bug plugin fails (exit 1); a kernel killed by
# SIGSEGV fails its item (rule kernel_ran) and the sweep goes on; a kernel changing its output tensor is exit 2.
# Needs -DKVCONF, -DOUT and -D<NAME>=<path> for the plugins named below (tests/plugin/CMakeLists.txt).
foreach(v KVCONF OUT EXAMPLE WRONG MISBEHAVING BAD_ABI NULL_RUN MISSING_REGISTER)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "cli_plugin_test.cmake: -D${v}=... is required")
  endif()
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/../tools/cli_support.cmake)
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")

kvconf_expect_bad("missing plugin file" "^kvconf kernels: plugin /nonexistent/libnope\\.so: no such file$"
                  kernels --quick --plugin /nonexistent/libnope.so --out "${OUT}/bad")
kvconf_expect_bad("wrong ABI version" "plugin .*test_bad_abi\\.so: abi version 3, expected 1 to 2"
                  kernels --quick --plugin "${BAD_ABI}" --out "${OUT}/bad")
kvconf_expect_bad("missing symbol" "plugin .*: missing symbol kvconf_plugin_register"
                  kernels --quick --plugin "${MISSING_REGISTER}" --out "${OUT}/bad")
kvconf_expect_bad("null run pointer" "plugin .*: kernel\\[1\\] 'gemm': field gemm_run is null"
                  kernels --quick --plugin "${NULL_RUN}" --out "${OUT}/bad")
set(ENV{KVCONF_PLUGIN_TIMEOUT_S} soon)
kvconf_expect_bad("bad time limit" "kvconf_plugin_timeout_s='soon': expected a positive number of seconds"
                  kernels --quick --plugin "${EXAMPLE}" --out "${OUT}/bad")
unset(ENV{KVCONF_PLUGIN_TIMEOUT_S})

# The example plugin: its items are listed under plugin.kvconf_example_plugin.*, and its quick sweep passes.
kv(0 kernels --quick --plugin "${EXAMPLE}" --list)
if(NOT last_out MATCHES "attention +plugin\\.kvconf_example_plugin\\.attn\\.two_pass\\.f16\\|")
  message(FATAL_ERROR "--list does not show the example's attention items:\n${last_out}")
endif()
if(last_out MATCHES "cpu\\.")
  message(FATAL_ERROR "--plugin sweeps the plugin's kernels only, but --list shows CPU kernels:\n${last_out}")
endif()
kv(0 kernels --quick --plugin "${EXAMPLE}" --out "${OUT}/example")

# The planted bugs fail (exit 1) with the rules that catch them.
kv(1 kernels --quick --plugin "${WRONG}" --filter "acc16.f16|m1_n32_k2048_same_sign" --out "${OUT}/wrong")
if(NOT last_out MATCHES "FAIL oracle_bound")
  message(FATAL_ERROR "the fp16-accumulating GEMM was not caught:\n${last_out}")
endif()

# A kernel killed by SIGSEGV fails its item; the next item runs (exit 1, both rows printed).
set(ENV{KVCONF_PLUGIN_TIMEOUT_S} 1)  # the hanging kernel is killed after 1 s
kv(1 kernels --quick --plugin "${MISBEHAVING}" --filter "m1_n64_k1024_normal" --out "${OUT}/segv")
unset(ENV{KVCONF_PLUGIN_TIMEOUT_S})
if(NOT last_out MATCHES "plugin\\.test_misbehaving\\.segv +m1_n64_k1024_normal +FAIL kernel_ran" OR
   NOT last_out MATCHES "plugin\\.test_misbehaving\\.ok +m1_n64_k1024_normal +[0-9]+/[0-9]+ pass" OR
   NOT last_out MATCHES "plugin\\.test_misbehaving\\.hang +m1_n64_k1024_normal +FAIL kernel_ran" OR
   NOT last_out MATCHES "plugin\\.test_misbehaving\\.error +m1_n64_k1024_normal +FAIL kernel_ran" OR
   NOT last_out MATCHES "plugin\\.test_misbehaving\\.shape +m1_n64_k1024_normal +[0-9]+/[0-9]+ pass")
  message(FATAL_ERROR "the crash did not become a failed item of a finished sweep:\n${last_out}")
endif()

# A kernel that changes its output tensor's descriptor breaks the ABI: exit 2, one line.
kvconf_expect_bad("output descriptor changed"
                  "plugin kernel plugin\\.test_misbehaving\\.shape: run changed the descriptor of y\\.shape\\[1\\]"
                  kernels --quick --plugin "${MISBEHAVING}" --filter "shape|m1_n32_k2048_same_sign" --out "${OUT}/shape")
