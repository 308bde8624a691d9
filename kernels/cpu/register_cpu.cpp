// register_cpu_kernels(): every CPU-emulated kernel of notes/kernels.md, in a fixed order.
#include "cpu_kernels.hpp"

namespace kvconf::kernels {

void register_cpu_kernels(Registry& r) {
  cpu::register_gemm_kernels(r);
  cpu::register_norm_kernels(r);
  cpu::register_attention_kernels(r);
}

}  // namespace kvconf::kernels
