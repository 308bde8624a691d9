// Registration of the libtorch kernels and of the torch part of the mutant catalogue. Every entry is a black box
// (black_box.hpp): it states its formats, not its order. The CPU flash SDPA kernel's vectorised exp is budgeted
// at 20 ulp (exp_u20, notes/torch.md); the math backend's softmax uses the vectorised Sleef exp (about 1 ulp),
// which the same budget covers.
//
//   torch.attn.sdpa_flash.{f32,bf16,f16}  at::scaled_dot_product_attention, flash backend forced
//   torch.attn.sdpa_math.{f32,bf16,f16}   the same, math backend forced (fp16/bf16 computed in fp32)
//   torch.gemm.linear.{f32,bf16,f16}      at::linear(x (1, m, k), W (n, k))
//   torch.norm.hf_rms.{f32,bf16,f16}      HF LlamaRMSNorm / Gemma2RMSNorm written with torch ops
// and, on CUDA device 0 (torch_cuda_registry, the `gpu` label; unsupported with the reason without a device):
//   torch.cuda.attn.sdpa_{flash,efficient,cudnn,math}.{f32,bf16,f16}   (flash and cudnn take no fp32: skipped)
//   torch.cuda.gemm.linear.{f32,bf16,f16}, torch.cuda.norm.hf_rms.{f32,bf16,f16}
// CUDA budgets (black_box.hpp): exp as fast-math exp2f of a rescaled argument, rsqrtf's 2 ulp.
#include <string>

#include "kvconf/kernels/black_box.hpp"
#include "kvconf/kernels/torch.hpp"
#include "torch_ops.hpp"

namespace kvconf::kernels {
namespace {

using torch_ops::Calling;
using torch_ops::Device;
using torch_ops::Sdpa;

const char* sdpa_name(Sdpa b) {
  switch (b) {
    case Sdpa::flash:
      return "flash";
    case Sdpa::math:
      return "math";
    case Sdpa::efficient:
      return "efficient";
    case Sdpa::cudnn:
      return "cudnn";
  }
  return "?";
}

KernelInfo info_of(std::string name, Format f, std::string mirrors, std::string backend = "torch",
                   Device dev = Device::cpu) {
  KernelInfo i;
  i.name = std::move(name);
  i.backend = std::move(backend);
  i.in = f;
  i.acc = Format::fp32;
  i.out = f;
  i.partial = Format::fp32;
  i.cache_invariant = false;  // a black box claims nothing about its decode and prefill paths: measured
  i.deterministic = true;
  i.mirrors = std::move(mirrors) + " [" + torch_ops::description(dev) + "]";
  return i;
}

AttentionKernel sdpa_kernel(std::string name, Sdpa b, Format f, Calling how, std::string mirrors,
                            std::string backend = "torch", Device dev = Device::cpu) {
  AttentionKernel k;
  k.info = info_of(std::move(name), f, std::move(mirrors), std::move(backend), dev);
  const KernelInfo info = k.info;
  k.supports = [b, f, how, dev](const AttentionCall& c) -> Reason {
    if (auto why = torch_ops::unavailable(dev)) return why;
    if (c.params.softcap > 0.0) return std::string("at::scaled_dot_product_attention has no logit softcap");
    if (c.shape.n_kv_heads == 0 || c.shape.n_heads % c.shape.n_kv_heads != 0)
      return std::string("n_heads must be a multiple of n_kv_heads");
    std::string why;
    if (!torch_ops::sdpa_choice(dev, b, f, c, how, &why)) return why;
    return std::nullopt;
  };
  k.pipeline = [b, f, how, info, dev](const AttentionCall& c) {
    ref::AttentionPipeline p =
        dev == Device::cuda
            ? black_box_attention_pipeline(info, c, kCudaFastExpRelError, kCudaFastExpAbsError, {}, true)
            : black_box_attention_pipeline(info, c, kExpU20RelError, kExpU20AbsError);
    std::string why;
    const auto took = torch_ops::sdpa_choice(dev, b, f, c, how, &why);
    p.name = "sdpa:" + took.value_or("none") + " black-box";
    return p;
  };
  k.run = [b, f, how, dev](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                           std::span<const float> vc,
                           std::span<float> out) { torch_ops::sdpa(dev, b, f, how, c, q, kc, vc, out); };
  if (how == Calling::correct) {  // a batched decode step padded as HF pads it (the planted callers are single-call)
    k.supports_batch = [b, f, dev](std::span<const AttentionCall> calls) -> Reason {
      std::string why;
      if (!torch_ops::sdpa_batch_choice(dev, b, f, calls, &why)) return why;
      return std::nullopt;
    };
    k.run_batch = [b, f, dev](std::span<const AttentionSeq> seqs) { torch_ops::sdpa_batch(dev, b, f, seqs); };
  }
  return k;
}

std::string prefix(Device dev) { return dev == Device::cuda ? "torch.cuda." : "torch."; }

GemmKernel linear_kernel(Format f, Device dev = Device::cpu) {
  GemmKernel k;
  k.info =
      info_of(prefix(dev) + "gemm.linear." + format_suffix(f), f, "at::linear (nn.Linear's projection)", "torch", dev);
  k.supports = [dev](const GemmShape&) -> Reason { return torch_ops::unavailable(dev); };
  k.path = [f](const GemmShape&) { return black_box_gemm_path(f, f); };
  k.run = [f, dev](const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    torch_ops::linear(dev, f, s, x, w, y);
  };
  return k;
}

NormKernel norm_kernel(Format f, Device dev = Device::cpu) {
  NormKernel k;
  k.info = info_of(prefix(dev) + "norm.hf_rms." + format_suffix(f), f, "HF LlamaRMSNorm / Gemma2RMSNorm in torch ops",
                   "torch", dev);
  k.supports = [dev](const NormShape&) -> Reason { return torch_ops::unavailable(dev); };
  k.path = [f, dev](const NormShape&) {
    NormPath p = black_box_norm_path(f);
    if (dev == Device::cuda) p.rsqrt_rel_error = kCudaRsqrtRelError;
    return p;
  };
  k.run = [f, dev](const NormShape& s, const NormParams& p, std::span<const float> x, std::span<const float> w,
                   std::span<float> y) { torch_ops::hf_rms_norm(dev, f, s, p, x, w, y); };
  return k;
}

constexpr Format kFormats[] = {Format::fp32, Format::bf16, Format::fp16};

struct TorchMutant {
  Calling how;
  MutantInfo info;
};

std::vector<TorchMutant> torch_mutants() {
  return {
      {Calling::causal_flag_always,
       {"torch.mutant.attn.decode_is_causal",
        "attention",
        "passes is_causal=true on every SDPA call, decode included: PyTorch aligns the causal mask top-left, so a "
        "q_len = 1 query over the cache sees key 0 only",
        {"oracle_bound", "on_off_bound"}}},
      {Calling::missing_cache_row,
       {"torch.mutant.attn.missing_cache_row",
        "attention",
        "decode calls attend over the cache without the new token's K/V row (appended after the call)",
        {"oracle_bound", "on_off_bound"}}},
      {Calling::scale_from_hidden,
       {"torch.mutant.attn.scale_from_hidden",
        "attention",
        "scales the scores by 1/sqrt(n_heads·head_dim) (the hidden size) instead of 1/sqrt(head_dim)",
        {"oracle_bound"}}},
  };
}

}  // namespace

std::optional<std::string> torch_unavailable() { return torch_ops::unavailable(); }
std::string torch_description() { return torch_ops::description(); }

void register_torch_kernels(Registry& r) {
  for (Sdpa b : {Sdpa::flash, Sdpa::math})
    for (Format f : kFormats)
      r.add(sdpa_kernel(std::string("torch.attn.sdpa_") + sdpa_name(b) + "." + format_suffix(f), b, f, Calling::correct,
                        std::string("at::scaled_dot_product_attention, ") + sdpa_name(b) + " backend forced"));
  for (Format f : kFormats) r.add(linear_kernel(f));
  for (Format f : kFormats) r.add(norm_kernel(f));
}

Registry torch_registry() {
  Registry r;
  register_torch_kernels(r);
  return r;
}

std::optional<std::string> torch_cuda_unavailable() { return torch_ops::unavailable(Device::cuda); }

void register_torch_cuda_kernels(Registry& r) {
  for (Sdpa b : {Sdpa::flash, Sdpa::efficient, Sdpa::cudnn, Sdpa::math})
    for (Format f : kFormats)
      r.add(sdpa_kernel(std::string("torch.cuda.attn.sdpa_") + sdpa_name(b) + "." + format_suffix(f), b, f,
                        Calling::correct,
                        std::string("at::scaled_dot_product_attention on CUDA, ") + sdpa_name(b) + " backend forced",
                        "torch", Device::cuda));
  for (Format f : kFormats) r.add(linear_kernel(f, Device::cuda));
  for (Format f : kFormats) r.add(norm_kernel(f, Device::cuda));
}

Registry torch_cuda_registry() {
  Registry r;
  register_torch_cuda_kernels(r);
  return r;
}

Registry sweep_registry() {
  Registry r = cpu_registry();
  register_torch_kernels(r);
  return r;
}

std::string torch_sdpa_choice(const AttentionKernel& k, const AttentionCall& call) { return k.pipeline(call).name; }

void register_torch_mutant_kernels(Registry& r) {
  for (const TorchMutant& m : torch_mutants())
    r.add(sdpa_kernel(m.info.name, Sdpa::flash, Format::fp16, m.how,
                      "at::scaled_dot_product_attention fp16 flash, called wrongly: " + m.info.bug, "mutant"));
}

std::vector<MutantInfo> torch_mutant_catalogue() {
  std::vector<MutantInfo> v;
  for (const TorchMutant& m : torch_mutants()) v.push_back(m.info);
  return v;
}

}  // namespace kvconf::kernels
