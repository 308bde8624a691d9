// Registration of the CPU norm kernels (placeholder until the kernels land).
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu {

void register_norm_kernels(Registry&) {}

}  // namespace kvconf::kernels::cpu
