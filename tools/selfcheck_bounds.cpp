// Self-checks of the error bounds: emulated dot products in several accumulation orders, measured
// against the exact oracle dot product, must stay within their a-priori bound.
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"
#include "selfcheck.hpp"

namespace kvconf::tools {
namespace {

// |computed − exact|, rounded up.
double abs_error(const ref::Mpfr& exact, double computed) {
  mpfr_t diff;
  mpfr_init2(diff, mpfr_get_prec(exact.get()) + 1200);  // exact subtraction
  mpfr_sub_d(diff, exact.get(), computed, MPFR_RNDN);
  const double e = std::fabs(mpfr_get_d(diff, MPFR_RNDA));
  mpfr_clear(diff);
  return e;
}

CheckResult dot_bounds(const AccumSpec& spec, const Order& order, bool same_sign) {
  std::mt19937_64 rng(0x626f756e64ull + (same_sign ? 1 : 0));
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  CheckResult r;
  double worst = 0.0;
  for (std::size_t n : {16u, 128u, 1024u}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> x(n), y(n);
      for (std::size_t i = 0; i < n; ++i) {
        x[i] = round_to(spec.in, same_sign ? uni(rng) : g(rng));
        y[i] = round_to(spec.in, same_sign ? uni(rng) : g(rng));
      }
      const double computed = dot(spec, order, x, y);
      const auto exact = ref::dot(x, y, spec.in);
      const double bound = ref::dot_error_bound(spec, order, n, exact.abs_sum);
      const double err = abs_error(exact.exact, computed);
      ++r.cases;
      if (!(err <= bound)) {
        r.detail = order_name(order) + " n=" + std::to_string(n) + ": error " + std::to_string(err) +
                   " exceeds bound " + std::to_string(bound);
        return r;
      }
      if (bound > 0 && std::isfinite(bound)) worst = std::max(worst, err / bound);
    }
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %s->%s->%s, %s data, n in {16,128,1024}: max error/bound %.3f",
                order_name(order).c_str(), name(spec.in).data(), name(spec.acc).data(), name(spec.out).data(),
                same_sign ? "U(0,1)" : "N(0,1)", worst);
  r.passed = true;
  r.detail = buf;
  return r;
}

}  // namespace

void add_bound_checks(std::vector<SelfCheck>& out) {
  const AccumSpec f16_f32{Format::fp16, Format::fp32, Format::fp32};
  const AccumSpec f16_f32_o16{Format::fp16, Format::fp32, Format::fp16};
  const AccumSpec f16_f16{Format::fp16, Format::fp16, Format::fp16};
  out.push_back({"bounds.seq_fp32_acc", "sequential fp32 accumulation within gamma_n bound",
                 [=] { return dot_bounds(f16_f32, Sequential{}, true); }});
  out.push_back({"bounds.pairwise_fp16_acc", "pairwise fp16 accumulation within its bound",
                 [=] { return dot_bounds(f16_f16, Pairwise{}, false); }});
  out.push_back({"bounds.splitk_fp16_out", "split-K(4), slices rounded to fp16, within its bound", [=] {
                   return dot_bounds(f16_f32_o16, SplitK{4, SplitKCombine::slices_rounded_to_output}, true);
                 }});
  out.push_back({"bounds.tensor_core_h100", "H100 tensor-core block-FMA model (RZ) within its bound",
                 [=] { return dot_bounds(f16_f32, TensorCore{TensorCoreParams::h100()}, true); }});
}

}  // namespace kvconf::tools
