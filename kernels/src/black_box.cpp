// The black-box descriptions of black_box.hpp: formats plus AnyOrder reductions.
#include "kvconf/kernels/black_box.hpp"

#include <algorithm>

namespace kvconf::kernels {

GemmPath black_box_gemm_path(Format in, Format out) {
  return {"black-box", AccumSpec{in, Format::fp32, out, false}, AnyOrder{}};
}

NormPath black_box_norm_path(Format in) {
  NormPath p{"black-box", AccumSpec{in, Format::fp32, Format::fp32, false}, AnyOrder{}};
  p.rsqrt_rel_error = kRsqrtTwoRoundingsRelError;
  return p;
}

ref::AttentionPipeline black_box_attention_pipeline(const KernelInfo& info, const AttentionCall& call,
                                                    double exp_rel_error, double exp_abs_error) {
  std::size_t visible = call.shape.n_kv;
  const auto w = call.params.window;
  if (w > 0) visible = std::min<std::size_t>(visible, static_cast<std::size_t>(call.params.causal ? w : 2 * w - 1));
  return ref::black_box_pipeline(info.in, info.out, visible, exp_rel_error, exp_abs_error);
}

}  // namespace kvconf::kernels
