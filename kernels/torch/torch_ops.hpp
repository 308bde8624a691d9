// Private to kernels/torch: the calls into libtorch, kept behind plain C++ types so that only torch_ops.cpp includes
// ATen. Spans hold values of the kernel's format as floats. torch_ops.cpp is the module kvconf_torch_ops, loaded on
// the first call (torch_loader.cpp): a process that never runs a torch kernel never pays libtorch's start-up
// (~0.35 s of static initialisers). Without libtorch, notorch.cpp implements these and every call throws.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels::torch_ops {

enum class Sdpa { flash, math, efficient, cudnn };  // efficient and cudnn: CUDA only

// Where the module computes: kvconf_torch_ops (libtorch_cpu) or kvconf_torch_cuda_ops (the same source built with
// KVCONF_TORCH_CUDA against libtorch_cuda: tensors on CUDA device 0, results copied back).
enum class Device { cpu, cuda };

// How the caller (an engine) passes the call to SDPA: correctly, or with one planted bug.
enum class Calling {
  correct,             // decode: no mask, no causal flag; prefill: is_causal when square, else a bottom-right mask
  causal_flag_always,  // is_causal=true on every call, decode included (top-left alignment: key 0 only)
  missing_cache_row,   // decode calls (n_q = 1) see rows [0, n_kv − 1): the new token's K/V row not appended
  scale_from_hidden,   // scale 1/sqrt(n_heads·d) (the hidden size) instead of the head dim's
};

std::optional<std::string> unavailable(Device d = Device::cpu);
std::string description(Device d = Device::cpu);

// The backend at::_fused_sdp_choice reports for the call under the forced backend ("flash_attention", "math"),
// or nullopt with the reason in *why when no backend takes it.
std::optional<std::string> sdpa_choice(Device d, Sdpa forced, Format f, const AttentionCall& call, Calling how,
                                       std::string* why);

// q: (n_q, H, d), k_cache/v_cache: (capacity, Hkv, d | d_v), out: (n_q, H, d_v).
void sdpa(Device d, Sdpa forced, Format f, Calling how, const AttentionCall& call, std::span<const float> q,
          std::span<const float> k_cache, std::span<const float> v_cache, std::span<float> out);
// A batched decode step as an engine pads it for SDPA (HF's left padding): the sequences' rows (each n_q = 1) as q
// (B, H, 1, d), their caches left-padded to the longest into K/V (B, H, L, d | d_v) and a key mask (B, 1, 1, L) that
// hides the padding; each output row goes back to its sequence. The backend SDPA takes for that call, or nullopt
// with the reason in *why (every sequence must be a decode row with the same heads, dims and scale).
std::optional<std::string> sdpa_batch_choice(Device d, Sdpa forced, Format f, std::span<const AttentionCall> calls,
                                             std::string* why);
void sdpa_batch(Device d, Sdpa forced, Format f, std::span<const AttentionSeq> seqs);
// x: (m, k), w: (n, k), y: (m, n): at::linear on x viewed as (1, m, k), as an engine's hidden states.
void linear(Device d, Format f, const GemmShape& s, std::span<const float> x, std::span<const float> w,
            std::span<float> y);
// HF LlamaRMSNorm / Gemma2RMSNorm with torch ops. x: (rows, d), w: (d), y: (rows, d).
void hf_rms_norm(Device d, Format f, const NormShape& s, const NormParams& p, std::span<const float> x,
                 std::span<const float> w, std::span<float> y);

// What the module exports (kvconf_torch_ops_table): the implementations above, version-checked by the loader.
inline constexpr int kTableVersion = 3;
struct Table {
  int version;
  std::optional<std::string> (*unavailable)();
  std::string (*description)();
  std::optional<std::string> (*sdpa_choice)(Sdpa, Format, const AttentionCall&, Calling, std::string*);
  void (*sdpa)(Sdpa, Format, Calling, const AttentionCall&, std::span<const float>, std::span<const float>,
               std::span<const float>, std::span<float>);
  void (*linear)(Format, const GemmShape&, std::span<const float>, std::span<const float>, std::span<float>);
  void (*hf_rms_norm)(Format, const NormShape&, const NormParams&, std::span<const float>, std::span<const float>,
                      std::span<float>);
  std::optional<std::string> (*sdpa_batch_choice)(Sdpa, Format, std::span<const AttentionCall>, std::string*);
  void (*sdpa_batch)(Sdpa, Format, std::span<const AttentionSeq>);
};

}  // namespace kvconf::kernels::torch_ops
