// Registration of the CPU gemm kernels (placeholder until the kernels land).
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu {

void register_gemm_kernels(Registry&) {}

}  // namespace kvconf::kernels::cpu
