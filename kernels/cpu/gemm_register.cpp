// Registration of the CPU GEMM / projection kernels G1–G4 (notes/kernels.md §1, §5, §7): for each call
// shape, the path the real stack takes (path()), and a fast run() bit-identical to numerics::dot on it.
//
//   cpu.gemm.g1.{f16,bf16,f32}   G1 tiled, fixed order: one fp32 FFMA chain over K ascending, one cast.
//   cpu.gemm.g1tc.h100.f16       G1 on H100 tensor cores: chained k16 block FMAs (RZ fp32), one cast.
//   cpu.gemm.g2.f16.acc32        G2 split-K with an fp32 workspace; S from the shape (split_k_slices).
//   cpu.gemm.g2.f16.out16        G2 split-K, each slice rounded to fp16 and added in fp16.
//   cpu.gemm.g2.f32              G2 in fp32.
//   cpu.gemm.g3.f16.acc32        M = 1: G3 GEMV (ThreadStrided, fp32 partial sums); M > 1: G1.
//   cpu.gemm.g3.{bf16.acc32,f32} the same orders with bf16 / fp32 inputs (the bf16 and fp32 engine profiles).
//   cpu.gemm.g3g4.f16.acc16      M = 1: G3 half2 GEMV (fp16 lanes, fp32 combine); M > 1: G4 fp16 accumulate.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_kernels.hpp"
#include "gemm_core.hpp"
#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::kernels::cpu {
namespace {

// The split-K model of G2, in the spirit of cuBLAS's heuristic (notes/kernels.md §1.1: split K when the
// output tile grid is too small for the GPU, i.e. small M and large K; never for prefill-sized M): with
// 128 × 128 output tiles on a 132-SM H100, tiles = ceil(M/128)·ceil(N/128); when M <= 16 and K >= 1024 and
// tiles < 132, S = the largest power of two <= min(132 / tiles, K / 512, 16); otherwise S = 1. The constants
// are this model's, not cuBLAS's (whose heuristic is not public); what matters is that S depends on M.
std::size_t split_k_slices(const GemmShape& s) {
  constexpr std::size_t kSms = 132, kTile = 128, kMinSlice = 512, kMaxSplits = 16;
  if (s.m > 16 || s.k < 1024) return 1;
  const std::size_t tiles = ((s.m + kTile - 1) / kTile) * ((s.n + kTile - 1) / kTile);
  if (tiles >= kSms) return 1;
  const std::size_t cap = std::min({kSms / std::max<std::size_t>(tiles, 1), s.k / kMinSlice, kMaxSplits});
  std::size_t S = 1;
  while (S * 2 <= cap) S *= 2;
  return S;
}

AccumSpec spec_of(Format in, Format acc, Format out) {
  AccumSpec s;
  s.in = in;
  s.acc = acc;
  s.out = out;
  s.fma = true;
  return s;
}

void check_spans(const char* name, const GemmShape& s, std::span<const float> x, std::span<const float> w,
                 std::span<float> y) {
  if (x.size() != s.m * s.k || w.size() != s.n * s.k || y.size() != s.m * s.n)
    throw std::invalid_argument(std::string(name) + ": x, w, y must hold m·k, n·k, m·n values (m=" +
                                std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + ")");
}

// y = round_out(v) elementwise.
void round_all(Format out, std::span<float> y) {
  if (out == Format::fp32) return;
  std::size_t i = 0;
#if defined(KVCONF_HAVE_F16C)
  if (simd_enabled() && out == Format::fp16)
    for (; i + 8 <= y.size(); i += 8) _mm256_storeu_ps(y.data() + i, round_fp16_x8(_mm256_loadu_ps(y.data() + i)));
#endif
  for (; i < y.size(); ++i) y[i] = round_float(out, y[i]);
}

KernelInfo info_of(std::string name, Format in, Format acc, Format out, Format partial, bool invariant,
                   std::string mirrors) {
  KernelInfo i;
  i.name = std::move(name);
  i.backend = "cpu";
  i.in = in;
  i.acc = acc;
  i.out = out;
  i.partial = partial;
  i.cache_invariant = invariant;
  i.deterministic = true;
  i.mirrors = std::move(mirrors);
  return i;
}

Reason always(const GemmShape&) { return std::nullopt; }

// ---- G1 ------------------------------------------------------------------------------------------

GemmKernel g1(const std::string& suffix, Format in) {
  const Format out = in;
  GemmKernel k;
  k.info = info_of("cpu.gemm.g1." + suffix, in, Format::fp32, out, Format::fp32, true,
                   "G1: fixed-order tiled GEMM (TML/vLLM batch-invariant Triton matmul: BK = 64 ascending, FFMA into "
                   "fp32, one cast); M only changes the number of tiles");
  k.supports = always;
  k.path = [in, out](const GemmShape&) { return GemmPath{"tiled_bk64", spec_of(in, Format::fp32, out), Sequential{}}; };
  const std::string name = k.info.name;
  k.run = [name, out](const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    check_spans(name.c_str(), s, x, w, y);
    chain_gemm(ChainAcc::fp32, x, w, s.m, s.n, s.k, 0, s.k, y);
    round_all(out, y);
  };
  return k;
}

GemmKernel g1tc() {
  GemmKernel k;
  k.info = info_of("cpu.gemm.g1tc.h100.f16", Format::fp16, Format::fp32, Format::fp16, Format::fp32, true,
                   "G1 on H100 tensor cores: K ascending in k16 MMA blocks chained through an fp32 accumulator "
                   "(block-FMA model: alignment, truncation, RZ; tensor_core.hpp), one cast");
  k.supports = always;
  k.path = [](const GemmShape&) {
    return GemmPath{"tiled_tc16n2", spec_of(Format::fp16, Format::fp32, Format::fp16),
                    TensorCore{TensorCoreParams::h100()}};
  };
  k.run = [](const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    check_spans("cpu.gemm.g1tc.h100.f16", s, x, w, y);
    tensor_core_gemm_f16(TensorCoreParams::h100(), x, w, s.m, s.n, s.k, y);
    round_all(Format::fp16, y);
  };
  return k;
}

// ---- G2 ------------------------------------------------------------------------------------------

GemmKernel g2(const std::string& name, Format in, Format out, SplitKCombine combine) {
  const Format partial = combine == SplitKCombine::accumulator ? Format::fp32 : out;
  GemmKernel k;
  k.info = info_of(name, in, Format::fp32, out, partial, false,
                   combine == SplitKCombine::accumulator
                       ? "G2: cuBLAS/cuBLASLt split-K with an fp32 workspace (reduction scheme COMPUTE_TYPE); S from "
                         "the shape (small M, large K)"
                       : "G2: cuBLAS split-K with fp16 partials (INPLACE / OUTPUT_TYPE reduction; PyTorch "
                         "allow_fp16_reduced_precision_reduction = True, the default)");
  k.supports = always;
  k.path = [in, out, combine](const GemmShape& s) {
    const std::size_t S = split_k_slices(s);
    if (S == 1) return GemmPath{"tiled_bk64", spec_of(in, Format::fp32, out), Sequential{}};
    const Order o = SplitK{S, combine};
    return GemmPath{order_name(o), spec_of(in, Format::fp32, out), o};
  };
  k.run = [name, out, combine](const GemmShape& s, std::span<const float> x, std::span<const float> w,
                               std::span<float> y) {
    check_spans(name.c_str(), s, x, w, y);
    const std::size_t S = split_k_slices(s);
    if (S == 1 || s.k == 0) {
      chain_gemm(ChainAcc::fp32, x, w, s.m, s.n, s.k, 0, s.k, y);
      round_all(out, y);
      return;
    }
    // Slices of L = ceil(K/S) (numerics::SplitK); empty trailing slices are skipped.
    const std::size_t L = (s.k + S - 1) / S;
    const std::size_t mn = s.m * s.n;
    std::vector<float> part(mn);
    chain_gemm(ChainAcc::fp32, x, w, s.m, s.n, s.k, 0, std::min(L, s.k), y);
    if (combine == SplitKCombine::slices_rounded_to_output) round_all(out, y);
    for (std::size_t lo = L; lo < s.k; lo += L) {
      chain_gemm(ChainAcc::fp32, x, w, s.m, s.n, s.k, lo, std::min(lo + L, s.k), part);
      if (combine == SplitKCombine::accumulator) {
        for (std::size_t i = 0; i < mn; ++i) y[i] = y[i] + part[i];
      } else {
        for (std::size_t i = 0; i < mn; ++i) y[i] = add_format(out, y[i], round_float(out, part[i]));
      }
    }
    if (combine == SplitKCombine::accumulator) round_all(out, y);
  };
  return k;
}

// ---- G3 / G4 --------------------------------------------------------------------------------------

ThreadStrided gemv_order(std::size_t k, bool half2) {
  ThreadStrided o;
  o.threads = mmvf_threads(k);
  o.vec = 2;
  o.split_lanes = half2;
  o.interleave = 1;
  if (half2) o.combine = Format::fp32;
  o.tree = ThreadTree::warp_first;
  return o;
}

// G3 with fp32 partial sums; `in` = fp16 (the llama.cpp / cuBLAS fp16 GEMV), bf16, or fp32 (the same thread order in
// fp32, for the fp32 profiles: M = 1 and M > 1 still take different orders, as cuBLAS's GEMV and GEMM do).
GemmKernel g3_acc32(const std::string& name, Format in) {
  const Format out = in;
  GemmKernel k;
  k.info = info_of(name, in, Format::fp32, out, Format::fp32, false,
                   "G3: GEMV for M = 1 (cuBLAS(Lt) GEMV / llama.cpp mul_mat_vec_f with GGML_PREC_F32: T threads "
                   "stride K by pairs, fp32 sums, warp butterflies); M > 1: the G1 tiled kernel");
  k.supports = always;
  k.path = [in, out](const GemmShape& s) {
    const AccumSpec spec = spec_of(in, Format::fp32, out);
    if (s.m != 1) return GemmPath{"tiled_bk64", spec, Sequential{}};
    const ThreadStrided o = gemv_order(s.k, false);
    return GemmPath{"gemv_" + order_name(o), spec, o};
  };
  k.run = [name, out](const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    check_spans(name.c_str(), s, x, w, y);
    if (s.m == 1)
      gemv_thread_strided(false, mmvf_threads(s.k), x, w, s.n, s.k, y);
    else
      chain_gemm(ChainAcc::fp32, x, w, s.m, s.n, s.k, 0, s.k, y);
    round_all(out, y);
  };
  return k;
}

GemmKernel g3g4_acc16() {
  GemmKernel k;
  k.info = info_of("cpu.gemm.g3g4.f16.acc16", Format::fp16, Format::fp16, Format::fp16, Format::fp16, false,
                   "llama.cpp CUDA with GGML_PREC_DEFAULT: M = 1 -> G3 mul_mat_vec_f with half2 fp16 accumulators "
                   "summed in fp32 (output rounded to fp16 here); M > 1 -> G4 cuBLAS GemmEx with "
                   "CUBLAS_COMPUTE_16F (fp16 FMA accumulation, fp16 output)");
  k.supports = always;
  k.path = [](const GemmShape& s) {
    const AccumSpec spec = spec_of(Format::fp16, Format::fp16, Format::fp16);
    if (s.m != 1) return GemmPath{"cublas_compute16f", spec, Sequential{}};
    const ThreadStrided o = gemv_order(s.k, true);
    return GemmPath{"gemv_" + order_name(o), spec, o};
  };
  k.run = [](const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    check_spans("cpu.gemm.g3g4.f16.acc16", s, x, w, y);
    if (s.m == 1) {
      gemv_thread_strided(true, mmvf_threads(s.k), x, w, s.n, s.k, y);
      round_all(Format::fp16, y);
    } else {
      chain_gemm(ChainAcc::fp16, x, w, s.m, s.n, s.k, 0, s.k, y);  // already fp16 values
    }
  };
  return k;
}

}  // namespace

void register_gemm_kernels(Registry& r) {
  r.add(g1("f16", Format::fp16));
  r.add(g1("bf16", Format::bf16));
  r.add(g1("f32", Format::fp32));
  r.add(g1tc());
  r.add(g2("cpu.gemm.g2.f16.acc32", Format::fp16, Format::fp16, SplitKCombine::accumulator));
  r.add(g2("cpu.gemm.g2.f16.out16", Format::fp16, Format::fp16, SplitKCombine::slices_rounded_to_output));
  r.add(g2("cpu.gemm.g2.f32", Format::fp32, Format::fp32, SplitKCombine::accumulator));
  r.add(g3_acc32("cpu.gemm.g3.f16.acc32", Format::fp16));
  r.add(g3_acc32("cpu.gemm.g3.bf16.acc32", Format::bf16));
  r.add(g3_acc32("cpu.gemm.g3.f32", Format::fp32));
  r.add(g3g4_acc16());
}

}  // namespace kvconf::kernels::cpu
