// The black-box probes (black_box.hpp): deterministic CPU kernels described to the bounds as black boxes, so that
// the golden baselines pin the bounds every black-box pipeline gives (torch, torch CUDA, plugins) on fixed inputs.
#include <stdexcept>
#include <string>

#include "kvconf/kernels/black_box.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {
namespace {

constexpr Format kFormats[] = {Format::fp32, Format::bf16, Format::fp16};

template <class K>
K probe_of(const K* base, const std::string& name, const std::string& base_name) {
  if (base == nullptr) throw std::logic_error("black_box_probe_registry: no CPU kernel " + base_name);
  K k = *base;
  k.info.name = name;
  k.info.backend = "probe";
  k.info.mirrors = base_name + "'s arithmetic, described as a black box";
  return k;
}

// An exp budget of a black-box attention pipeline and the scale that goes with it.
struct ExpBudget {
  const char* name;
  double rel, abs;
  bool exp2_scale;  // the scale folded with log2 e (black_box_attention_pipeline)
};
constexpr ExpBudget kExpBudgets[] = {
    {"exact", 0x1p-23, kExpU20AbsError, false},                        // a plugin declaring exp_ulps = 0 (one ulp)
    {"u20", kExpU20RelError, kExpU20AbsError, false},                  // torch CPU
    {"cuda_fast", kCudaFastExpRelError, kCudaFastExpAbsError, true}};  // torch CUDA

}  // namespace

Registry black_box_probe_registry() {
  const Registry cpu = cpu_registry();
  Registry r;
  for (Format f : kFormats) {
    const std::string gemm = std::string("cpu.gemm.g1.") + format_suffix(f);
    GemmKernel g = probe_of(cpu.find_gemm(gemm), std::string("probe.blackbox.gemm.") + format_suffix(f), gemm);
    g.path = [f](const GemmShape&) { return black_box_gemm_path(f, f); };
    r.add(std::move(g));
  }
  for (Format f : kFormats)
    for (const bool cuda : {false, true}) {
      const std::string norm = std::string("cpu.norm.r1.") + format_suffix(f);
      NormKernel n = probe_of(cpu.find_norm(norm),
                              std::string("probe.blackbox.norm") + (cuda ? "_cuda." : ".") + format_suffix(f), norm);
      n.path = [f, cuda](const NormShape&) {
        NormPath p = black_box_norm_path(f);
        if (cuda) p.rsqrt_rel_error = kCudaRsqrtRelError;
        return p;
      };
      r.add(std::move(n));
    }
  for (Format f : kFormats)
    for (const ExpBudget& e : kExpBudgets) {
      const std::string attn = std::string("cpu.attn.a1_flash2.") + format_suffix(f);
      AttentionKernel a = probe_of(cpu.find_attention(attn),
                                   std::string("probe.blackbox.attn.") + format_suffix(f) + "." + e.name, attn);
      const KernelInfo info = a.info;
      a.pipeline = [info, e](const AttentionCall& c) {
        ref::AttentionPipeline p = black_box_attention_pipeline(info, c, e.rel, e.abs, {}, e.exp2_scale);
        p.name = std::string("probe black-box, exp ") + e.name;
        return p;
      };
      r.add(std::move(a));
    }
  return r;
}

}  // namespace kvconf::kernels
