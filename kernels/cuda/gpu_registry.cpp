// gpu_registry(): every GPU kernel, the CUDA attention kernels then the cuBLAS projections (library
// kvconf::kernels_gpu, which links kvconf::kernels_cuda and kvconf::kernels_cublas).
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels {

Registry gpu_registry() {
  Registry r;
  register_cuda_kernels(r);
  register_cublas_kernels(r);
  return r;
}

}  // namespace kvconf::kernels
