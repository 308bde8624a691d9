# `kvconf check` runs no torch kernel, so it never loads libtorch (~0.35 s of start-up, for a version string in the
# report before): the dynamic loader's own log (LD_DEBUG=files) of a check shows no kvconf_torch_ops module, and the
# report says "not loaded". With libtorch built, `kvconf kernels` on one torch kernel shows the module in the same log
# (the log sees a load where there is one).
# Run: cmake -DKVCONF=<kvconf> -DPYTHON=<python> -DSCRIPT=<make_traces.py> -DOUT=<dir> -DTORCH=<ON|OFF>
#      -P cli_check_notorch_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/cli_support.cmake)

file(REMOVE_RECURSE "${OUT}")
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${OUT}/t" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_traces.py failed: ${err}")
endif()

# loaded_modules(VAR ARGS...): runs `LD_DEBUG=files ${KVCONF} ARGS...` (exit 0 expected); VAR: the loader's lines that
# load a torch module or libtorch.
function(loaded_modules var)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_DEBUG=files "${KVCONF}" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kvconf ${ARGN}: exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  string(REGEX MATCHALL "file=[^\n]*(kvconf_torch[a-z_]*_ops|libtorch)[^\n]*" lines "${err}")
  set(${var} "${lines}" PARENT_SCOPE)
endfunction()

loaded_modules(check check --on ${OUT}/t/good.on.safetensors --off ${OUT}/t/good.off.safetensors --out ${OUT}/check)
if(check)
  message(FATAL_ERROR "kvconf check loaded libtorch:\n${check}")
endif()
file(READ "${OUT}/check/report.json" report)
string(JSON torch ERROR_VARIABLE no_torch GET "${report}" meta torch)
if(no_torch OR NOT torch MATCHES "^not loaded")
  message(FATAL_ERROR "report.json meta.torch is '${torch}' ${no_torch}, expected 'not loaded (...)'")
endif()
message(STATUS "ok kvconf check: no torch module loaded; meta.torch: ${torch}")

if(TORCH)
  loaded_modules(kernels kernels --quick --filter torch.norm.hf_rms.f32 --out ${OUT}/kernels)
  if(NOT kernels MATCHES "kvconf_torch_ops")
    message(FATAL_ERROR "LD_DEBUG=files showed no torch module for kvconf kernels on a torch kernel: the log cannot "
                        "tell a load, so kvconf check's empty one proves nothing")
  endif()
  message(STATUS "ok kvconf kernels on a torch kernel: the loader logged the torch module")
endif()
