// GEMM / projection checks: rule 1 (oracle accuracy, two-sided) for one GEMM call, and rule 2 for the K/V
// projection rows of a sequence computed cache-ON (prompt prefill + decode steps) vs cache-OFF (full recompute).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "checks_common.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::conformance {

namespace {

using detail::num;

// Inputs of a projection: x (m, k) activations, w (n, k) weights at a Linear layer's scale (1/√k), so that
// outputs stay O(1)–O(√k) and far from fp16 overflow; wide-range activations are scaled down by 4 for the same
// reason.
struct GemmInputs {
  std::vector<float> x;  // (m, k)
  std::vector<float> w;  // (n, k)
};

GemmInputs gemm_inputs(Format in, std::size_t m, std::size_t n, std::size_t k, Data data, std::uint64_t seed) {
  const double x_scale = data == Data::wide_range ? 0.25 : 1.0;
  const double w_scale = 1.0 / std::sqrt(static_cast<double>(k));
  return {make_values(m * k, in, data, detail::sub_seed(seed, "x"), x_scale),
          make_values(n * k, in, data, detail::sub_seed(seed, "w"), w_scale)};
}

double max_abs(std::span<const float> a, std::span<const float> b) {
  double m = 0.0;
  for (float v : a) m = std::max(m, static_cast<double>(std::fabs(v)));
  for (float v : b) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// Σ_i |x_ri w_oi| for every (r, o), rounded up: the products are exact in double (inputs have <= 24 bits),
// the sum of k non-negative terms in double has relative error <= (k − 1)·2^-53 < k·2^-52.
std::vector<double> abs_sums_up(const GemmInputs& in, std::size_t m, std::size_t n, std::size_t k) {
  std::vector<double> s(m * n);  // (m, n)
  const double inflate = 1.0 + static_cast<double>(k + 2) * 0x1p-52;
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t o = 0; o < n; ++o) {
      double a = 0.0;
      const float* xr = &in.x[r * k];
      const float* wr = &in.w[o * k];
      for (std::size_t i = 0; i < k; ++i) a += std::fabs(static_cast<double>(xr[i]) * static_cast<double>(wr[i]));
      s[r * n + o] = std::nextafter(a * inflate, std::numeric_limits<double>::infinity());
    }
  return s;
}

std::string where(std::size_t index, std::size_t n) {
  std::string s = "(";
  s += std::to_string(index / n);
  s += ",";
  s += std::to_string(index % n);
  s += ")";
  return s;
}

}  // namespace

CheckResults check_gemm_matches_oracle(const kernels::GemmKernel& kern, const GemmCase& c, std::uint64_t seed) {
  const auto& sh = c.shape;
  const std::string seed_note = " seed=" + std::to_string(seed) + " case=" + c.id() + " kernel=" + kern.info.name;
  if (auto why = kern.supports(sh)) return {detail::unsupported_result("oracle_bound", *why, seed)};
  const Format in = kern.info.in, out = kern.info.out;
  const GemmInputs inp = gemm_inputs(in, sh.m, sh.n, sh.k, c.data, seed);

  std::vector<float> y(sh.m * sh.n);  // (m, n)
  kern.run(sh, inp.x, inp.w, y);
  const kernels::GemmPath path = kern.path(sh);

  ref::OracleOptions opt;
  opt.out = out;
  const ref::ProjectionResult orc =
      ref::project(detail::to_double(inp.x), detail::to_double(inp.w), sh.m, sh.k, sh.n, in, opt);
  const ref::ErrorTerms terms = detail::reduction_terms(path.spec, path.order, sh.k, max_abs(inp.x, inp.w));

  detail::Worst kernel_err, naive_err;
  double max_oracle = 0.0;
  std::size_t overflow = 0;
  for (std::size_t r = 0; r < sh.m; ++r)
    for (std::size_t o = 0; o < sh.n; ++o) {
      const std::size_t i = r * sh.n + o;
      const double exact = orc.approx[i];
      if (!(std::fabs(orc.y[i]) <= info(out).max_finite)) ++overflow;
      max_oracle = std::max(max_oracle, std::fabs(exact));
      kernel_err.add(i, detail::error_up(y[i], exact), terms.at(orc.abs_sum[i]));
      const float nv = detail::naive_dot(kern.info.partial, out, &inp.x[r * sh.k], &inp.w[o * sh.k], sh.k);
      naive_err.add(i, detail::error_up(nv, exact), std::numeric_limits<double>::infinity());
    }

  CheckResults res;
  if (overflow > 0) {
    // The bounds assume no overflow: a case that overflows the output format is a case-table bug.
    res.push_back(detail::bound_result(
        "case_in_range", static_cast<double>(overflow), 0.0, seed,
        std::to_string(overflow) + " oracle outputs overflow " + std::string(name(out)) + seed_note));
  }
  const std::size_t w = kernel_err.index;
  res.push_back(detail::bound_result(
      "oracle_bound", kernel_err.error, kernel_err.bound, seed,
      "path=" + path.name + " order=" + order_name(path.order) + " worst " + where(w, sh.n) + " kernel=" + num(y[w]) +
          " oracle=" + num(orc.approx[w]) + " sum|xw|=" + num(orc.abs_sum[w]) + " elements_over_bound=" +
          std::to_string(kernel_err.failed) + " max_error=" + num(kernel_err.max_error) + seed_note));
  res.back().worst_index = w;  // the numbers of the detail, as fields
  res.back().worst_value = y[w];
  res.back().worst_expected = orc.approx[w];
  const double floor = detail::ulp(out, max_oracle);
  const double k2 = detail::two_sided_factor(0.0);
  res.push_back(detail::bound_result("two_sided", kernel_err.max_error, k2 * naive_err.max_error + floor, seed,
                                     "naive sequential " + std::string(name(kern.info.partial)) +
                                         "-accumulation error=" + num(naive_err.max_error) + " factor=" + num(k2) +
                                         " floor=ulp_" + std::string(name(out)) + "(" + num(max_oracle) +
                                         ")=" + num(floor) + seed_note));
  res.back().reference_error = naive_err.max_error;  // the bound is a factor times it plus a floor
  return res;
}

namespace {

// The K/V projection rows of one sequence, both ways.
struct ProjectionRuns {
  kernels::GemmShape off_shape, prefill_shape, decode_shape;
  GemmInputs inp;          // x: (T, k) the sequence's hidden states, w: (n, k)
  std::vector<float> off;  // (T, n) cache-OFF: one GEMM over the whole prefix (M = T)
  std::vector<float> on;   // (T, n) cache-ON: prompt prefill (M = P) wrote rows [0, P), decode steps (M = 1) the rest
  std::string paths;
};

// Fills r, or returns why the kernel cannot run one of the three shapes.
kernels::Reason run_projection(const kernels::GemmKernel& kern, const ProjectionCase& c, std::uint64_t seed,
                               ProjectionRuns& r) {
  const std::size_t T = c.total, P = c.prompt, n = c.n, k = c.k;
  if (P == 0 || P > T) return "prompt must be in [1, total]";
  r.off_shape = {T, n, k};
  r.prefill_shape = {P, n, k};
  r.decode_shape = {1, n, k};
  for (const auto* s : {&r.off_shape, &r.prefill_shape, &r.decode_shape})
    if (auto why = kern.supports(*s)) return why;
  r.inp = gemm_inputs(kern.info.in, T, n, k, c.data, seed);
  r.off.assign(T * n, 0.0f);
  kern.run(r.off_shape, r.inp.x, r.inp.w, r.off);
  r.on.assign(T * n, 0.0f);
  kern.run(r.prefill_shape, std::span<const float>(r.inp.x).first(P * k), r.inp.w, std::span<float>(r.on).first(P * n));
  for (std::size_t t = P; t < T; ++t)
    kern.run(r.decode_shape, std::span<const float>(r.inp.x).subspan(t * k, k), r.inp.w,
             std::span<float>(r.on).subspan(t * n, n));
  r.paths = "paths off(M=" + std::to_string(T) + ")=" + kern.path(r.off_shape).name +
            " prefill(M=" + std::to_string(P) + ")=" + kern.path(r.prefill_shape).name +
            " decode(M=1)=" + kern.path(r.decode_shape).name;
  return std::nullopt;
}

}  // namespace

CheckResults check_projection_cache_on_off(const kernels::GemmKernel& kern, const ProjectionCase& c,
                                           std::uint64_t seed) {
  const std::string seed_note = " seed=" + std::to_string(seed) + " case=" + c.id() + " kernel=" + kern.info.name;
  const bool bitwise = kern.info.cache_invariant;
  const std::string rule = bitwise ? "on_off_bitwise" : "on_off_bound";
  ProjectionRuns r;
  if (auto why = run_projection(kern, c, seed, r)) return {detail::unsupported_result(rule, *why, seed)};
  const std::size_t T = c.total, P = c.prompt, n = c.n, k = c.k;

  detail::Comparison cmp;
  cmp.out = kern.info.out;
  cmp.bitwise = bitwise;
  std::vector<double> sums;
  ref::ErrorTerms t_off, t_pre, t_dec;
  if (!bitwise) {
    sums = abs_sums_up(r.inp, T, n, k);
    const double mx = max_abs(r.inp.x, r.inp.w);
    auto terms = [&](const kernels::GemmShape& s) {
      const kernels::GemmPath p = kern.path(s);
      return detail::reduction_terms(p.spec, p.order, k, mx);
    };
    t_off = terms(r.off_shape);
    t_pre = terms(r.prefill_shape);
    t_dec = terms(r.decode_shape);
  }
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t o = 0; o < n; ++o) {
      const std::size_t i = t * n + o;
      const double b = bitwise ? 0.0 : (t < P ? t_pre : t_dec).at(sums[i]) + t_off.at(sums[i]);
      cmp.add(r.on[i], r.off[i], 0, i, b);
    }
  const std::string head = r.paths + " " + cmp.stats();
  const std::size_t w = bitwise ? cmp.diff_index : cmp.where[cmp.worst.index].second;
  CheckResult res =
      bitwise ? detail::bitwise_result(rule, cmp.bitwise_error(), seed,
                                       head + " max diff at (token,feature)=" + where(w, n) + " on=" + num(r.on[w]) +
                                           " off=" + num(r.off[w]) + seed_note)
              : detail::bound_result(rule, cmp.worst.error, cmp.worst.bound, seed,
                                     head + " worst (token,feature)=" + where(w, n) + " on=" + num(r.on[w]) +
                                         " off=" + num(r.off[w]) +
                                         " elements_over_bound=" + std::to_string(cmp.worst.failed) + seed_note);
  res.paths = r.paths;  // the numbers of the detail, as fields
  res.worst_index = w;
  res.worst_value = r.on[w];
  res.worst_expected = r.off[w];
  return {res};
}

OnOffDiff measure_projection_on_off(const kernels::GemmKernel& kern, const ProjectionCase& c, std::uint64_t seed) {
  ProjectionRuns r;
  if (auto why = run_projection(kern, c, seed, r))
    throw std::invalid_argument("measure_projection_on_off: " + kern.info.name + " on " + c.id() + ": " + *why);
  detail::Comparison cmp;
  cmp.out = kern.info.out;
  cmp.bitwise = true;
  for (std::size_t i = 0; i < r.on.size(); ++i) cmp.add(r.on[i], r.off[i], 0, i);
  return {cmp.count, cmp.differ, cmp.max_ulp, cmp.max_diff, cmp.max_rel(), r.paths};
}

CheckResults check_gemm_batch_invariance(const kernels::GemmKernel& kern, const GemmCase& c, std::uint64_t seed) {
  const bool bitwise = kern.info.cache_invariant;
  const std::string rule = bitwise ? "batch_bitwise" : "batch_bound";
  const std::size_t m = c.shape.m, n = c.shape.n, k = c.shape.k;
  const kernels::GemmShape batch{m, n, k}, alone{1, n, k};
  for (const auto* s : {&batch, &alone})
    if (auto why = kern.supports(*s)) return {detail::unsupported_result(rule, *why, seed)};
  const GemmInputs in = gemm_inputs(kern.info.in, m, n, k, c.data, seed);
  std::vector<float> in_batch(m * n), by_itself(m * n);  // (m, n): every row inside the M-row call, and alone
  kern.run(batch, in.x, in.w, in_batch);
  for (std::size_t r = 0; r < m; ++r)
    kern.run(alone, std::span<const float>(in.x).subspan(r * k, k), in.w,
             std::span<float>(by_itself).subspan(r * n, n));
  detail::Comparison cmp;
  cmp.out = kern.info.out;
  cmp.bitwise = bitwise;
  std::vector<double> sums;
  ref::ErrorTerms t_batch, t_alone;
  if (!bitwise) {
    sums = abs_sums_up(in, m, n, k);
    const double mx = max_abs(in.x, in.w);
    const kernels::GemmPath pb = kern.path(batch), pa = kern.path(alone);
    t_batch = detail::reduction_terms(pb.spec, pb.order, k, mx);
    t_alone = detail::reduction_terms(pa.spec, pa.order, k, mx);
  }
  for (std::size_t i = 0; i < m * n; ++i)
    cmp.add(by_itself[i], in_batch[i], 0, i, bitwise ? 0.0 : t_alone.at(sums[i]) + t_batch.at(sums[i]));
  const std::string head = "paths batch(M=" + std::to_string(m) + ")=" + kern.path(batch).name +
                           " alone(M=1)=" + kern.path(alone).name + " " + cmp.stats();
  const std::string tail = " seed=" + std::to_string(seed) + " case=" + c.id() + " kernel=" + kern.info.name;
  if (bitwise) {
    const std::size_t d = cmp.diff_index;
    return {detail::bitwise_result(rule, cmp.bitwise_error(), seed,
                                   head + " max diff at (row,feature)=" + where(d, n) + " alone=" + num(by_itself[d]) +
                                       " in batch=" + num(in_batch[d]) + tail)};
  }
  const std::size_t w = cmp.where[cmp.worst.index].second;
  return {detail::bound_result(rule, cmp.worst.error, cmp.worst.bound, seed,
                               head + " worst (row,feature)=" + where(w, n) + " alone=" + num(by_itself[w]) +
                                   " in batch=" + num(in_batch[w]) +
                                   " elements_over_bound=" + std::to_string(cmp.worst.failed) + tail)};
}

}  // namespace kvconf::conformance
