// Private to kvconf::conformance: what every check shares — rigorous error measurement against the
// oracle's double approximation, ulp helpers and the one-rounding floor, CheckResult construction and
// headroom, sub-seeds, and the naive same-precision references of the two-sided rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kvconf/numerics/number_text.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/kernels/kernel.hpp"

namespace kvconf::conformance::detail {

// --- Measurement -------------------------------------------------------------------------------
// |a − b| rounded up to a double (exact when the subtraction is exact). NaN if either is NaN.
double diff_up(double a, double b);
// An upper bound of |computed − exact| given approx = the exact value to about one double ulp:
// diff_up(computed, approx) + one ulp of double at approx (the oracle's approximation is within half of it).
double error_up(double computed, double approx);
// Spacing of the format's values at |x| (the subnormal spacing below the smallest normal; the top binade's
// spacing above the largest finite value). f: fp16, bf16, fp32 or fp64.
double ulp(Format f, double x);
// Steps between a and b along the values of f (fp16, bf16, fp32; both values of f): 0 when equal (+0 and −0
// are 0 apart), 1 for neighbours. Max uint64 when either is NaN.
std::uint64_t ulp_distance(Format f, double a, double b);
// |a − b| in ulps of f at the larger magnitude: the step count for neighbours of one binade, and no blow-up across
// zero (where ulp_distance counts every subnormal). NaN when either is NaN.
double ulp_error(Format f, double a, double b);

// The two-sided rule's multiplier (FlashAttention's convention: 2, 3 with a softcap).
inline double two_sided_factor(double softcap) { return softcap > 0.0 ? 3.0 : 2.0; }

// --- Results -----------------------------------------------------------------------------------
// (bound − error)/bound; 1 when bound is 0 or +inf and error <= bound; −inf when error is NaN.
double headroom(double error, double bound);
// A bound of +inf checks nothing: such a result fails with "vacuous bound" in its detail.
CheckResult bound_result(std::string rule, double error, double bound, std::uint64_t seed, std::string detail);

// Error terms of one reduction: the deterministic bound, or, where it is vacuous (γ_m with m·u >= 1, e.g.
// fp16 accumulation over K = 4096) and the order allows it (round to nearest, no tensor cores), the
// Higham–Mary probabilistic bound with failure probability kProbabilisticFailure per element
// (docs/CONFORMANCE.md). Still +inf when neither applies.
inline constexpr double kProbabilisticFailure = 1e-12;
ref::ErrorTerms reduction_terms(const AccumSpec& spec, const Order& order, std::size_t n, double max_abs);
// Bitwise rules: pass iff error == 0; bound 0; headroom 1 or −inf.
CheckResult bitwise_result(std::string rule, double error, std::uint64_t seed, std::string detail);
// The kernel refused a call shape the rule needs (a failure: the suites skip unsupported cases before calling).
CheckResult unsupported_result(const std::string& rule, const std::string& reason, std::uint64_t seed);
inline std::string num(double x) { return num_measured(x); }  // a measured value in a detail

// --- Elementwise tracking of error against a per-element bound ---------------------------------
struct Worst {
  double ratio = -1.0;     // max error/bound (NaN error counts as +inf)
  double error = 0.0;      // at that element
  double bound = 0.0;      // at that element
  double max_error = 0.0;  // over all elements (NaN if any error is NaN)
  std::size_t index = 0;   // flat index of the worst element
  std::size_t failed = 0;  // elements over their bound
  std::size_t count = 0;
  void add(std::size_t i, double error, double bound);
  bool pass() const { return failed == 0 && count > 0; }
};

// --- Two runs of the same function compared element by element (cache-ON vs cache-OFF, chunked vs one shot,
// capacity A vs B): bitwise, or |a − b| <= bound_a + bound_b.
struct Comparison {
  Format out = Format::fp16;
  bool bitwise = false;
  std::size_t count = 0;
  std::size_t differ = 0;                    // elements whose bits differ (+0 vs −0 included)
  double max_ulp = 0.0;                      // max ulp_error(out, a, b)
  double max_diff = 0.0;                     // max |a − b| rounded up (NaN when some difference is NaN)
  double max_abs_b = 0.0;                    // max |b| (the scale of the reference side)
  std::size_t diff_ctx = 0, diff_index = 0;  // where max_diff (or the first NaN) was seen
  Worst worst;                               // bound mode: error/bound per element (index = position in `where`)
  std::vector<std::pair<std::size_t, std::size_t>> where;  // bound mode: (ctx, index) of each element
  double worst_a = 0.0, worst_b = 0.0;

  void add(double a, double b, std::size_t ctx, std::size_t index, double bound = 0.0);
  // error for a bitwise rule: max_diff, or the smallest positive double when only the sign of a zero differs.
  double bitwise_error() const;
  double max_rel() const;     // normwise: max_diff / max_abs_b (0 when both are 0)
  std::string stats() const;  // "differing=…/… max_ulp=… max_rel=…"
};

// --- Seeds and inputs --------------------------------------------------------------------------
// A deterministic stream for one tensor of a check ("x", "w", "q", ...): splitmix64 of seed ^ hash(tag).
std::uint64_t sub_seed(std::uint64_t seed, const char* tag);
std::vector<double> to_double(std::span<const float> x);

// --- Naive same-precision references -----------------------------------------------------------
// Σ_i x_i·w_i as one sequential chain of FMAs rounded to `acc`, then rounded to `out` (x, w values of `in`).
float naive_dot(Format acc, Format out, const float* x, const float* w, std::size_t k);

// Eager-style attention in the kernel's formats: scores q·k by sequential fp32 FMAs rounded to `qk_out`, × scale
// and the softcap rounded to `score` (the kernel pipeline's own score formats: eager kernels round QKᵀ to fp16,
// as PyTorch's low-precision reference of the FlashAttention tests does), softmax in fp32 (max, exp, sequential
// row sum, division), weights rounded to the input format when it is 16-bit, PV by sequential FMAs accumulating in
// `partial` (KernelInfo::partial: each FMA rounded to it when it is narrower than fp32, as rule 1's naive reference
// accumulates for every kind of kernel; the attention kernels with an fp16 partial, vLLM's paged decode and ggml's
// flash attention, accumulate P·V in fp16, their q·k in fp32), one final rounding to `out`.
// q: (n_q, H, d), k: (≥ n_kv, Hkv, d), v: (≥ n_kv, Hkv, d_v) → (n_q, H, d_v).
std::vector<float> naive_attention(Format in, Format qk_out, Format score, Format out, Format partial,
                                   const kernels::AttentionCall& call, std::span<const float> q,
                                   std::span<const float> k, std::span<const float> v);

// Key j visible from absolute position pos under the call's mask and window.
bool visible(const ref::AttentionParams& p, std::int64_t pos, std::int64_t j);

}  // namespace kvconf::conformance::detail
