// What every CUDA attention kernel shares (make_cuda_attention): backend, formats, determinism, supports() (the
// device reason first, so every suite skips with it where no GPU can run them, then the shapes the kernels take)
// and the run through run_attention; the pipeline pieces two descriptions share; and register_cuda_kernels(), which
// calls each kernel's register_cuda_attention_<stem> in the order of kernels.def. The kernels themselves are
// described in attention_<stem>.cpp (the numerics of the path each call takes, as ref::AttentionPipeline, so the
// bounds of reference/ apply; kernels/cuda/attention_*.cu document the orders). Compiled with and without CUDA:
// names are stable.
#include <algorithm>
#include <limits>
#include <string>

#include "cuda_attention.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels::cuda {

// Each kernel's registering function (attention_<stem>.cpp), declared from the list.
#define KVCONF_CUDA_KERNELS(stem) void register_cuda_attention_##stem(Registry& r);
#include "kernels.def"
#undef KVCONF_CUDA_KERNELS

namespace {

Reason cuda_reason(const AttentionCall& c) {
  if (auto r = gpu_unavailable()) return r;
  if (Reason r = cpu::attn::shape_reason(c)) return r;
  auto dim_ok = [](std::size_t x) { return x == 64 || x == 128 || x == 256; };
  if (!dim_ok(c.shape.d) || !dim_ok(c.shape.d_v))
    return "the CUDA attention kernels support head dims 64, 128 and 256 (d = " + std::to_string(c.shape.d) +
           ", d_v = " + std::to_string(c.shape.d_v) + ")";
  constexpr std::size_t kIntMax = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (c.cap() > kIntMax / 2 || c.shape.n_q * c.shape.n_heads > kIntMax)
    return "the CUDA attention kernels index keys and blocks with int";
  return std::nullopt;
}

}  // namespace

// Keys of split [s·K, (s+1)·K) visible in `keys`.
cpu::attn::KeyRange split_range(cpu::attn::KeyRange keys, std::size_t K, std::size_t s) {
  const std::size_t lo = std::max(keys.lo, s * K), hi = std::min(keys.hi, (s + 1) * K);
  return hi > lo ? cpu::attn::KeyRange{lo, hi} : cpu::attn::KeyRange{};
}

ref::AttentionPipeline flash2_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = cpu::attn::flash2_standard_pipeline(f, c);  // same Bc and order as A1
  p.name = "cuda " + p.name;
  return p;
}

AttentionKernel make_cuda_attention(const CudaAttention& a, Format f) {
  AttentionKernel k;
  k.info.name = "cuda.attn." + a.stem + "." + format_suffix(f);
  k.info.backend = "cuda";
  k.info.in = f;
  k.info.acc = Format::fp32;
  k.info.out = f;
  k.info.partial = Format::fp32;
  k.info.deterministic = true;  // fixed orders, no atomics, one stream
  k.info.cache_invariant = a.cache_invariant;
  k.info.mirrors = a.mirrors +
                   "; GPU exp/log/tanh are the device's double functions rounded to fp32 (not bit-specified): checked "
                   "against the oracle and the other kernels by the bounds only";
  k.pipeline = [f, pipeline = a.pipeline](const AttentionCall& c) { return pipeline(f, c); };
  k.supports = [](const AttentionCall& c) { return cuda_reason(c); };
  const std::string who = k.info.name;
  k.run = [launch = a.launch, f, who](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                                      std::span<const float> vc, std::span<float> out) {
    run_attention(who.c_str(), launch, f, c, q, kc, vc, out);
  };
  return k;
}

}  // namespace kvconf::kernels::cuda

namespace kvconf::kernels {

void register_cuda_kernels(Registry& r) {
#define KVCONF_CUDA_KERNELS(stem) cuda::register_cuda_attention_##stem(r);
#include "kernels.def"
#undef KVCONF_CUDA_KERNELS
}

}  // namespace kvconf::kernels
