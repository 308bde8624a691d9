// cuda.attn.flash2.{f16,f32}: FA2's standard forward (attention_flash2.cu) in A1's order: online softmax over key
// blocks of flash_bc(d) aligned at key 0, P cast before PV, o = acc · fl(1/l). Its kernels.def line: flash2.
#include "cuda_attention.hpp"
#if KVCONF_CUDA_DEVICE_CODE
#include "device_call.hpp"
#endif

namespace kvconf::kernels::cuda {

#if KVCONF_CUDA_DEVICE_CODE
cudaError_t launch_flash2(const DevAttn& a, bool f16);  // attention_flash2.cu
#endif

namespace {

#if KVCONF_CUDA_DEVICE_CODE
int launch(DeviceCall& call, const AttentionCall&) { return launch_flash2(call.a, call.f16); }
#endif

}  // namespace

void register_cuda_attention_flash2(Registry& r) {
  CudaAttention a;
  a.stem = "flash2";
  a.cache_invariant = true;  // same kernel and Bc for every call, blocks aligned at key 0 (as A1)
  a.mirrors = "A1 order (FA2 standard forward, Bc 128 (d<=64) / 64, online softmax, P cast before PV)";
  a.pipeline = [](Format f, const AttentionCall& c) { return flash2_pipeline(f, c); };
  a.launch = KVCONF_CUDA_LAUNCH(launch);
  for (const Format f : {Format::fp16, Format::fp32}) r.add(make_cuda_attention(a, f));
}

}  // namespace kvconf::kernels::cuda
