// The libtorch backend (kernels/torch): PyTorch's own CPU kernels judged as black boxes — attention through
// at::scaled_dot_product_attention with each SDPA backend forced (flash, math), projections through at::linear,
// and HF's RMSNorm written with torch ops — in fp32, bf16 and fp16, described to the bounds by
// black_box.hpp. Like the GPU kernels they always register under stable names; where no libtorch was built in,
// supports() returns torch_unavailable()'s reason (GTEST_SKIP in the suites). docs/KERNELS.md "libtorch".
#pragma once

#include <optional>
#include <string>

#include "kvconf/kernels/mutants.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {

// Why the torch kernels cannot run here ("built without libtorch: ..."), or nullopt.
std::optional<std::string> torch_unavailable();

// "torch 2.11.0+cu130 (CPU capability AVX512, 1 intra-op thread)", or the reason it is unavailable.
std::string torch_description();

// torch.attn.sdpa_{flash,math}.{f32,bf16,f16}, torch.gemm.linear.{f32,bf16,f16}, torch.norm.hf_rms.{f32,bf16,f16}.
void register_torch_kernels(Registry& r);

// A registry holding exactly the torch kernels (what the Torch/ suites instantiate over).
Registry torch_registry();

// The same kernels on CUDA device 0 (torch.cuda.attn.sdpa_{flash,efficient,cudnn,math}.*, torch.cuda.gemm.linear.*,
// torch.cuda.norm.hf_rms.*), through a CUDA libtorch: the TorchCuda/ suites, label gpu. Without a CUDA libtorch or a
// device, torch_cuda_unavailable() says why and every kernel's supports() returns it.
std::optional<std::string> torch_cuda_unavailable();
void register_torch_cuda_kernels(Registry& r);
Registry torch_cuda_registry();

// What `kvconf run` and `kvconf kernels` sweep: the CPU emulations (cpu_registry) then the torch kernels. The golden
// baselines keep to cpu_registry: the torch kernels' bits depend on the CPU libtorch dispatches to.
Registry sweep_registry();

// The SDPA backend a call of the named torch attention kernel takes ("flash_attention", "math"), as
// at::_fused_sdp_choice reports it under the kernel's forced backend; the reason when none takes it.
std::string torch_sdpa_choice(const AttentionKernel& k, const AttentionCall& call);

// Planted black-box bugs in how an engine calls torch (the catalogue's torch part): is_causal on a decode call
// (PyTorch's causal mask is top-left aligned, so the query sees key 0 only), a missing cache row, a scale from
// the wrong dimension. backend = "mutant".
void register_torch_mutant_kernels(Registry& r);
std::vector<MutantInfo> torch_mutant_catalogue();

}  // namespace kvconf::kernels
