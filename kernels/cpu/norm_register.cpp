// Registration of the CPU RMSNorm kernels (notes/kernels.md §3, §7 R1–R2): the HF LlamaRMSNorm /
// Gemma2RMSNorm pipeline (norm_rows.hpp) with the Σx² reduction of
//   cpu.norm.r1.{f16,bf16,f32}  R1: PyTorch's mean(-1) block reduction, whose thread count depends on the
//                               number of rows in the call (r1_config) — not cache invariant;
//   cpu.norm.r2.{f16,bf16,f32}  R2: one row per program, 1024-element chunks in order, a tree inside each
//                               chunk (vLLM / Thinking Machines batch-invariant RMSNorm) — cache invariant.
// Inputs x and w are values of the kernel's format; acc fp32; the output is rounded to the same format.
// Note: the batch-invariant kernels divide by d (sum_sq / n_cols); this emulation multiplies by fl32(1/d) as
// PyTorch's mean does for every variant (the same for d a power of two), so R1 and R2 differ only in Σx².
#include <stdexcept>
#include <string>

#include "cpu_kernels.hpp"
#include "norm_rows.hpp"

namespace kvconf::kernels::cpu {
namespace {

constexpr std::size_t kR2Chunk = 1024;

AccumSpec squares_spec(Format in) {
  AccumSpec s;
  s.in = in;
  s.acc = Format::fp32;
  s.out = Format::fp32;
  s.fma = false;  // x.pow(2) is materialised in fp32, then summed: a rounded product, then an addition
  return s;
}

void check_spans(const std::string& name, const NormShape& s, std::span<const float> x, std::span<const float> w,
                 std::span<float> y) {
  if (x.size() != s.rows * s.d || w.size() != s.d || y.size() != s.rows * s.d)
    throw std::invalid_argument(name + ": x, w, y must hold rows·d, d, rows·d values (rows=" + std::to_string(s.rows) +
                                " d=" + std::to_string(s.d) + ")");
}

KernelInfo info_of(const std::string& name, Format f, bool invariant, const char* mirrors) {
  KernelInfo i;
  i.name = name;
  i.backend = "cpu";
  i.in = f;
  i.acc = Format::fp32;
  i.out = f;
  i.partial = Format::fp32;
  i.cache_invariant = invariant;
  i.deterministic = true;
  i.mirrors = mirrors;
  return i;
}

NormKernel r1(const std::string& suffix, Format f) {
  NormKernel k;
  k.info = info_of("cpu.norm.r1." + suffix, f, false,
                   "R1: HF RMSNorm with PyTorch's CUDA mean(-1) (Reduce.cuh: threads per row = block_width from "
                   "the number of rows; float4 lanes or vt0 = 4 accumulators, shared-memory halving, shfl_down "
                   "tree)");
  k.supports = [](const NormShape& s) -> Reason { return r1_config(s.rows, s.d).unsupported; };
  k.path = [f](const NormShape& s) {
    const R1Config c = r1_config(s.rows, s.d);
    const Order o = r1_order(c);
    return NormPath{"pytorch_reduce_" + order_name(o), squares_spec(f), o};
  };
  const std::string name = k.info.name;
  k.run = [name, f](const NormShape& s, const NormParams& p, std::span<const float> x, std::span<const float> w,
                    std::span<float> y) {
    check_spans(name, s, x, w, y);
    const R1Config c = r1_config(s.rows, s.d);
    if (c.unsupported) throw std::invalid_argument(name + ": unsupported shape: " + *c.unsupported);
    for (std::size_t r = 0; r < s.rows; ++r) {
      const float* xr = x.data() + r * s.d;
      rms_finish_row(sum_sq_r1(xr, s.d, c), xr, w.data(), s.d, p, f, y.data() + r * s.d);
    }
  };
  return k;
}

NormKernel r2(const std::string& suffix, Format f) {
  NormKernel k;
  k.info = info_of("cpu.norm.r2." + suffix, f, true,
                   "R2: batch-invariant RMSNorm (vLLM / Thinking Machines): one row per program, 1024-element "
                   "chunks in order, a tree inside each chunk; depends on the row length only");
  k.supports = [](const NormShape&) -> Reason { return std::nullopt; };
  k.path = [f](const NormShape&) { return NormPath{"chunked1024_tree", squares_spec(f), Blocked{kR2Chunk, true}}; };
  const std::string name = k.info.name;
  k.run = [name, f](const NormShape& s, const NormParams& p, std::span<const float> x, std::span<const float> w,
                    std::span<float> y) {
    check_spans(name, s, x, w, y);
    for (std::size_t r = 0; r < s.rows; ++r) {
      const float* xr = x.data() + r * s.d;
      rms_finish_row(sum_sq_r2(xr, s.d, kR2Chunk), xr, w.data(), s.d, p, f, y.data() + r * s.d);
    }
  };
  return k;
}

}  // namespace

void register_norm_kernels(Registry& r) {
  r.add(r1("f16", Format::fp16));
  r.add(r1("bf16", Format::bf16));
  r.add(r1("f32", Format::fp32));
  r.add(r2("f16", Format::fp16));
  r.add(r2("bf16", Format::bf16));
  r.add(r2("f32", Format::fp32));
}

}  // namespace kvconf::kernels::cpu
