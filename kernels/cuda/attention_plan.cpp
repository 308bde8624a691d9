// Plans of the CUDA attention kernels, computed on the host (cuda_attention.hpp): the online-softmax key block (the
// split-KV decode's plan is the CPU A2's, cuda_attention.hpp splitkv_plan).
#include "attention_common.hpp"  // kernels/cpu: fa2_standard_bc
#include "cuda_attention.hpp"

namespace kvconf::kernels::cuda {

std::size_t flash_bc(std::size_t d) { return cpu::attn::fa2_standard_bc(d); }

}  // namespace kvconf::kernels::cuda
