# Optional parts, auto-detected: CUDA (nvcc + cudart + cuBLAS) and libtorch. Nothing here is required: with
# KVCONF_ENABLE_CUDA=OFF the GPU libraries (kernels/cuda, kernels/cublas) build as stubs with the same API.
include(CheckLanguage)

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

find_package(Torch CONFIG QUIET)
if(Torch_FOUND)
  set(KVCONF_TORCH_STATUS "found (${Torch_DIR})")
else()
  set(KVCONF_TORCH_STATUS "not found")
endif()
