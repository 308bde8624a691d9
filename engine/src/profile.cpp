// The built-in numerics profiles (DESIGN.md "Engine"), the GPU profiles (docs/GPU.md "Engine profiles"), and their
// lookup in a kernel registry.
#include "kvconf/engine/profile.hpp"

#include <stdexcept>
#include <string>

#include "kvconf/engine/model.hpp"
#include "kvconf/kernels/cublas.hpp"
#include "kvconf/kernels/gpu.hpp"

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

Profile gpu(Profile p) {
  p.requires_gpu = true;
  return p;
}

std::string list_names() {
  std::string s;
  for (const Profile& p : builtin_profiles()) s += (s.empty() ? "" : ", ") + p.name;
  for (const Profile& p : gpu_profiles()) s += ", " + p.name + " (GPU)";
  return s;
}

// The GPU kernels and the CPU kernels in one registry, built once: where a GPU profile's kernels are found when the
// caller's registry (typically kernels::cpu_registry()) lacks them. Static: the resolved pointers outlive any caller.
const kernels::Registry& gpu_fallback_registry() {
  static const kernels::Registry r = [] {
    kernels::Registry all = kernels::gpu_registry();
    kernels::register_cpu_kernels(all);
    return all;
  }();
  return r;
}

}  // namespace

const std::vector<Profile>& builtin_profiles() {
  static const std::vector<Profile> profiles = {
      make("fp32", Format::fp32, "cpu.gemm.g3.f32", "cpu.attn.a6_eager.f32", "cpu.attn.a6_eager.f32", "cpu.norm.r1.f32",
           false,
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

// The norm of the GPU profiles is the CPU R1 emulation (PyTorch's RMSNorm order, notes/kernels.md R1): no CUDA norm
// kernel is registered yet, and the engine calls every kernel with host spans, so a CUDA norm would save nothing but
// a copy; R1's fp32 row reduction is what torch's CUDA RMSNorm computes up to its reduction order (docs/GPU.md).
const std::vector<Profile>& gpu_profiles() {
  static const std::vector<Profile> profiles = {
      gpu(make(
          "cuda-fp16", Format::fp16, "cuda.gemm.cublas.f16.acc32", "cuda.attn.flash2.f16", "cuda.attn.splitkv.f16",
          "cpu.norm.r1.f16", false,
          "fp16 on a CUDA device: cuBLAS GEMMs with fp32 compute (cublasGemmEx, M = 1 and M = n as the engine "
          "calls them), FlashAttention-2-style prefill and split-KV decode CUDA kernels, PyTorch RMSNorm (CPU R1)")),
      gpu(make("cuda-fp32", Format::fp32, "cuda.gemm.cublas.f32", "cuda.attn.flash2.f32", "cuda.attn.splitkv.f32",
               "cpu.norm.r1.f32", false,
               "cuda-fp16's kernels in fp32 (cuBLAS SGEMM, fp32 attention): the falsification run on the GPU")),
      gpu(make("cuda-fp16-invariant", Format::fp16, "cuda.gemm.fixed.f16", "cuda.attn.invariant.f16",
               "cuda.attn.invariant.f16", "cpu.norm.r2.f16", true,
               "fp16 cache-invariant stack on a CUDA device: the fixed-order CUDA GEMM, the invariant attention kernel "
               "(one kernel and block size for every q_len, splits aligned at absolute positions), R2 norm")),
  };
  return profiles;
}

const Profile& find_profile(std::string_view name) {
  for (const Profile& p : builtin_profiles())
    if (p.name == name) return p;
  for (const Profile& p : gpu_profiles())
    if (p.name == name) return p;
  throw std::invalid_argument("unknown profile '" + std::string(name) + "' (expected one of: " + list_names() + ")");
}

std::optional<std::string> profile_unavailable(const Profile& p) {
  if (!p.requires_gpu) return std::nullopt;
  return kernels::gpu_unavailable();
}

namespace {
// Calls f(data, count) on every matrix pin_gpu_weights declares: the projections of every layer and the LM head.
template <class F>
void for_each_weight(const Model& m, F f) {
  for (const LayerWeights& l : m.layers)
    for (const std::vector<float>* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (!w->empty()) f(w->data(), w->size());
  const std::span<const float> head = m.head();
  if (!head.empty()) f(head.data(), head.size());
}
}  // namespace

void pin_gpu_weights(const Model& m, const Profile& p) {
  if (!p.requires_gpu || profile_unavailable(p)) return;
  for_each_weight(m, [](const float* w, std::size_t n) { kernels::pin_gpu_weights(w, n); });
}

void unpin_gpu_weights(const Model& m, const Profile& p) {
  if (!p.requires_gpu || profile_unavailable(p)) return;
  for_each_weight(m, [](const float* w, std::size_t n) { kernels::unpin_gpu_weights(w, n); });
}

ProfileKernels resolve(const Profile& p, const kernels::Registry& given) {
  if (const auto why = profile_unavailable(p))
    throw DeviceUnavailable("profile '" + p.name + "' needs a CUDA device: " + *why);
  // A GPU profile's kernels missing from the caller's registry come from the GPU + CPU fallback registry.
  const kernels::Registry* fallback = p.requires_gpu ? &gpu_fallback_registry() : nullptr;
  const auto lookup = [&](auto find) {
    auto* k = find(given);
    return (k || !fallback) ? k : find(*fallback);
  };
  ProfileKernels k;
  k.profile = p;
  auto missing = [&](const std::string& what, const std::string& name) {
    return std::invalid_argument("profile '" + p.name + "': " + what + " kernel '" + name + "' is not in the registry");
  };
  auto mismatch = [&](const std::string& name, Format in, Format out) {
    if (in != p.storage || out != p.storage)
      throw std::invalid_argument("profile '" + p.name + "': kernel '" + name + "' takes " +
                                  std::string(kvconf::name(in)) + " and gives " + std::string(kvconf::name(out)) +
                                  " (expected " + std::string(kvconf::name(p.storage)) + ")");
  };
  if (!(k.gemm = lookup([&](const kernels::Registry& x) { return x.find_gemm(p.gemm); })))
    throw missing("gemm", p.gemm);
  if (!(k.attn_prefill = lookup([&](const kernels::Registry& x) { return x.find_attention(p.attn_prefill); })))
    throw missing("prefill attention", p.attn_prefill);
  if (!(k.attn_decode = lookup([&](const kernels::Registry& x) { return x.find_attention(p.attn_decode); })))
    throw missing("decode attention", p.attn_decode);
  if (!(k.norm = lookup([&](const kernels::Registry& x) { return x.find_norm(p.norm); })))
    throw missing("norm", p.norm);
  mismatch(p.gemm, k.gemm->info.in, k.gemm->info.out);
  mismatch(p.attn_prefill, k.attn_prefill->info.in, k.attn_prefill->info.out);
  mismatch(p.attn_decode, k.attn_decode->info.in, k.attn_decode->info.out);
  mismatch(p.norm, k.norm->info.in, k.norm->info.out);
  return k;
}

}  // namespace kvconf::engine
