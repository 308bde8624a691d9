// The built-in numerics profiles (DESIGN.md "Engine") and their lookup in a kernel registry.
#include "kvconf/engine/profile.hpp"

#include <stdexcept>
#include <string>

namespace kvconf::engine {
namespace {

Profile make(std::string name, Format storage, std::string gemm, std::string prefill, std::string decode,
             std::string norm, bool invariant, std::string description) {
  Profile p;
  p.name = std::move(name);
  p.storage = storage;
  p.gemm = std::move(gemm);
  p.attn_prefill = std::move(prefill);
  p.attn_decode = std::move(decode);
  p.norm = std::move(norm);
  p.cache_invariant = invariant;
  p.description = std::move(description);
  return p;
}

std::string list_names() {
  std::string s;
  for (const Profile& p : builtin_profiles()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace

const std::vector<Profile>& builtin_profiles() {
  static const std::vector<Profile> profiles = {
      make("fp32", Format::fp32, "cpu.gemm.g3.f32", "cpu.attn.a6_eager.f32", "cpu.attn.a6_eager.f32",
           "cpu.norm.r1.f32", false,
           "fp32 weights and activations with the shape-dependent kernels of fp16-eager (GEMV at M = 1, tiled GEMM "
           "at M = n; eager attention; R1 norm): the seed paper's FP32 falsification run"),
      make("fp16-eager", Format::fp16, "cpu.gemm.g3.f16.acc32", "cpu.attn.a6_eager.f16", "cpu.attn.a6_eager.f16",
           "cpu.norm.r1.f16", false,
           "HF transformers eager attention on a GPU in fp16: cuBLAS GEMV at M = 1 and tiled GEMM at M = n (fp32 "
           "accumulation), eager attention (fp32 softmax, fp16 P·V), PyTorch RMSNorm"),
      make("fp16-flash2", Format::fp16, "cpu.gemm.g3.f16.acc32", "cpu.attn.a1_flash2.f16", "cpu.attn.a2_splitkv.f16",
           "cpu.norm.r1.f16", false,
           "fp16 with FlashAttention-2 for prefill and split-KV flash-decoding for q_len = 1, shape-dependent "
           "GEMMs, PyTorch RMSNorm"),
      make("fp16-invariant", Format::fp16, "cpu.gemm.g1.f16", "cpu.attn.a7_fixedsplit.f16",
           "cpu.attn.a7_fixedsplit.f16", "cpu.norm.r2.f16", true,
           "fp16 batch-invariant stack: fixed-order tiled GEMM (G1), fixed-split attention aligned at absolute "
           "positions (A7), one-row-per-program RMSNorm (R2): cache-ON must equal cache-OFF bit for bit"),
      make("bf16-eager", Format::bf16, "cpu.gemm.g3.bf16.acc32", "cpu.attn.a6_eager.bf16", "cpu.attn.a6_eager.bf16",
           "cpu.norm.r1.bf16", false, "fp16-eager's kernels in bf16"),
  };
  return profiles;
}

const Profile& find_profile(std::string_view name) {
  for (const Profile& p : builtin_profiles())
    if (p.name == name) return p;
  throw std::invalid_argument("unknown profile '" + std::string(name) + "' (expected one of: " + list_names() + ")");
}

ProfileKernels resolve(const Profile& p, const kernels::Registry& r) {
  ProfileKernels k;
  k.profile = p;
  auto missing = [&](const std::string& what, const std::string& name) {
    return std::invalid_argument("profile '" + p.name + "': " + what + " kernel '" + name + "' is not in the registry");
  };
  auto mismatch = [&](const std::string& name, Format in, Format out) {
    if (in != p.storage || out != p.storage)
      throw std::invalid_argument("profile '" + p.name + "': kernel '" + name + "' takes " + std::string(kvconf::name(in)) +
                                  " and gives " + std::string(kvconf::name(out)) + " (expected " + std::string(kvconf::name(p.storage)) + ")");
  };
  if (!(k.gemm = r.find_gemm(p.gemm))) throw missing("gemm", p.gemm);
  if (!(k.attn_prefill = r.find_attention(p.attn_prefill))) throw missing("prefill attention", p.attn_prefill);
  if (!(k.attn_decode = r.find_attention(p.attn_decode))) throw missing("decode attention", p.attn_decode);
  if (!(k.norm = r.find_norm(p.norm))) throw missing("norm", p.norm);
  mismatch(p.gemm, k.gemm->info.in, k.gemm->info.out);
  mismatch(p.attn_prefill, k.attn_prefill->info.in, k.attn_prefill->info.out);
  mismatch(p.attn_decode, k.attn_decode->info.in, k.attn_decode->info.out);
  mismatch(p.norm, k.norm->info.in, k.norm->info.out);
  return k;
}

}  // namespace kvconf::engine
