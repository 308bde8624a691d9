// Kernels over Python runners (kernels.cpp): what a Python callable states about itself, and the registry kernel
// entries made from it, described to the bounds as black boxes.
#pragma once

#include <string>

#include "bindings.hpp"
#include "kvconf/kernels/black_box.hpp"
#include "kvconf/kernels/kernel.hpp"

namespace kvconf::python {

struct KernelSpec {
  std::string name;               // the user's name; the kernel is python.<name>.<f32|f16|bf16>
  Format format = Format::fp16;   // inputs and outputs; products and sums in `declared.acc` in any order
  kernels::DeclaredAcc declared;  // its accumulators (accumulate=, pv_accumulate=), as a plugin declares them
  nb::object runner;              // runner(call, *inputs) -> float32 CPU tensor (python/kvconf/_kernel.py)
  nb::object supports;            // supports(call) -> None | reason, or None
  bool cache_invariant = false;   // claims: decode equals prefill bitwise, independent of capacity and chunking
  bool deterministic = true;
  std::string mirrors;
};

// exp budget: relative (fp32 ulps · 2^-23) and absolute (a flush of e^x below 2^-125 to 0, or 0). exp2_scale: the
// kernel folds the scale with log2 e and calls exp2 (kernels::black_box_attention_pipeline).
// batch_runner: None, or batch_runner([(call, q, k_cache, v_cache), ...]) -> [float32 CPU tensor, ...], one batched
// decode launch (AttentionKernel::run_batch; python/kvconf/_kernel.py wraps the user's batch_fn); batch_supports:
// None, or batch_supports([call, ...]) -> None | reason (AttentionKernel::supports_batch).
kernels::AttentionKernel attention_kernel(const KernelSpec& s, double exp_rel_error, double exp_abs_error,
                                          bool exp2_scale = false, nb::object batch_runner = nb::none(),
                                          nb::object batch_supports = nb::none());
kernels::GemmKernel gemm_kernel(const KernelSpec& s);
kernels::NormKernel norm_kernel(const KernelSpec& s, double rsqrt_rel_error);

}  // namespace kvconf::python
