// The kernel registry's entries: GEMM/projection, RMSNorm and attention kernels under test, each with a
// stable name, its formats, what it claims, which cases it supports, and the numerics of the path it
// takes for a given call shape (so the bounds of reference/ apply to exactly that path). DESIGN.md "Kernels".
//
// Tensors are row-major spans of float holding values of the kernel's input format (fp16 and bf16
// values are exactly representable in float); outputs are floats holding values of the output format.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/norm.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::kernels {

// Why a kernel does not support a case (becomes GTEST_SKIP); nullopt = supported.
using Reason = std::optional<std::string>;

// The format part of a kernel name: "f16", "bf16", "f32" ("cpu.attn.a1_flash2.f16"); std::invalid_argument for
// another format (kernels come in these three).
std::string format_suffix(Format f);

struct KernelInfo {
  std::string name;             // stable id: "cpu.gemm.g1.f16", "cpu.attn.a1_flash2.f16"
  std::string backend = "cpu";  // "cpu", "cuda", "cublas", "torch", "plugin", "mutant"
  Format in = Format::fp16;     // inputs
  Format acc = Format::fp32;    // accumulator of the reductions
  Format out = Format::fp16;    // outputs
  // Narrowest format a partial result passes through before the output (split-K slices rounded to
  // fp16, fp16 per-partition attention outputs, fp16 partial sums). Equal to acc for most kernels.
  // The two-sided rule's naive reference accumulates in this format (conformance/checks.hpp).
  Format partial = Format::fp32;
  bool cache_invariant = false;  // claims: the decode path equals the prefill path bitwise, independent
                                 // of M (rows in the call), cache capacity and chunking
  bool deterministic = true;     // claims: same inputs give the same bits run to run
  std::string mirrors;           // the real kernel it emulates (notes/kernels.md id and stack)
};

// ---------------------------------------------------------------------------------------------
// GEMM / projection: y = x·Wᵀ, as a Linear layer computes it.
struct GemmShape {
  std::size_t m = 1;  // rows of x: tokens in the call (1 = decode)
  std::size_t n = 1;  // output features
  std::size_t k = 1;  // input features (the reduction length)
};

// The reduction one output element goes through for a call shape: numerics::dot(spec, order, x_row, w_row)
// reproduces the kernel's result bit for bit, and ref::dot_error_terms(spec, order, k) bounds it.
struct GemmPath {
  std::string name;  // "tiled_bk64", "splitk4_acc", "gemv_t128_half2", ...
  AccumSpec spec;
  Order order;
};

struct GemmKernel {
  KernelInfo info;
  std::function<Reason(const GemmShape&)> supports;
  std::function<GemmPath(const GemmShape&)> path;
  // x: (m, k), w: (n, k), y: (m, n).
  std::function<void(const GemmShape&, std::span<const float> x, std::span<const float> w, std::span<float> y)> run;
};

// ---------------------------------------------------------------------------------------------
// RMSNorm, as HF computes it: r = 1/sqrt(mean(x²) + eps) in fp32, y = x·r, then the weight.
struct NormShape {
  std::size_t rows = 1;  // tokens in the call (1 = decode)
  std::size_t d = 1;     // hidden size (the reduction length)
};

struct NormParams {
  float eps = 1e-6f;             // as the float the kernel adds (the oracle takes this exact value)
  bool one_plus_weight = false;  // Gemma: y = (x·r)·(1 + w) in fp32, one rounding to the output format;
                                 // Llama: y = fl_out(w · fl_out(x·r)) (two roundings)
};

// The sum-of-squares reduction of one row for a call shape (spec.in is the input format, squares are
// dot(x, x)): numerics::dot(spec, order, x, x) reproduces the kernel's Σx² bit for bit.
struct NormPath {
  std::string name;
  AccumSpec spec;
  Order order;
  // Relative error of the kernel's r̂ = rsqrt(Ŵ) (ref::RmsNormErrorInputs): fl32 of a binary64 1/sqrt for
  // the CPU kernels; fl32(1/fl32(sqrt)) (two roundings, PyTorch's vectorised rsqrt) for black-box kernels.
  double rsqrt_rel_error = ref::kRsqrtViaDoubleRelError;
};

struct NormKernel {
  KernelInfo info;
  std::function<Reason(const NormShape&)> supports;
  std::function<NormPath(const NormShape&)> path;
  // x: (rows, d), w: (d), y: (rows, d).
  std::function<void(const NormShape&, const NormParams&, std::span<const float> x, std::span<const float> w,
                     std::span<float> y)>
      run;
};

// ---------------------------------------------------------------------------------------------
// Attention over a KV cache.
//
// q: (n_q, n_heads, d) at absolute positions q_offset .. q_offset + n_q − 1;
// k_cache: (capacity, n_kv_heads, d), v_cache: (capacity, n_kv_heads, d_v): rows [0, shape.n_kv) are
// filled, rows [n_kv, capacity) are allocated but unused and must never be read;
// out: (n_q, n_heads, d_v). Masking, window and softcap are those of ref::AttentionParams; params.scale is
// the float the kernel multiplies by (the oracle takes this exact value).
struct AttentionCall {
  ref::AttentionShape shape;
  ref::AttentionParams params;
  std::size_t capacity = 0;  // >= shape.n_kv; 0 means shape.n_kv
  // Sequences in the launch this call is part of (a batched decode step; 1: alone). The rows are this sequence's;
  // only a kernel whose launch plan depends on the batch reads it (FA2's split heuristic counts batch · heads tiles).
  std::size_t batch = 1;
  std::size_t cap() const { return capacity == 0 ? shape.n_kv : capacity; }
};

// One sequence of a variable-length batched launch (AttentionKernel::run_batch): its own call (n_q, n_kv, q_offset,
// capacity; call.batch = the sequences in the launch), its query rows, its cache and its output, shaped as for `run`.
struct AttentionSeq {
  AttentionCall call;
  std::span<const float> q, k_cache, v_cache;
  std::span<float> out;
};

struct AttentionKernel {
  KernelInfo info;
  std::function<Reason(const AttentionCall&)> supports;
  // The numerics of the path this call takes (decode vs prefill, block size, splits), for the bound.
  std::function<ref::AttentionPipeline(const AttentionCall&)> pipeline;
  std::function<void(const AttentionCall&, std::span<const float> q, std::span<const float> k_cache,
                     std::span<const float> v_cache, std::span<float> out)>
      run;
  // Optional: one launch over several sequences (a batched decode step as a serving engine launches it; a black-box
  // kernel pads them into one batch). Absent: each sequence is launched with `run`, its call.batch saying how many
  // sequences the step launches (run_attention_batch).
  std::function<Reason(std::span<const AttentionCall>)> supports_batch;
  std::function<void(std::span<const AttentionSeq>)> run_batch;
};

// A batched launch of `seqs` through the kernel's run_batch, else one `run` per sequence.
void run_attention_batch(const AttentionKernel& k, std::span<const AttentionSeq> seqs);

}  // namespace kvconf::kernels
