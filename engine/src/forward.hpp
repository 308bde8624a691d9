// The forward pass over the rows of one call (internal to Context): embeddings, the decoder layers of Llama-2,
// Mistral and Gemma-2 with the profile's kernels, the final norm and the LM head on the last row.
#pragma once

#include <span>
#include <vector>

#include "kvconf/engine/forward_hooks.hpp"
#include "kvconf/engine/context.hpp"

namespace kvconf::engine {

struct ForwardCall {
  std::span<const int> tokens;                        // the call's rows, at absolute positions cache.n ...
  bool cached_path = false;                           // true for prefill/decode, false for the cache-OFF recompute
  const ForwardHooks* hooks = &plain_forward();       // the model's variation points (ContextOptions::hooks)
  const kernels::GemmKernel* kv_fp32_gemm = nullptr;  // ContextOptions::kv_fp32_gemm (the high-precision cache)
};

// Appends the call's K/V rows to `cache` (growing it by doubling) and returns the last row's logits: (vocab).
// GPU profiles: each layer's K and V buffer is tracked for a device mirror (kernels::gpu_kv_track) and every row
// written is reported (gpu_kv_rows_changed); growing the cache forgets the old buffers' mirrors.
std::vector<float> forward_rows(const Model& m, const ProfileKernels& k, KvCache& cache, const ForwardCall& call,
                                const ForwardOptions& o, Trace& trace);

// Drops the device mirrors of every K/V buffer of `cache` (kernels::gpu_kv_forget): before the buffers are freed,
// reallocated or rewritten wholesale. A no-op for buffers without a mirror.
void forget_device_kv(const KvCache& cache);

}  // namespace kvconf::engine
