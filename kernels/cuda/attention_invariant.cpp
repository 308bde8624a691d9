// cuda.attn.invariant.{f16,f32}: batch- and cache-invariant attention (attention_invariant.cu) in A7's order: each
// row's visible keys cut at fixed absolute positions into splits of kInvariantSplitKeys = 256, A1's online softmax
// inside each, FA2's combine in a fixed order. Its kernels.def line: invariant.
#include <algorithm>

#include "cuda_attention.hpp"
#if KVCONF_CUDA_DEVICE_CODE
#include "device_call.hpp"
#endif

namespace kvconf::kernels::cuda {

#if KVCONF_CUDA_DEVICE_CODE
cudaError_t launch_invariant(const DevAttn& a, bool f16);  // attention_invariant.cu
#endif

namespace {

ref::AttentionPipeline invariant_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = cpu::attn::base_pipeline(f);
  const std::size_t bc = flash_bc(c.shape.d), K = kInvariantSplitKeys;
  std::size_t blocks = 1, splits = 1, terms = 1;
  for (std::size_t i = 0; i < c.shape.n_q; ++i) {
    const cpu::attn::KeyRange keys = cpu::attn::visible_keys(c.params, c.shape.n_kv, i);
    if (keys.empty()) continue;
    const std::size_t s_lo = keys.lo / K, s_hi = (keys.hi - 1) / K;
    splits = std::max(splits, s_hi - s_lo + 1);
    for (std::size_t s = s_lo; s <= s_hi; ++s) {
      const cpu::attn::KeyRange r = split_range(keys, K, s);
      blocks = std::max(blocks, cpu::attn::blocks_touched(r, bc));
      terms = std::max(terms, r.size());
    }
  }
  p.name = "cuda invariant split" + std::to_string(K) + " bc" + std::to_string(bc) +
           " splits=" + std::to_string(splits) + " blocks=" + std::to_string(blocks);
  p.kv_blocks = blocks;
  p.splits = splits;
  p.split_out = Format::fp32;
  p.normalize_before_pv = false;
  p.pv_terms = terms;
  return p;
}

#if KVCONF_CUDA_DEVICE_CODE
int launch(DeviceCall& call, const AttentionCall&) {
  DevAttn& a = call.a;
  a.keys_per_split = static_cast<int>(kInvariantSplitKeys);
  a.max_splits =
      static_cast<int>(std::max<std::size_t>(1, (call.n_kv + kInvariantSplitKeys - 1) / kInvariantSplitKeys));
  a.part_lse =
      call.scratch(call.n_q * call.heads * static_cast<std::size_t>(a.max_splits));  // (n_q, heads, max_splits)
  return launch_invariant(a, call.f16);
}
#endif

}  // namespace

void register_cuda_attention_invariant(Registry& r) {
  CudaAttention a;
  a.stem = "invariant";
  a.cache_invariant = true;  // one kernel, one Bc, splits of 256 absolute positions, fixed combine
  a.mirrors = "A7 order (fixed split 256 aligned at key 0, A1 inside, FA2 combine)";
  a.pipeline = [](Format f, const AttentionCall& c) { return invariant_pipeline(f, c); };
  a.launch = KVCONF_CUDA_LAUNCH(launch);
  for (const Format f : {Format::fp16, Format::fp32}) r.add(make_cuda_attention(a, f));
}

}  // namespace kvconf::kernels::cuda
