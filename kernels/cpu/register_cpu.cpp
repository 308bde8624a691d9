// register_cpu_kernels(): every CPU-emulated kernel of notes/kernels.md, in the order of kernels.def.
#include "cpu_kernels.hpp"

namespace kvconf::kernels {

void register_cpu_kernels(Registry& r) {
#define KVCONF_CPU_KERNELS(fn) cpu::fn(r);
#include "kernels.def"
#undef KVCONF_CPU_KERNELS
}

}  // namespace kvconf::kernels
