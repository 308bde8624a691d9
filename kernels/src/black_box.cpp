// The black-box descriptions of black_box.hpp: formats plus AnyOrder reductions.
#include "kvconf/kernels/black_box.hpp"

#include <algorithm>
#include <string>

namespace kvconf::kernels {

Format DeclaredAcc::partial() const { return info(pv).p < info(acc).p ? pv : acc; }

bool accumulator_narrower_than_inputs(Format acc, Format in) { return info(acc).p < info(in).p; }

GemmPath black_box_gemm_path(Format in, Format out, Format acc) {
  return {"black-box", AccumSpec{in, acc, out, false}, AnyOrder{}};
}

NormPath black_box_norm_path(Format in, Format acc) {
  NormPath p{"black-box", AccumSpec{in, acc, Format::fp32, false}, AnyOrder{}};
  p.rsqrt_rel_error = kRsqrtTwoRoundingsRelError;
  return p;
}

ref::AttentionPipeline black_box_attention_pipeline(const KernelInfo& info, const AttentionCall& call,
                                                    double exp_rel_error, double exp_abs_error, DeclaredAcc declared,
                                                    bool exp2_scale) {
  std::size_t visible = call.shape.n_kv;
  const auto w = call.params.window;
  if (w > 0) visible = std::min<std::size_t>(visible, static_cast<std::size_t>(call.params.causal ? w : 2 * w - 1));
  ref::AttentionPipeline p = ref::black_box_pipeline(info.in, info.out, visible, exp_rel_error, exp_abs_error);
  if (exp2_scale) p.scale_rel_error = kCudaScaleLog2RelError;
  p.qk_spec.acc = declared.acc;
  p.pv_spec.acc = declared.pv;
  if (declared.acc != Format::fp32) p.name += " + " + std::string(name(declared.acc)) + " accumulator";
  if (declared.pv != declared.acc) p.name += " + " + std::string(name(declared.pv)) + " PV accumulator";
  return p;
}

}  // namespace kvconf::kernels
