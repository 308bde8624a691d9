// AccumulationConformance (the seed paper's Experiment 1): relative fp16 accumulation error of dot products
// against the exact value, vs the reduction length, for zero-mean and same-sign data and for fp32 and fp16
// accumulators, asserted against the bands derived in docs/TOLERANCES.md "Accumulation (Experiment 1)":
//   AccumulationConformance.Fp32AccFlatInLength/<case>      fp32 accumulator, fp16 output: the mean relative error
//                                                          is the fp16 output rounding, u/(4 ln 2), flat in n
//   AccumulationConformance.Fp16AccGrowsAsSqrtN/<case>      fp16 accumulator: normwise error matches the rounding
//                                                          model and grows like √n (Higham–Mary)
//   AccumulationConformance.SameSignGrowsFaster/<case>      relative to Σ|x_i y_i|: same-sign data grows, zero-mean
//                                                          data does not
//   AccumulationConformance.DependsOnHeadDimOnly/<case>     the paper's protocol: all q_i·k_j of n-token sequences,
//                                                          dot length = head dim; flat in n, set by d
// The heavy lengths (n >= 256 for fp32, >= 1024 for fp16) run under claim names containing "Slow".
// Every measured point is printed and recorded as a test property (n<n>.<quantity>).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "accumulation_partials.hpp"
#include "accumulation_stats.hpp"
#include "kvconf/conformance/cases.hpp"
#include "kvconf/numerics/number_text.hpp"
#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::conformance::accumulation {
namespace {

enum class Kind { zero_mean, same_sign };
const char* kind_name(Kind k) { return k == Kind::zero_mean ? "zero_mean" : "same_sign"; }

struct NamedOrder {
  std::string name;
  Order order;
  Shape shape = Shape::chain;  // layout of its roundings (accumulation_partials.hpp)
  std::size_t block = 0;       // Shape::blocked: terms per block, or
  std::size_t splits = 0;      //                 split-K: ceil(n / splits) terms per block
  std::size_t block_for(std::size_t n) const { return splits ? (n + splits - 1) / splits : block; }
};

// The orders of the CPU GEMM/attention emulations (notes/kernels.md §7): sequential FMA chains (G1, attention QK),
// pairwise, 64-term blocks (G1's BK = 64), split-K(4) in fp32 (G2a), a 32-thread GEMV with half2 loads (G3), and
// the H100 tensor-core block FMA.
std::vector<NamedOrder> fp32_orders() {
  ThreadStrided ts;
  ts.threads = 32;
  ts.vec = 2;
  return {{"seq", Sequential{}, Shape::chain},
          {"pairwise", Pairwise{}, Shape::pairwise},
          {"blocked64", Blocked{64, false}, Shape::blocked, 64},
          {"splitk4_acc", SplitK{4}, Shape::blocked, 0, 4},
          {"ts32v2", ts, Shape::generic},
          {"tc16n2", TensorCore{}, Shape::truncating}};
}

AccumSpec spec(Format acc, Format out) {
  AccumSpec s;
  s.in = Format::fp16;
  s.acc = acc;
  s.out = out;
  s.fma = true;
  return s;
}

// One dot product: fp16 inputs x (n), y (n) and the oracle's view of its exact value s.
struct Dot {
  std::vector<double> x, y;  // (n)
  double exact = 0.0;        // s, nearest double
  double exact16 = 0.0;      // fl16(s), correctly rounded
  double abs_sum = 0.0;      // Σ|x_i y_i|, rounded up
};

// Inputs of one sample. x_i = fl16(c·z_i), y_i = fl16(z'_i) with one scale c = 2^U, U ~ U[0, 1), per dot product
// when `log_uniform_scale` (it makes the mantissa of s log-uniform); z ~ N(0, 1) (zero_mean) or U(0.5, 1.5)
// (same_sign).
void draw(Dot& d, std::size_t n, Kind kind, bool log_uniform_scale, std::mt19937_64& g) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  const double c = log_uniform_scale ? std::exp2(ud(g)) : 1.0;
  auto value = [&] { return kind == Kind::zero_mean ? nd(g) : 0.5 + ud(g); };
  d.x.resize(n);
  d.y.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    d.x[i] = round_to(Format::fp16, c * value());
    d.y[i] = round_to(Format::fp16, value());
  }
}

void settle(Dot& d) {
  ref::OracleOptions opt;
  opt.out = Format::fp16;
  const ref::DotResult r = ref::dot(d.x, d.y, Format::fp16, opt);
  d.exact = r.approx;
  d.exact16 = r.value;
  d.abs_sum = r.abs_sum;
}

std::mt19937_64 rng(const std::string& claim, const std::string& case_id, std::size_t n) {
  return std::mt19937_64(seed_for("accumulation/" + claim, case_id + "_n" + std::to_string(n)));
}

void record(std::size_t n, const std::string& what, double v) {
  ::testing::Test::RecordProperty("n" + std::to_string(n) + "." + what, num_measured(v));
}

// ---------------------------------------------------------------------------------------------------------------
// fp32 accumulation, fp16 output: the relative error is the output rounding.

// Per-length accumulators of one (order, data kind).
struct Fp32Point {
  std::vector<double> r;           // |ŷ − s| / |s| of the included samples
  std::vector<double> r_minus_pi;  // r − ulp(s)/(4|s|)
  double pi = 0.0, r_sum_abs = 0.0, mantissa = 0.0, accumulation = 0.0, r_star = 0.0;
  std::size_t drawn = 0, excluded = 0, beyond_one_ulp = 0, bound_violations = 0;
};

// λ of the Azuma–Hoeffding selection: every sample of a length fails it with probability <= kAlpha / kFp32Samples.
constexpr std::size_t kFp32Samples = 1u << 15;  // dot products per length
double selection_lambda() { return std::sqrt(2.0 * std::log(2.0 * static_cast<double>(kFp32Samples) / kAlpha)); }

// One sample: included when its accumulation error is, with the model's confidence (or surely, for truncating
// orders), at most u·|s|/2 <= half an fp16 spacing at s (the exact value is not cancelled into the accumulation
// noise). For included samples E[r − r*] <= E[e²]/(ulp·|s|) (docs/TOLERANCES.md, term A).
void add_fp32_sample(Fp32Point& p, const Dot& d, const NamedOrder& o, double y_hat, double ya_hat) {
  ++p.drawn;
  const double s = d.exact, as = std::fabs(s);
  const std::size_t n = d.x.size();
  AccumSpec s32;
  s32.in = Format::fp16;
  s32.acc = Format::fp32;
  s32.out = Format::fp32;
  const double B = ref::dot_error_bound(s32, o.order, n, d.abs_sum);
  if (std::fabs(ya_hat - s) > B) ++p.bound_violations;  // the fp32 result itself obeys its a-priori bound
  double e2;                                            // E[e²] (or the sure bound B² for truncating orders)
  double reach;                                         // the error that must stay below u·|s|/2
  if (o.shape == Shape::truncating) {
    e2 = B * B;
    reach = B;
  } else {
    std::vector<double> t(n);  // (n) exact products
    for (std::size_t i = 0; i < n; ++i) t[i] = d.x[i] * d.y[i];
    const double growth = std::pow(1.0 + 0x1p-24, 2.0 * static_cast<double>(n));
    e2 = 0x1p-48 * growth * rounded_partials_sq(o.shape, o.block_for(n), t, d.abs_sum, B);
    reach = selection_lambda() * std::sqrt(e2);
  }
  if (as < 0x1p-14 || reach > kU16 * as / 2) {
    ++p.excluded;
    return;
  }
  const double ulp = ulp16(s);
  if (std::fabs(y_hat - s) > ulp) ++p.beyond_one_ulp;
  const double r = std::fabs(y_hat - s) / as;
  const double pi = ulp / (4.0 * as);
  p.r.push_back(r);
  p.r_minus_pi.push_back(r - pi);
  p.pi += pi;
  p.r_sum_abs += std::fabs(y_hat - s) / d.abs_sum;
  p.r_star += std::fabs(d.exact16 - s) / as;
  // Mantissa term: the input rounding of c·z_i moves log2|s| by at most 1.5·u·κ (κ = Σ|x y|/|s|, u·κ <= 0.03),
  // which moves E_U[ulp/(4|s|)] by at most (0.347 + 0.25)·u·(1.5·u·κ); never more than u/4.
  const double uk = kU16 * d.abs_sum / as;
  p.mantissa += uk <= 0.03 ? std::min(0.6 * kU16 * 1.5 * uk, kU16 / 4) : kU16 / 4;
  p.accumulation += e2 / (ulp * as);
}

struct Fp32Case {
  NamedOrder order;
  Kind kind;
  std::string id() const { return "f16_acc32_o16_" + order.name + "_" + kind_name(kind); }
};

void run_fp32_flat(const Fp32Case& c, const std::vector<std::size_t>& lengths, const std::string& claim) {
  const double mu0 = benford_mean_rel_error();
  const AccumSpec sp = spec(Format::fp32, Format::fp16);
  std::printf(
      "[ accum    ] %s: fp16 inputs, fp32 accumulator (%s), fp16 output, %s data, %zu dots per n; "
      "predicted mean relative error u/(4 ln 2) = %.6g\n",
      c.id().c_str(), c.order.name.c_str(), kind_name(c.kind), static_cast<std::size_t>(kFp32Samples), mu0);
  std::printf("[ accum    ] %6s %12s %12s %12s %12s %12s %12s %9s\n", "n", "mean_rel", "band", "mean_rel_sum",
              "pred_cond", "mantissa", "accum", "excluded");
  double hi = 0.0, lo = HUGE_VAL, ratio_allowed_hi = 0.0, ratio_allowed_lo = HUGE_VAL;
  for (std::size_t n : lengths) {
    auto g = rng(claim, c.id(), n);
    Fp32Point p;
    Dot d;
    for (std::size_t i = 0; i < kFp32Samples; ++i) {
      draw(d, n, c.kind, /*log_uniform_scale=*/true, g);
      settle(d);
      add_fp32_sample(p, d, c.order, dot(sp, c.order.order, d.x, d.y),
                      dot(spec(Format::fp32, Format::fp32), c.order.order, d.x, d.y));
    }
    const double N = static_cast<double>(p.r.size());
    const MeanBand r = mean_band(p.r, 2.0 * kU16);            // r ∈ [0, 2u] when within one spacing
    const MeanBand rp = mean_band(p.r_minus_pi, 2.5 * kU16);  // r − π ∈ [−u/2, 2u]
    const double pi = p.pi / N, mant = p.mantissa / N, accum = p.accumulation / N;
    const double band_abs = r.half_width + mant + accum;  // |r̄ − μ0|
    const double band_cond = rp.half_width + accum;       // |r̄ − π̄|
    std::printf("[ accum    ] %6zu %12.6g %12.4g %12.6g %12.6g %12.4g %12.4g %9.4f\n", n, r.mean, band_abs,
                p.r_sum_abs / N, pi, mant, accum, static_cast<double>(p.excluded) / static_cast<double>(p.drawn));
    record(n, "mean_rel_error", r.mean);
    record(n, "mean_rel_error_sum_abs", p.r_sum_abs / N);
    record(n, "mean_rel_error_output_rounding_only", p.r_star / N);
    record(n, "predicted_benford", mu0);
    record(n, "predicted_conditional", pi);
    record(n, "band", band_abs);
    record(n, "excluded_fraction", static_cast<double>(p.excluded) / static_cast<double>(p.drawn));
    EXPECT_EQ(p.bound_violations, 0u) << "n=" << n << ": fp32 accumulation error above its a-priori bound";
    EXPECT_EQ(p.beyond_one_ulp, 0u) << "n=" << n << ": fp32 accumulation moved the result beyond one fp16 spacing";
    EXPECT_LE(p.excluded, p.drawn / 4) << "n=" << n << ": the claim covers too few dot products";
    EXPECT_LE(std::fabs(r.mean - pi), band_cond) << "n=" << n << ": mean relative error " << r.mean
                                                 << " is not the output rounding's " << pi << " ± " << band_cond;
    EXPECT_LE(std::fabs(r.mean - mu0), band_abs)
        << "n=" << n << ": mean relative error " << r.mean << " outside u/(4 ln 2) = " << mu0 << " ± " << band_abs;
    hi = std::max(hi, r.mean);
    lo = std::min(lo, r.mean);
    ratio_allowed_hi = std::max(ratio_allowed_hi, mu0 + band_abs);
    ratio_allowed_lo = std::min(ratio_allowed_lo, mu0 - band_abs);
  }
  const double allowed = ratio_allowed_hi / ratio_allowed_lo;
  std::printf("[ accum    ] max/min over n = %.5f (allowed %.5f)\n", hi / lo, allowed);
  ::testing::Test::RecordProperty("max_over_min", std::to_string(hi / lo));
  ::testing::Test::RecordProperty("max_over_min_allowed", std::to_string(allowed));
  EXPECT_LE(hi / lo, allowed) << "mean relative error not flat in the reduction length";
}

// ---------------------------------------------------------------------------------------------------------------
// fp16 accumulation (one fp16 FMA chain): the error is Σ_k ε_k, ε_k the rounding error of step k.

struct Fp16Point {
  double err2 = 0.0;                // Σ_i (ŷ_i − s_i)²
  double v = 0.0;                   // Σ_i V_i, V_i = Σ_k ulp(S_k)²/12 (model variance)
  double v2 = 0.0;                  // Σ_i V_i²
  double p_lo = 0.0;                // Σ_i u²/12 · Σ_k S_k²  (lower model variance)
  double p_hi = 0.0;                // Σ_i (u²/3 · Σ_k S_k² + subnormal spacing²/12 per subnormal partial)
  double s2 = 0.0;                  // Σ_i s_i²
  double a2 = 0.0;                  // Σ_i (Σ|x y|)²
  double rel = 0.0, rel_sum = 0.0;  // Σ |err|/|s|, Σ |err|/Σ|x y| (the paper's means)
  std::size_t count = 0, zero = 0;
  double max_partial = 0.0;
};

void add_fp16_sample(Fp16Point& p, const Dot& d, double y_hat) {
  double S = 0.0, V = 0.0, P = 0.0, sub = 0.0;
  for (std::size_t k = 0; k < d.x.size(); ++k) {
    S += d.x[k] * d.y[k];  // exact partial sum to double precision (only its binade matters)
    p.max_partial = std::max(p.max_partial, std::fabs(S));
    if (S == 0.0) continue;
    const double ulp = ulp16(S);
    V += ulp * ulp / 12.0;
    P += S * S;
    if (std::fabs(S) < 0x1p-14) sub += ulp * ulp / 12.0;
  }
  const double e = y_hat - d.exact;
  p.err2 += e * e;
  p.v += V;
  p.v2 += V * V;
  p.p_lo += kU16 * kU16 / 12.0 * P;
  p.p_hi += kU16 * kU16 / 3.0 * P + sub;
  p.s2 += d.exact * d.exact;
  p.a2 += d.abs_sum * d.abs_sum;
  if (d.exact != 0.0)
    p.rel += std::fabs(e) / std::fabs(d.exact);
  else
    ++p.zero;
  p.rel_sum += std::fabs(e) / d.abs_sum;
  ++p.count;
}

// The measured point and its model band.
struct Fp16Summary {
  std::size_t n = 0;
  double R = 0.0, R_lo = 0.0, R_hi = 0.0;  // √(Σerr²/Σs²) and its distribution-free model band
  double Q = 0.0, Q_lo = 0.0, Q_hi = 0.0;  // √(Σerr²/Σ(Σ|xy|)²) and its band
  double ratio = 0.0, beta = 0.0;          // Σerr²/ΣV and its band half-width
  bool model_applies = true;
  double mean_rel = 0.0, mean_rel_sum = 0.0;
};

// Same-sign partial sums beyond 512 have fp16 spacing >= 0.5, too coarse against the spread of the products for the
// rounding errors to be uniform and mean-zero (stagnation bias): the model is only asserted below.
constexpr double kModelMaxPartial = 512.0;

Fp16Summary summarize(const Fp16Point& p, std::size_t n) {
  const double z = normal_quantile_two_sided();
  Fp16Summary s;
  s.n = n;
  s.beta = z * std::sqrt(2.0 * p.v2) / p.v;  // Var(err²) <= 2V² for a sum of independent uniform errors
  s.ratio = p.err2 / p.v;
  s.R = std::sqrt(p.err2 / p.s2);
  s.R_lo = std::sqrt(p.p_lo * std::max(0.0, 1.0 - s.beta) / p.s2);
  s.R_hi = std::sqrt(p.p_hi * (1.0 + s.beta) / p.s2);
  s.Q = std::sqrt(p.err2 / p.a2);
  s.Q_lo = std::sqrt(p.p_lo * std::max(0.0, 1.0 - s.beta) / p.a2);
  s.Q_hi = std::sqrt(p.p_hi * (1.0 + s.beta) / p.a2);
  s.model_applies = p.max_partial < kModelMaxPartial;
  s.mean_rel = p.rel / static_cast<double>(p.count - p.zero);
  s.mean_rel_sum = p.rel_sum / static_cast<double>(p.count);
  return s;
}

void print_fp16_header() {
  std::printf("[ accum    ] %6s %11s %11s %11s %11s %11s %11s %9s %9s\n", "n", "R=|err|/|s|", "R_model_lo",
              "R_model_hi", "Q=/Σ|xy|", "mean_rel", "mean_rel_Σ", "err²/V", "band");
}

void report_fp16(const Fp16Summary& s, bool assert_model) {
  std::printf("[ accum    ] %6zu %11.4g %11.4g %11.4g %11.4g %11.4g %11.4g %9.4f %9.4f%s\n", s.n, s.R, s.R_lo, s.R_hi,
              s.Q, s.mean_rel, s.mean_rel_sum, s.ratio, s.beta, s.model_applies ? "" : "  (model not asserted)");
  record(s.n, "normwise_rel_error", s.R);
  record(s.n, "normwise_rel_error_sum_abs", s.Q);
  record(s.n, "mean_rel_error", s.mean_rel);
  record(s.n, "mean_rel_error_sum_abs", s.mean_rel_sum);
  record(s.n, "err2_over_model_variance", s.ratio);
  record(s.n, "model_band", s.beta);
  if (!assert_model || !s.model_applies) return;
  EXPECT_LE(std::fabs(s.ratio - 1.0), s.beta)
      << "n=" << s.n << ": Σerr²/ΣV = " << s.ratio << ", the rounding model predicts 1 ± " << s.beta;
  EXPECT_GE(s.R, s.R_lo) << "n=" << s.n;
  EXPECT_LE(s.R, s.R_hi) << "n=" << s.n;
}

constexpr std::size_t kFp16Samples = 1u << 12;  // dot products per length

Fp16Point measure_fp16(Kind kind, std::size_t n, const std::string& claim, const std::string& id) {
  const AccumSpec sp = spec(Format::fp16, Format::fp16);
  auto g = rng(claim, id, n);
  Fp16Point p;
  Dot d;
  for (std::size_t i = 0; i < kFp16Samples; ++i) {
    draw(d, n, kind, /*log_uniform_scale=*/true, g);
    settle(d);
    add_fp16_sample(p, d, dot(sp, Sequential{}, d.x, d.y));
  }
  return p;
}

void run_fp16_growth(Kind kind, const std::vector<std::size_t>& lengths, const std::string& claim) {
  const std::string id = std::string("f16_acc16_o16_seq_") + kind_name(kind);
  std::printf("[ accum    ] %s: fp16 FMA chain, %s data, %zu dots per n\n", id.c_str(), kind_name(kind),
              static_cast<std::size_t>(kFp16Samples));
  print_fp16_header();
  std::vector<Fp16Summary> pts;
  for (std::size_t n : lengths) {
    pts.push_back(summarize(measure_fp16(kind, n, claim, id), n));
    report_fp16(pts.back(), true);
  }
  // Growth between the shortest and the longest length where the model applies: at least the ratio of the
  // distribution-free bands (≈ ½·√(n_max/n_min) for zero-mean data).
  const Fp16Summary* first = nullptr;
  const Fp16Summary* last = nullptr;
  for (const auto& s : pts)
    if (s.model_applies) {
      if (!first) first = &s;
      last = &s;
    }
  ASSERT_NE(first, nullptr) << "the rounding model applies at no length";
  if (first == last) return;
  const double growth = last->R / first->R, allowed = last->R_lo / first->R_hi;
  std::printf("[ accum    ] growth R(%zu)/R(%zu) = %.4g, derived lower band %.4g (sqrt of the length ratio: %.4g)\n",
              last->n, first->n, growth, allowed, std::sqrt(static_cast<double>(last->n) / first->n));
  ::testing::Test::RecordProperty("growth", std::to_string(growth));
  ::testing::Test::RecordProperty("growth_lower_band", std::to_string(allowed));
  EXPECT_GE(growth, allowed) << "fp16 accumulation error does not grow like √n";
}

void run_same_sign_faster(const std::vector<std::size_t>& lengths, const std::string& claim) {
  const std::string id = "f16_acc16_o16_seq";
  std::printf("[ accum    ] %s: Q = normwise error / Σ|x y| for same-sign vs zero-mean data\n", id.c_str());
  std::printf("[ accum    ] %6s %12s %12s %12s %12s\n", "n", "Q_same_sign", "Q_zero_mean", "ratio", "lower_band");
  bool demonstrated = false;
  for (std::size_t n : lengths) {
    const Fp16Summary z = summarize(measure_fp16(Kind::zero_mean, n, claim, id + "_zero_mean"), n);
    const Fp16Summary s = summarize(measure_fp16(Kind::same_sign, n, claim, id + "_same_sign"), n);
    const double ratio = s.Q / z.Q, band = s.Q_lo / z.Q_hi;
    std::printf("[ accum    ] %6zu %12.4g %12.4g %12.4g %12.4g%s\n", n, s.Q, z.Q, ratio, band,
                s.model_applies ? "" : "  (model not asserted)");
    record(n, "Q_same_sign", s.Q);
    record(n, "Q_zero_mean", z.Q);
    record(n, "ratio_lower_band", band);
    if (!s.model_applies || !z.model_applies) continue;
    EXPECT_GE(ratio, band) << "n=" << n;
    if (band > 1.0) demonstrated = true;
  }
  EXPECT_TRUE(demonstrated) << "no length where the derived band shows same-sign error above zero-mean error";
}

// The paper's protocol: for a sequence of n tokens, q and k (n, d) ~ N(0, 1) in fp16, every score q_i·k_j (dot length
// d); sequences are drawn until kHeadDimSamples dot products are collected.
constexpr std::size_t kHeadDimSamples = 1u << 14;

void run_head_dim(std::size_t d, Format acc, const std::string& claim) {
  const bool acc16 = acc == Format::fp16;
  const std::string id = std::string(acc16 ? "f16_acc16_o16_seq_d" : "f16_acc32_o16_seq_d") + std::to_string(d);
  const AccumSpec sp = spec(acc, Format::fp16);
  const NamedOrder seq{"seq", Sequential{}, Shape::chain};
  std::printf("[ accum    ] %s: all q_i·k_j of n-token sequences, head dim %zu, %zu dots per n\n", id.c_str(), d,
              static_cast<std::size_t>(kHeadDimSamples));
  if (acc16)
    print_fp16_header();
  else
    std::printf("[ accum    ] %6s %12s %12s %12s %12s\n", "n", "mean_rel", "pred_cond", "band", "mean_rel_sum");
  struct Point {
    double measured, lo, hi;
  };
  std::vector<Point> curve;  // per n: measured value and the model's interval
  for (std::size_t n : {16u, 32u, 64u, 128u}) {
    auto g = rng(claim, id, n);
    std::normal_distribution<double> nd(0.0, 1.0);
    Fp16Point p16;
    Fp32Point p32;
    std::vector<double> q(n * d), k(n * d);  // (n, d) each
    Dot dt;
    std::size_t collected = 0;
    while (collected < kHeadDimSamples) {
      for (auto& v : q) v = round_to(Format::fp16, nd(g));
      for (auto& v : k) v = round_to(Format::fp16, nd(g));
      for (std::size_t i = 0; i < n && collected < kHeadDimSamples; ++i)
        for (std::size_t j = 0; j < n && collected < kHeadDimSamples; ++j, ++collected) {
          dt.x.assign(q.begin() + static_cast<std::ptrdiff_t>(i * d),
                      q.begin() + static_cast<std::ptrdiff_t>((i + 1) * d));
          dt.y.assign(k.begin() + static_cast<std::ptrdiff_t>(j * d),
                      k.begin() + static_cast<std::ptrdiff_t>((j + 1) * d));
          settle(dt);
          const double y_hat = dot(sp, Sequential{}, dt.x, dt.y);
          if (acc16)
            add_fp16_sample(p16, dt, y_hat);
          else
            add_fp32_sample(p32, dt, seq, y_hat, dot(spec(Format::fp32, Format::fp32), Sequential{}, dt.x, dt.y));
        }
    }
    if (acc16) {
      const Fp16Summary sm = summarize(p16, n);
      report_fp16(sm, true);
      const double pred = sm.R / std::sqrt(sm.ratio);  // √(ΣV/Σs²): the model's normwise error for these data
      curve.push_back({sm.R, pred * std::sqrt(1.0 - sm.beta), pred * std::sqrt(1.0 + sm.beta)});
      continue;
    }
    const double N = static_cast<double>(p32.r.size());
    const MeanBand r = mean_band(p32.r, 2.0 * kU16);
    const MeanBand rp = mean_band(p32.r_minus_pi, 2.5 * kU16);
    const double pi = p32.pi / N, band = rp.half_width + p32.accumulation / N;
    std::printf("[ accum    ] %6zu %12.6g %12.6g %12.4g %12.6g\n", n, r.mean, pi, band, p32.r_sum_abs / N);
    record(n, "mean_rel_error", r.mean);
    record(n, "predicted_conditional", pi);
    record(n, "band", band);
    record(n, "mean_rel_error_sum_abs", p32.r_sum_abs / N);
    record(n, "excluded_fraction", static_cast<double>(p32.excluded) / static_cast<double>(p32.drawn));
    EXPECT_EQ(p32.bound_violations, 0u) << "n=" << n;
    EXPECT_EQ(p32.beyond_one_ulp, 0u) << "n=" << n;
    EXPECT_LE(p32.excluded, p32.drawn / 4) << "n=" << n;
    EXPECT_LE(std::fabs(r.mean - pi), band) << "n=" << n << ": not the output rounding";
    curve.push_back({r.mean, pi - band, pi + band});
  }
  // Flat in the sequence length: the spread of the measured curve over n is at most what the per-length model
  // predictions and their bands allow (the data at every n come from the same distribution).
  double hi = 0.0, lo = HUGE_VAL, allowed_hi = 0.0, allowed_lo = HUGE_VAL;
  for (const Point& p : curve) {
    hi = std::max(hi, p.measured);
    lo = std::min(lo, p.measured);
    allowed_hi = std::max(allowed_hi, p.hi);
    allowed_lo = std::min(allowed_lo, p.lo);
  }
  std::printf("[ accum    ] max/min over n = %.5f (allowed %.5f)\n", hi / lo, allowed_hi / allowed_lo);
  ::testing::Test::RecordProperty("max_over_min", std::to_string(hi / lo));
  ::testing::Test::RecordProperty("max_over_min_allowed", std::to_string(allowed_hi / allowed_lo));
  EXPECT_LE(hi / lo, allowed_hi / allowed_lo) << "not flat in the sequence length";
}

// ---------------------------------------------------------------------------------------------------------------
// Registration: AccumulationConformance.<Claim>/<case_id>.

class Claim : public ::testing::Test {
 public:
  explicit Claim(std::function<void()> body) : body_(std::move(body)) {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

void add(const std::string& claim, const std::string& id, std::function<void()> body) {
  const std::string name = claim + "/" + id;
  ::testing::RegisterTest("AccumulationConformance", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [body]() -> ::testing::Test* { return new Claim(body); });
}

const std::vector<std::size_t> kShort = {16, 32, 64, 128};
const std::vector<std::size_t> kLong = {256, 512, 1024, 2048, 4096};
const std::vector<std::size_t> kFp16Fast = {16, 32, 64, 128, 256, 512};
const std::vector<std::size_t> kFp16Slow = {16, 64, 256, 1024, 2048, 4096};

const bool registered = [] {
  for (const NamedOrder& o : fp32_orders())
    for (Kind kind : {Kind::zero_mean, Kind::same_sign}) {
      const Fp32Case c{o, kind};
      add("Fp32AccFlatInLength", c.id(), [c] { run_fp32_flat(c, kShort, "Fp32AccFlatInLength"); });
      if (o.shape != Shape::generic && o.shape != Shape::truncating)  // their bounds exclude most long dots
        add("SlowFp32AccFlatToLength4096", c.id(), [c] { run_fp32_flat(c, kLong, "SlowFp32AccFlatToLength4096"); });
    }
  for (Kind kind : {Kind::zero_mean, Kind::same_sign}) {
    const std::string id = std::string("f16_acc16_o16_seq_") + kind_name(kind);
    add("Fp16AccGrowsAsSqrtN", id, [kind] { run_fp16_growth(kind, kFp16Fast, "Fp16AccGrowsAsSqrtN"); });
    add("SlowFp16AccGrowsAsSqrtN", id, [kind] { run_fp16_growth(kind, kFp16Slow, "SlowFp16AccGrowsAsSqrtN"); });
  }
  add("SameSignGrowsFaster", "f16_acc16_o16_seq", [] { run_same_sign_faster(kFp16Fast, "SameSignGrowsFaster"); });
  for (std::size_t d : {64u, 128u, 256u})
    for (Format acc : {Format::fp16, Format::fp32}) {
      const std::string id =
          std::string(acc == Format::fp16 ? "f16_acc16_o16_seq_d" : "f16_acc32_o16_seq_d") + std::to_string(d);
      add("DependsOnHeadDimOnly", id, [d, acc] { run_head_dim(d, acc, "DependsOnHeadDimOnly"); });
    }
  return true;
}();

}  // namespace
}  // namespace kvconf::conformance::accumulation
