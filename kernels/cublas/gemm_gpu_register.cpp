// register_cublas_kernels: the GPU GEMM / projection entries (docs/GPU.md "Projections"), their claims and,
// per call shape, the reduction model path() gives the bounds (and, for fixed and rowdot, the exact order).
//
//   cuda.gemm.cublas.f16.acc32  cublasGemmEx fp16 in/out, COMPUTE_32F. path: the tensor-core block-FMA model
//                               (notes/numerics.md §2) with the device's parameters — a MODEL, not a bit claim.
//   cuda.gemm.cublas.f16.acc16  cublasGemmEx fp16 in/out, COMPUTE_16F. path: a sequential fp16 chain without
//                               FMA (the loosest fp16 order: its bound covers any order of <= k fp16 roundings).
//   cuda.gemm.cublas.f32        cublasGemmEx fp32, COMPUTE_32F_PEDANTIC (no TF32). path: a sequential fp32
//                               chain without FMA (its bound covers any fp32 summation order).
//   cuda.gemm.fixed.f16         one thread per element, k ascending, fp32 FMA chain: bit-exact path,
//                               claims cache_invariant.
//   cuda.gemm.rowdot.f32acc     one warp per element, 32 strided fp32 FMA chains + xor butterfly: bit-exact
//                               path, the same for every M, so it claims cache_invariant too.
#include <string>
#include <utility>

#include "gemm_gpu_backend.hpp"
#include "kvconf/kernels/cublas.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {
namespace {

using gpu_gemm::Which;

AccumSpec spec_of(Format in, Format acc, Format out, bool fma) {
  AccumSpec s;
  s.in = in;
  s.acc = acc;
  s.out = out;
  s.fma = fma;
  return s;
}

// The row-dot kernel's order (kernels/cuda/gemm_rowdot.cu).
ThreadStrided rowdot_order() {
  ThreadStrided o;
  o.threads = 32;
  o.vec = 1;
  o.split_lanes = false;
  o.interleave = 1;
  o.combine = std::nullopt;  // fp32, the accumulator
  o.tree = ThreadTree::warp_first;
  return o;
}

GemmKernel entry(Which which, std::string name, std::string backend, Format in, Format acc, Format out, bool invariant,
                 std::string mirrors, std::function<GemmPath(const GemmShape&)> path) {
  GemmKernel k;
  k.info.name = std::move(name);
  k.info.backend = std::move(backend);
  k.info.in = in;
  k.info.acc = acc;
  k.info.out = out;
  k.info.partial = acc;
  k.info.cache_invariant = invariant;
  k.info.deterministic = true;  // one stream, CUBLAS_WORKSPACE_CONFIG=:4096:8, fixed kernels
  k.info.mirrors = std::move(mirrors);
  k.supports = [](const GemmShape&) { return gpu_gemm::unavailable(); };
  k.path = std::move(path);
  k.run = [which](const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    gpu_gemm::run(which, s, x, w, y);
  };
  return k;
}

}  // namespace

void register_cublas_kernels(Registry& r) {
  r.add(entry(
      Which::cublas_f16_acc32, "cuda.gemm.cublas.f16.acc32", "cublas", Format::fp16, Format::fp32, Format::fp16, false,
      "cublasGemmEx(OP_T, OP_N, n, m, k) as a Linear layer calls it (M = 1 and M = n, no padding), fp16 "
      "A/B/C, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT; path = tensor-core block-FMA model with the "
      "device's parameters (a model of cuBLAS's undisclosed order, not a bit-exact claim)",
      [](const GemmShape&) {
        const TensorCoreParams p = gpu_tensor_core_params();
        const TensorCore o{p};
        return GemmPath{"cublas_tc_model_" + order_name(o), spec_of(Format::fp16, Format::fp32, Format::fp16, true), o};
      }));
  r.add(entry(Which::cublas_f16_acc16, "cuda.gemm.cublas.f16.acc16", "cublas", Format::fp16, Format::fp16, Format::fp16,
              false,
              "cublasGemmEx fp16 A/B/C with CUBLAS_COMPUTE_16F (llama.cpp GGML_PREC_DEFAULT, G4); path = a "
              "sequential fp16 chain without FMA, the bound model for any fp16 accumulation order",
              [](const GemmShape&) {
                return GemmPath{"cublas_compute16f_seq_model", spec_of(Format::fp16, Format::fp16, Format::fp16, false),
                                Sequential{}};
              }));
  r.add(entry(Which::cublas_f32, "cuda.gemm.cublas.f32", "cublas", Format::fp32, Format::fp32, Format::fp32, false,
              "cublasGemmEx fp32 A/B/C with CUBLAS_COMPUTE_32F_PEDANTIC (no TF32); path = a sequential fp32 "
              "chain without FMA, the bound model for any fp32 summation order",
              [](const GemmShape&) {
                return GemmPath{"cublas_sgemm_pedantic_seq_model",
                                spec_of(Format::fp32, Format::fp32, Format::fp32, false), Sequential{}};
              }));
  r.add(
      entry(Which::fixed_f16, "cuda.gemm.fixed.f16", "cuda", Format::fp16, Format::fp32, Format::fp16, true,
            "hand-written fixed-order GEMM (kernels/cuda/gemm_fixed.cu): one thread per output, k ascending, "
            "__fmul_rn leaf then __fmaf_rn, one cast to fp16; the same kernel for every M",
            [](const GemmShape&) {
              return GemmPath{"fixed_seq_ffma", spec_of(Format::fp16, Format::fp32, Format::fp16, true), Sequential{}};
            }));
  r.add(entry(Which::rowdot_f16, "cuda.gemm.rowdot.f32acc", "cuda", Format::fp16, Format::fp32, Format::fp16, true,
              "hand-written warp-per-output GEMM (kernels/cuda/gemm_rowdot.cu): 32 lanes stride k with fp32 "
              "FFMA chains, xor butterfly 16..1 in fp32, one cast; the same kernel for every M",
              [](const GemmShape&) {
                const ThreadStrided o = rowdot_order();
                return GemmPath{"rowdot_" + order_name(o), spec_of(Format::fp16, Format::fp32, Format::fp16, true), o};
              }));
}

}  // namespace kvconf::kernels
