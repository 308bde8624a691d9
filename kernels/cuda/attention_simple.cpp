// cuda.attn.simple.{f16,f32}: plain CUDA attention (attention_simple.cu), one (row, head) per block, three passes
// (max, sum, PV) with p = e / l rounded before an fp32 PV chain over the visible keys. Its kernels.def line: simple.
#include "cuda_attention.hpp"
#if KVCONF_CUDA_DEVICE_CODE
#include "device_call.hpp"
#endif

namespace kvconf::kernels::cuda {

#if KVCONF_CUDA_DEVICE_CODE
cudaError_t launch_simple(const DevAttn& a, bool f16);  // attention_simple.cu
#endif

namespace {

ref::AttentionPipeline simple_pipeline(Format f) {
  ref::AttentionPipeline p = cpu::attn::base_pipeline(f);
  p.name = "cuda simple";
  p.kv_blocks = 1;
  p.splits = 1;
  p.normalize_before_pv = true;  // p = fl(e / l), then (f16) fl_fp16(p), then PV
  p.pv_terms = 0;                // one chain over the visible keys
  return p;
}

#if KVCONF_CUDA_DEVICE_CODE
int launch(DeviceCall& call, const AttentionCall&) { return launch_simple(call.a, call.f16); }
#endif

}  // namespace

void register_cuda_attention_simple(Registry& r) {
  CudaAttention a;
  a.stem = "simple";
  a.cache_invariant = true;  // a row's arithmetic depends only on its visible keys
  a.mirrors = "plain CUDA attention, one (row, head) per block: max, sum, p = e/l, fp32 PV";
  a.pipeline = [](Format f, const AttentionCall&) { return simple_pipeline(f); };
  a.launch = KVCONF_CUDA_LAUNCH(launch);
  for (const Format f : {Format::fp16, Format::fp32}) r.add(make_cuda_attention(a, f));
}

}  // namespace kvconf::kernels::cuda
