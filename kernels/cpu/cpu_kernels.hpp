// Private to kvconf::kernels: the CPU backend's registration functions, one per kernel family.
#pragma once

#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels::cpu {

void register_gemm_kernels(Registry& r);       // gemm_*.cpp: G1–G4
void register_norm_kernels(Registry& r);       // norm_*.cpp: R1, R2
void register_attention_kernels(Registry& r);  // attention_*.cpp: A1, A2, A4, A6, A7

}  // namespace kvconf::kernels::cpu
