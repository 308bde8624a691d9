// The base GEMM of the mutant catalogue: y = x·Wᵀ with one fp32 FMA chain per output element in ascending
// k and one rounding to fp16 (numerics::dot with Sequential, fp16.fp32.fp16, bit for bit), plus at most
// one planted bug (GemmBug).
#include "base_gemm.hpp"

#include <algorithm>
#include <cmath>

#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::kernels::mutants {
namespace {

constexpr std::size_t kSplits = 4;  // slices of the split-K mutant's M = 1 path

// One fp32 (or, for the fp16-accumulation mutant, fp16) FMA chain over [lo, hi); 0 for an empty range.
float chain(const GemmDesign& d, const float* x, const float* w, std::size_t lo, std::size_t hi) {
  if (lo >= hi) return 0.0f;
  if (d.bug == GemmBug::fp16_accumulation) {
    float acc = round_fp16(x[lo] * w[lo]);
    for (std::size_t i = lo + 1; i < hi; ++i) acc = fma_format(Format::fp16, x[i], w[i], acc);
    return acc;
  }
  float acc = x[lo] * w[lo];  // exact: fp16 × fp16 fits in fp32
  for (std::size_t i = lo + 1; i < hi; ++i) acc = std::fmaf(x[i], w[i], acc);
  return acc;
}

float element(const GemmDesign& d, const GemmShape& s, const float* x, const float* w) {
  const bool m1 = s.m == 1;
  if (m1 && d.bug == GemmBug::m1_drops_last_k) return round_fp16(chain(d, x, w, 0, s.k - 1));
  if (m1 && d.bug == GemmBug::m1_splitk_invariant) {  // SplitK{4, slices_rounded_to_output}: fp16 partials
    const std::size_t len = (s.k + kSplits - 1) / kSplits;
    float acc = 0.0f;
    bool first = true;
    for (std::size_t lo = 0; lo < s.k; lo += len) {
      const float part = round_fp16(chain(d, x, w, lo, std::min(lo + len, s.k)));
      acc = first ? part : add_format(Format::fp16, acc, part);
      first = false;
    }
    return acc;
  }
  return round_fp16(chain(d, x, w, 0, s.k));
}

GemmPath path(const GemmDesign& d, const GemmShape& s) {
  GemmPath p;
  // What the kernel reports: the fp16-accumulation mutant keeps claiming fp32 (that is its bug).
  p.spec = AccumSpec{Format::fp16, Format::fp32, Format::fp16, true, {}};
  if (s.m == 1 && d.bug == GemmBug::m1_splitk_invariant) {
    p.name = "gemv_splitk4_out";
    p.order = SplitK{kSplits, SplitKCombine::slices_rounded_to_output};
  } else {
    p.name = "seq";
    p.order = Sequential{};
  }
  return p;
}

}  // namespace

GemmKernel make_gemm_kernel(const GemmDesign& design) {
  GemmKernel k;
  k.info.name = design.name;
  k.info.backend = "mutant";
  k.info.in = Format::fp16;
  k.info.acc = Format::fp32;
  k.info.out = Format::fp16;
  // Honest about its partials: the split-K mutant's M = 1 path rounds slice sums to fp16.
  k.info.partial = design.bug == GemmBug::m1_splitk_invariant ? Format::fp16 : Format::fp32;
  k.info.cache_invariant = design.claims_cache_invariant;
  k.info.deterministic = true;
  k.info.mirrors = design.mirrors;
  k.supports = [](const GemmShape& s) -> Reason {
    if (s.k == 0) return "empty reduction (k = 0)";
    return std::nullopt;
  };
  k.path = [design](const GemmShape& s) { return path(design, s); };
  k.run = [design](const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    for (std::size_t r = 0; r < s.m; ++r)
      for (std::size_t o = 0; o < s.n; ++o)
        y[r * s.n + o] = element(design, s, x.data() + r * s.k, w.data() + o * s.k);  // x: (m, k), w: (n, k)
  };
  return k;
}

}  // namespace kvconf::kernels::mutants
