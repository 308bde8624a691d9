// Registration of the CPU attention kernels (placeholder until the kernels land).
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu {

void register_attention_kernels(Registry&) {}

}  // namespace kvconf::kernels::cpu
