// cuda.attn.splitkv.{f16,f32}: FA2's split-KV decode (launch_splitkv_decode, attention_flash2.cu) in A2's order:
// the cache's blocks split by num_splits_heuristic at 132 SMs, each split's output and log-sum-exp in fp32 scratch,
// combined in fp32; prefill (n_q > 1) runs the flash2 kernel, as FA2 does. Its kernels.def line: splitkv.
#include <algorithm>

#include "cuda_attention.hpp"
#if KVCONF_CUDA_DEVICE_CODE
#include "device_call.hpp"
#endif

namespace kvconf::kernels::cuda {

#if KVCONF_CUDA_DEVICE_CODE
cudaError_t launch_flash2(const DevAttn& a, bool f16);          // attention_flash2.cu
cudaError_t launch_splitkv_decode(const DevAttn& a, bool f16);  // attention_flash2.cu (n_q = 1)
#endif

namespace {

ref::AttentionPipeline splitkv_decode_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = cpu::attn::base_pipeline(f);
  const SplitKvPlan sp = splitkv_plan(c);
  const cpu::attn::KeyRange keys = cpu::attn::visible_keys(c.params, c.shape.n_kv, 0);
  std::size_t blocks = 1, nonempty = 0, terms = 1;
  for (std::size_t s = 0; s < sp.splits && !keys.empty(); ++s) {
    const cpu::attn::KeyRange r = split_range(keys, sp.keys_per_split(), s);
    if (r.empty()) continue;
    ++nonempty;
    blocks = std::max(blocks, cpu::attn::blocks_touched(r, sp.bn));
    terms = std::max(terms, r.size());
  }
  p.name = "cuda splitkv bn" + std::to_string(sp.bn) + " s=" + std::to_string(sp.splits) +
           " nonempty=" + std::to_string(nonempty) + " blocks=" + std::to_string(blocks);
  p.kv_blocks = blocks;
  p.splits = std::max<std::size_t>(nonempty, 1);  // empty splits are left out of the combine
  p.split_out = Format::fp32;
  p.normalize_before_pv = false;
  p.pv_terms = terms;  // the PV chain restarts in every split
  return p;
}

#if KVCONF_CUDA_DEVICE_CODE
int launch(DeviceCall& call, const AttentionCall& c) {
  if (c.shape.n_q != 1) return launch_flash2(call.a, call.f16);  // prefill falls back to the standard kernel
  const SplitKvPlan sp = splitkv_plan(c);
  DevAttn& a = call.a;
  a.bc = static_cast<int>(sp.bn);
  a.splits = static_cast<int>(sp.splits);
  a.keys_per_split = static_cast<int>(sp.keys_per_split());
  a.part_o = call.scratch(call.heads * sp.splits * call.dv);  // (heads, splits, dv)
  a.part_lse = call.scratch(call.heads * sp.splits);          // (heads, splits)
  return launch_splitkv_decode(a, call.f16);
}
#endif

}  // namespace

void register_cuda_attention_splitkv(Registry& r) {
  CudaAttention a;
  a.stem = "splitkv";
  a.cache_invariant = false;  // decode splits by capacity and block_n; prefill runs flash2
  a.mirrors = "A2 order (FA2 split-KV decode, num_splits_heuristic at 132 SMs, fp32 combine; prefill = flash2)";
  a.pipeline = [](Format f, const AttentionCall& c) {
    return c.shape.n_q == 1 ? splitkv_decode_pipeline(f, c) : flash2_pipeline(f, c);
  };
  a.launch = KVCONF_CUDA_LAUNCH(launch);
  for (const Format f : {Format::fp16, Format::fp32}) r.add(make_cuda_attention(a, f));
}

}  // namespace kvconf::kernels::cuda
