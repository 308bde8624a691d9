// Private to kernels/cuda: what a CUDA attention kernel's description file (attention_<stem>.cpp, one line of
// kernels.def) uses: the plans (block sizes, split counts: computed on the host and shared by the launch and by the
// pipeline description, so both always agree), the pipelines two kernels share, the kernel built from a
// description (attention_register.cpp), and the host entry point that runs one call (attention_host.cpp with CUDA;
// nocuda.cpp without).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>

#include "attention_common.hpp"  // kernels/cpu: KeyRange, visible_keys, blocks_touched, base_pipeline
#include "kvconf/kernels/kernel.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/reference/attention_pipeline.hpp"

namespace kvconf::kernels::cuda {

// Key block of the online softmax: FA2's standard-kernel Bc for A100/H100 (128 for d <= 64, else 64; the CPU
// emulation A1 uses the same, kernels/cpu/attention_common.hpp fa2_standard_bc).
std::size_t flash_bc(std::size_t d);

// The invariant kernel's split size in keys (a multiple of every flash_bc), aligned at key 0.
inline constexpr std::size_t kInvariantSplitKeys = 256;

// The split-KV decode plan: the CPU A2 emulation's own (kernels/cpu/attention_common.hpp fa2_splitkv_plan, FA2's
// flash_api.cpp num_splits_heuristic over batch · heads · m_blocks on a fixed 132 SMs), so both split every call
// alike, a sequence inside a batched decode step included.
using cpu::attn::SplitKvPlan;
inline SplitKvPlan splitkv_plan(const AttentionCall& c) { return cpu::attn::fa2_splitkv_plan(c); }

// Shared by the descriptions: the keys of split [s·K, (s+1)·K) visible in `keys`; the A1-order pipeline of the flash2
// kernel (also the split-KV kernel's prefill path).
cpu::attn::KeyRange split_range(cpu::attn::KeyRange keys, std::size_t K, std::size_t s);
ref::AttentionPipeline flash2_pipeline(Format f, const AttentionCall& c);

// The uploaded call a kernel's launch step sees (device_call.hpp, CUDA builds only).
struct DeviceCall;
// A kernel's launch step: sets its plan's fields of the call, takes scratch, launches its device code on the default
// stream and returns cudaGetLastError() as an int (cudaSuccess = 0); run_attention checks, synchronises, downloads.
using LaunchFn = int (*)(DeviceCall& call, const AttentionCall& c);

// A CUDA attention kernel as its description file states it; make_cuda_attention adds what every CUDA kernel shares
// (backend, formats, determinism, the device reason in supports(), the run through run_attention).
struct CudaAttention {
  std::string stem;  // "simple": registered as cuda.attn.<stem>.{f16,f32}
  bool cache_invariant = false;
  std::string mirrors;  // what it mirrors (the shared note on GPU transcendental functions is appended)
  std::function<ref::AttentionPipeline(Format, const AttentionCall&)> pipeline;
  LaunchFn launch = nullptr;  // nullptr in a CUDA-off build (run is never reached: supports() refuses)
};
AttentionKernel make_cuda_attention(const CudaAttention& a, Format f);

// Each description file's launch step exists only where there is device code to launch.
#if KVCONF_CUDA_DEVICE_CODE
#define KVCONF_CUDA_LAUNCH(fn) (&fn)
#else
#define KVCONF_CUDA_LAUNCH(fn) nullptr
#endif

// Runs one call on the device: uploads q (n_q, H, d), the filled rows [0, n_kv) of k_cache (cap, H_kv, d) and
// v_cache (cap, H_kv, d_v) (device rows [n_kv, cap) are filled with NaN and never read), runs the kernel's launch step,
// downloads out (n_q, H, d_v). f is fp16 (device storage __half) or fp32. Throws std::runtime_error on a CUDA
// error and std::invalid_argument on spans that do not fit the call.
void run_attention(const char* who, LaunchFn launch, Format f, const AttentionCall& c, std::span<const float> q,
                   std::span<const float> k_cache, std::span<const float> v_cache, std::span<float> out);

}  // namespace kvconf::kernels::cuda
