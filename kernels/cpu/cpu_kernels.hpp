// The registration functions of the CPU kernel files (kernels.def), declared from the list.
#pragma once

#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels::cpu {

#define KVCONF_CPU_KERNELS(fn) void fn(Registry& r);
#include "kernels.def"
#undef KVCONF_CPU_KERNELS

}  // namespace kvconf::kernels::cpu
