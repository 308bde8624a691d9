// The forward pass over the rows of one call (internal to Context): embeddings, the decoder layers of Llama-2,
// Mistral and Gemma-2 with the profile's kernels, the final norm and the LM head on the last row.
#pragma once

#include <span>
#include <vector>

#include "kvconf/engine/forward_hooks.hpp"
#include "kvconf/engine/context.hpp"

namespace kvconf::engine {

// What every row of a call shares: the path, the model's variation points, the K/V GEMM.
struct ForwardCall {
  bool cached_path = false;                           // true for prefill/decode, false for the cache-OFF recompute
  const ForwardHooks* hooks = &plain_forward();       // the model's variation points (ContextOptions::hooks)
  const kernels::GemmKernel* kv_fp32_gemm = nullptr;  // ContextOptions::kv_fp32_gemm (the high-precision cache)
  const BatchAttention* batch_attention = nullptr;    // batched calls: how one sequence's attention runs (null: plain)
};

// One sequence's rows in a call: its tokens at absolute positions cache->n ..., its cache and its trace.
struct Segment {
  std::span<const int> tokens;
  KvCache* cache = nullptr;
  Trace* trace = nullptr;
};

// The forward pass over the rows of one or more sequences in one call (a batch, as a serving engine runs it: every
// projection, norm and elementwise op over all rows together, so the GEMMs see M = all rows; RoPE, the cache writes
// and attention per sequence, each over its own cache; the LM head over each sequence's last row, M = sequences).
// Appends each segment's K/V rows to its cache (growing it by doubling) and returns each segment's last-row logits:
// (segments, vocab). Options that name "the call's last row" (patches, captured layers and hidden states) need one
// segment. GPU profiles: each layer's K and V buffer is tracked for a device mirror (kernels::gpu_kv_track) and every
// row written is reported (gpu_kv_rows_changed); growing a cache forgets the old buffers' mirrors (KvStore,
// kv_store.hpp). forward.cpp: the model in ModelPass::run() and ModelPass::layer(), the rest behind its seams.
std::vector<std::vector<float>> forward_segments(const Model& m, const ProfileKernels& k,
                                                 std::span<const Segment> segments, const ForwardCall& call,
                                                 const ForwardOptions& o);

}  // namespace kvconf::engine
