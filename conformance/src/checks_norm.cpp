// RMSNorm check: rule 1 (oracle accuracy, two-sided) for one norm kernel on one case, against ref::rms_norm and
// the per-element bound of the HF pipeline (ref::rms_norm_error_terms, docs/TOLERANCES.md §9).
#include <algorithm>
#include <cmath>
#include <limits>

#include "checks_common.hpp"
#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/norm.hpp"

namespace kvconf::conformance {

namespace {

using detail::num;

// The HF pipeline in fp32 with Σx² as one sequential FMA chain in `acc` (the naive same-precision reference):
// f = fl32(1/d), V = fl32(S·f), W = fl32(V + eps), r = rsqrt, h = fl32(x·r); Llama y = fl_out(w·fl_out(h)),
// Gemma y = fl_out(fl32(h·fl32(1 + w))).
void naive_rms_norm(Format acc, Format out, const kernels::NormShape& s, const kernels::NormParams& p,
                    const std::vector<float>& x, const std::vector<float>& w, std::vector<float>& y) {
  const float f = 1.0f / static_cast<float>(s.d);
  for (std::size_t r = 0; r < s.rows; ++r) {
    const float* xr = &x[r * s.d];
    float sum = 0.0f;
    for (std::size_t i = 0; i < s.d; ++i)
      sum = acc == Format::fp32 ? std::fmaf(xr[i], xr[i], sum) : kernels::fma_format(acc, xr[i], xr[i], sum);
    const float rho = kernels::rsqrt_f32(sum * f + p.eps);
    for (std::size_t i = 0; i < s.d; ++i) {
      const float h = xr[i] * rho;
      float v = 0.0f;
      if (p.one_plus_weight)
        v = kernels::round_float(out, h * (1.0f + w[i]));
      else
        v = kernels::round_float(out, w[i] * kernels::round_float(out, h));
      y[r * s.d + i] = v;
    }
  }
}

}  // namespace

CheckResults check_norm_matches_oracle(const kernels::NormKernel& kern, const NormCase& c, std::uint64_t seed) {
  const auto& s = c.shape;
  const std::string nt = " seed=" + std::to_string(seed) + " case=" + c.id() + " kernel=" + kern.info.name;
  if (auto why = kern.supports(s)) return {detail::unsupported_result("oracle_bound", *why, seed)};
  const Format in = kern.info.in, out = kern.info.out;
  // x: (rows, d) hidden states; w: (d) Llama weights around 1, or Gemma's w of (1 + w) around 0.
  const auto x = make_values(s.rows * s.d, in, c.data, detail::sub_seed(seed, "x"));
  const auto w = c.params.one_plus_weight ? make_values(s.d, in, Data::normal, detail::sub_seed(seed, "w"), 0.25)
                                          : make_values(s.d, in, Data::same_sign, detail::sub_seed(seed, "w"));
  std::vector<float> y(s.rows * s.d);  // (rows, d)
  kern.run(s, c.params, x, w, y);
  const kernels::NormPath path = kern.path(s);

  ref::OracleOptions opt;
  opt.out = out;
  const ref::RmsNormResult orc = ref::rms_norm(detail::to_double(x), detail::to_double(w), s.rows, s.d,
                                               static_cast<double>(c.params.eps), c.params.one_plus_weight, in, opt);
  double max_x = 0.0;
  for (float v : x) max_x = std::max(max_x, static_cast<double>(std::fabs(v)));
  const ref::ErrorTerms sum_terms = detail::reduction_terms(path.spec, path.order, s.d, max_x);

  std::vector<float> naive(s.rows * s.d);
  naive_rms_norm(kern.info.partial, out, s, c.params, x, w, naive);

  detail::Worst kernel_err, naive_err;
  double max_oracle = 0.0;
  for (std::size_t r = 0; r < s.rows; ++r) {
    ref::RmsNormErrorInputs bi;
    bi.d = s.d;
    bi.sum_sq = orc.sum_sq[r];
    bi.eps = static_cast<double>(c.params.eps);
    bi.sum_terms = sum_terms;
    bi.rsqrt_rel_error = path.rsqrt_rel_error;
    bi.one_plus_weight = c.params.one_plus_weight;
    bi.out = out;
    const ref::RmsNormErrorTerms terms = ref::rms_norm_error_terms(bi);
    for (std::size_t i = 0; i < s.d; ++i) {
      const std::size_t e = r * s.d + i;
      const double exact = orc.approx[e];
      max_oracle = std::max(max_oracle, std::fabs(exact));
      // |y| and |w'| as upper bounds: approx is within one ulp of double of the exact value.
      const double abs_y = std::nextafter(std::fabs(exact) * (1.0 + 0x1p-51), std::numeric_limits<double>::infinity());
      const double wf = c.params.one_plus_weight ? std::fabs(1.0 + static_cast<double>(w[i])) : std::fabs(w[i]);
      kernel_err.add(e, detail::error_up(y[e], exact), terms.at(abs_y, wf));
      naive_err.add(e, detail::error_up(naive[e], exact), std::numeric_limits<double>::infinity());
    }
  }
  const std::size_t at = kernel_err.index;
  CheckResults res;
  res.push_back(detail::bound_result("oracle_bound", kernel_err.error, kernel_err.bound, seed,
                                     "path=" + path.name + " order=" + order_name(path.order) + " worst (row " +
                                         std::to_string(at / s.d) + ", col " + std::to_string(at % s.d) +
                                         ") kernel=" + num(y[at]) + " oracle=" + num(orc.approx[at]) +
                                         " elements_over_bound=" + std::to_string(kernel_err.failed) +
                                         " max_error=" + num(kernel_err.max_error) + nt));
  res.back().worst_index = at;  // the numbers of the detail, as fields
  res.back().worst_value = y[at];
  res.back().worst_expected = orc.approx[at];
  const double floor = detail::ulp(out, max_oracle);
  const double f = detail::two_sided_factor(0.0);
  res.push_back(detail::bound_result("two_sided", kernel_err.max_error, f * naive_err.max_error + floor, seed,
                                     "naive sequential " + std::string(name(kern.info.partial)) +
                                         " sum of squares, HF fp32 pipeline error=" + num(naive_err.max_error) +
                                         " factor=" + num(f) + " floor=ulp_" + std::string(name(out)) + "(" +
                                         num(max_oracle) + ")=" + num(floor) + nt));
  res.back().reference_error = naive_err.max_error;  // the bound is a factor times it plus a floor
  return res;
}

}  // namespace kvconf::conformance
