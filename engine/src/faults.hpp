// The planted engine faults (engine::Fault, context.hpp) as the hooks the forward pass calls, kept here so that
// forward.cpp reads as the model (as kernels/mutants/ keeps the kernel mutants apart from the kernels). Each hook is the
// identity under Fault::none. Cache-path faults act on the cached path only (decode, or prefill + decode);
// architecture faults act on every path alike (tests/adapters catches them against transformers).
#pragma once

#include <cstddef>
#include <vector>

#include "kvconf/engine/config.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/kernels/kernel.hpp"
#include "kvconf/numerics/format.hpp"

namespace kvconf::engine::faults {

// The attention call's window, scale and softcap under the fault: window_recompute_only (cached path),
// window_ignored, attn_scale_head_dim, softcap_missing_decode.
void adjust_attention(kernels::AttentionCall& a, const ModelConfig& c, Fault f, bool cached_path, bool decode);
// RMSNorm's epsilon: the config's, or 0 under rms_eps_ignored.
float norm_eps(const ModelConfig& c, Fault f);
// Gemma-2's embedding scale √hidden rounded to the model format `fmt`, or to fp32 under embed_scale_unrounded.
double embed_scale(const ModelConfig& c, Format fmt, Fault f);
// The position decode rotates q and k at: pos, or pos + 1 under rope_decode_off_by_one.
std::size_t rope_position(std::size_t pos, Fault f, bool decode);
// The cache row decode writes: pos0, or pos0 − 1 under shifted_cache_row.
std::size_t cache_write_row(std::size_t pos0, Fault f, bool decode);
// Whether the final logit softcap applies: the config's, except on decode under final_softcap_missing_decode.
bool final_softcap(const ModelConfig& c, Fault f, bool decode);
// cache_store_toward_zero: clears the last bit of the stored values [begin, end) of one layer's K or V buffer.
void after_cache_store(std::vector<float>& side, std::size_t begin, std::size_t end, Format fmt, Fault f, bool decode);
// gqa_modulo_decode: decode attention with q head h reading kv head h mod n_kv. Returns false (nothing run) otherwise.
bool run_attention(const kernels::AttentionKernel& ak, const kernels::AttentionCall& a, const std::vector<float>& q,
                   const std::vector<float>& kc, const std::vector<float>& vc, std::vector<float>& out, Fault f,
                   bool decode);

}  // namespace kvconf::engine::faults
