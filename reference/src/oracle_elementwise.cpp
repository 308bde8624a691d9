// Oracle enclosures of the elementwise stages (elementwise.hpp): RoPE angles and rotations, SiLU, GELU-tanh.
// Every quantity is bracketed by MPFR operations with directed rounding (RNDD for the lower end, RNDU for the
// upper), using only monotone steps, so lo <= exact <= hi holds by construction; irrational constants (π) come
// from MPFR with directed rounding too.
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kvconf/reference/elementwise.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::ref {
namespace {

constexpr mpfr_prec_t kPrec = 192;
constexpr double kInf = std::numeric_limits<double>::infinity();

double down(mpfr_srcptr x) { return mpfr_get_d(x, MPFR_RNDD); }
double up(mpfr_srcptr x) { return mpfr_get_d(x, MPFR_RNDU); }

void require_finite(const char* fn, double x) {
  if (!std::isfinite(x))
    throw std::invalid_argument(std::string(fn) + ": input " + std::to_string(x) + " is not finite");
}

// [lo, hi] of a sign(x)·m with m in [m_lo, m_hi] (m >= 0).
Enclosure signed_enclosure(bool negative, mpfr_srcptr m_lo, mpfr_srcptr m_hi) {
  if (negative) return {-up(m_hi), -down(m_lo)};
  return {down(m_lo), up(m_hi)};
}

// Bracket of e^(−y) (negative = false) or e^(+y) (negative = true) for y in [y_lo, y_hi] (y >= 0), as 1 + that:
// den_lo <= 1 + e^(∓y) <= den_hi. den_hi may be +inf (MPFR overflow beyond 2^(2^30)).
void one_plus_exp(bool grow, mpfr_srcptr y_lo, mpfr_srcptr y_hi, mpfr_ptr den_lo, mpfr_ptr den_hi) {
  if (grow) {
    mpfr_exp(den_lo, y_lo, MPFR_RNDD);
    mpfr_exp(den_hi, y_hi, MPFR_RNDU);
  } else {
    mpfr_neg(den_lo, y_hi, MPFR_RNDN);  // exact
    mpfr_exp(den_lo, den_lo, MPFR_RNDD);
    mpfr_neg(den_hi, y_lo, MPFR_RNDN);
    mpfr_exp(den_hi, den_hi, MPFR_RNDU);
  }
  mpfr_add_ui(den_lo, den_lo, 1, MPFR_RNDD);
  mpfr_add_ui(den_hi, den_hi, 1, MPFR_RNDU);
}

// [a / den_hi, a / den_lo] for a >= 0; a / inf is 0 and the upper end of a value that lies below every double
// (den_lo = inf) is the smallest subnormal.
void quotient(mpfr_srcptr a, mpfr_srcptr den_lo, mpfr_srcptr den_hi, mpfr_ptr q_lo, mpfr_ptr q_hi) {
  mpfr_div(q_lo, a, den_hi, MPFR_RNDD);
  if (mpfr_inf_p(den_lo)) {
    mpfr_set_d(q_hi, std::numeric_limits<double>::denorm_min(), MPFR_RNDU);
  } else {
    mpfr_div(q_hi, a, den_lo, MPFR_RNDU);
  }
}

// cos or sin of A in [a_lo, a_hi]: the function at a_lo (RNDN, error <= 2^-kPrec since |f| <= 1) widened by
// the interval width (both are 1-Lipschitz), clamped to [−1, 1].
Enclosure trig(bool is_cos, mpfr_srcptr a_lo, mpfr_srcptr width) {
  Mpfr f(kPrec), r(kPrec), lo(kPrec), hi(kPrec);
  if (is_cos)
    mpfr_cos(f.get(), a_lo, MPFR_RNDN);
  else
    mpfr_sin(f.get(), a_lo, MPFR_RNDN);
  mpfr_set_ui_2exp(r.get(), 1, -(kPrec - 1), MPFR_RNDU);
  mpfr_add(r.get(), r.get(), width, MPFR_RNDU);
  mpfr_sub(lo.get(), f.get(), r.get(), MPFR_RNDD);
  mpfr_add(hi.get(), f.get(), r.get(), MPFR_RNDU);
  return {std::max(-1.0, down(lo.get())), std::min(1.0, up(hi.get()))};
}

}  // namespace

double Enclosure::abs_up() const { return std::max(std::fabs(lo), std::fabs(hi)); }

double Enclosure::abs_down() const {
  if (lo <= 0.0 && hi >= 0.0) return 0.0;
  return std::min(std::fabs(lo), std::fabs(hi));
}

double enclosure_error(double computed, const Enclosure& e) {
  if (std::isnan(computed) || std::isnan(e.lo) || std::isnan(e.hi)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(computed)) return kInf;
  // |c − v| for v in [lo, hi] is largest at an end. Each difference c − v = s + t exactly (TwoSum), |t| <= ulp(s)/2,
  // so |s| (t = 0) or the next double above |s| bounds it.
  double worst = 0.0;
  for (const double v : {e.lo, e.hi}) {
    const double s = computed - v;
    if (std::isinf(s)) return kInf;
    const double bb = s - computed;
    const double t = (computed - (s - bb)) + (-v - bb);
    const double a = std::fabs(s);
    worst = std::max(worst, t == 0.0 ? a : std::nextafter(a, kInf));
  }
  return worst;
}

Enclosure around_approx(double approx) { return {std::nextafter(approx, -kInf), std::nextafter(approx, kInf)}; }

RopeAngle rope_angle(std::size_t pos, std::size_t i, std::size_t d, double theta) {
  static constexpr char kFn[] = "kvconf::ref::rope_angle";
  if (d < 2 || 2 * i >= d) throw std::invalid_argument(std::string(kFn) + ": pair index i must satisfy 2i < d");
  if (!(theta > 0.0) || !std::isfinite(theta)) throw std::invalid_argument(std::string(kFn) + ": theta must be > 0");
  Mpfr two_i(kPrec), e_lo(kPrec), e_hi(kPrec), th(kPrec), p(kPrec), inv_lo(kPrec), inv_hi(kPrec);
  mpfr_set_ui(two_i.get(), static_cast<unsigned long>(2 * i), MPFR_RNDN);
  mpfr_div_ui(e_lo.get(), two_i.get(), static_cast<unsigned long>(d), MPFR_RNDD);
  mpfr_div_ui(e_hi.get(), two_i.get(), static_cast<unsigned long>(d), MPFR_RNDU);
  mpfr_neg(e_lo.get(), e_lo.get(), MPFR_RNDN);  // −e_lo >= −e >= −e_hi
  mpfr_neg(e_hi.get(), e_hi.get(), MPFR_RNDN);
  mpfr_set_d(th.get(), theta, MPFR_RNDN);
  // θ^(−e) is monotone in e: its value lies between those at the two ends of the exponent bracket.
  mpfr_pow(inv_lo.get(), th.get(), e_lo.get(), MPFR_RNDD);
  mpfr_pow(p.get(), th.get(), e_hi.get(), MPFR_RNDD);
  mpfr_min(inv_lo.get(), inv_lo.get(), p.get(), MPFR_RNDN);
  mpfr_pow(inv_hi.get(), th.get(), e_lo.get(), MPFR_RNDU);
  mpfr_pow(p.get(), th.get(), e_hi.get(), MPFR_RNDU);
  mpfr_max(inv_hi.get(), inv_hi.get(), p.get(), MPFR_RNDN);
  Mpfr a_lo(kPrec), a_hi(kPrec), w(kPrec);
  mpfr_mul_ui(a_lo.get(), inv_lo.get(), static_cast<unsigned long>(pos), MPFR_RNDD);
  mpfr_mul_ui(a_hi.get(), inv_hi.get(), static_cast<unsigned long>(pos), MPFR_RNDU);
  mpfr_sub(w.get(), a_hi.get(), a_lo.get(), MPFR_RNDU);
  RopeAngle r;
  r.angle = {down(a_lo.get()), up(a_hi.get())};
  r.cos = trig(true, a_lo.get(), w.get());
  r.sin = trig(false, a_lo.get(), w.get());
  return r;
}

Enclosure rope_component(double x_cos, double x_sin, const RopeAngle& t) {
  require_finite("kvconf::ref::rope_component", x_cos);
  require_finite("kvconf::ref::rope_component", x_sin);
  // x·[lo, hi] = [x·lo, x·hi] for x >= 0, [x·hi, x·lo] otherwise; products of doubles are exact at 128 bits.
  auto ends = [](double x, const Enclosure& e) { return x >= 0.0 ? std::pair{e.lo, e.hi} : std::pair{e.hi, e.lo}; };
  const auto [c_lo, c_hi] = ends(x_cos, t.cos);
  const auto [s_lo, s_hi] = ends(x_sin, t.sin);
  Mpfr a(128), b(128), v(128), lo(128), hi(128);
  auto sum = [&](double c, double s, mpfr_rnd_t rnd, mpfr_ptr out) {
    mpfr_set_d(v.get(), x_cos, MPFR_RNDN);
    mpfr_set_d(a.get(), c, MPFR_RNDN);
    mpfr_mul(a.get(), a.get(), v.get(), MPFR_RNDN);  // exact
    mpfr_set_d(v.get(), x_sin, MPFR_RNDN);
    mpfr_set_d(b.get(), s, MPFR_RNDN);
    mpfr_mul(b.get(), b.get(), v.get(), MPFR_RNDN);  // exact
    mpfr_add(out, a.get(), b.get(), rnd);
  };
  sum(c_lo, s_lo, MPFR_RNDD, lo.get());
  sum(c_hi, s_hi, MPFR_RNDU, hi.get());
  return {down(lo.get()), up(hi.get())};
}

Enclosure silu(double x) {
  require_finite("kvconf::ref::silu", x);
  if (x == 0.0) return {0.0, 0.0};
  // silu(x) = sign(x)·|x| / (1 + e^(−x)).
  Mpfr a(kPrec), den_lo(kPrec), den_hi(kPrec), q_lo(kPrec), q_hi(kPrec);
  mpfr_set_d(a.get(), std::fabs(x), MPFR_RNDN);
  one_plus_exp(x < 0.0, a.get(), a.get(), den_lo.get(), den_hi.get());  // e^(−x) = e^(|x|) for x < 0
  quotient(a.get(), den_lo.get(), den_hi.get(), q_lo.get(), q_hi.get());
  return signed_enclosure(x < 0.0, q_lo.get(), q_hi.get());
}

GeluTanh gelu_tanh(double x) {
  require_finite("kvconf::ref::gelu_tanh", x);
  if (x == 0.0) return {{0.0, 0.0}, {0.0, 0.0}, {1.0, 1.0}};
  // β = √(2/π) and κ = 0.044715 bracketed; |z| = β·(|x| + κ|x|³) (no cancellation: both terms have x's sign).
  Mpfr pi_lo(kPrec), pi_hi(kPrec), b_lo(kPrec), b_hi(kPrec), k_lo(kPrec), k_hi(kPrec);
  mpfr_const_pi(pi_lo.get(), MPFR_RNDD);
  mpfr_const_pi(pi_hi.get(), MPFR_RNDU);
  mpfr_ui_div(b_lo.get(), 2, pi_hi.get(), MPFR_RNDD);
  mpfr_sqrt(b_lo.get(), b_lo.get(), MPFR_RNDD);
  mpfr_ui_div(b_hi.get(), 2, pi_lo.get(), MPFR_RNDU);
  mpfr_sqrt(b_hi.get(), b_hi.get(), MPFR_RNDU);
  mpfr_set_ui(k_lo.get(), 44715, MPFR_RNDN);
  mpfr_div_ui(k_lo.get(), k_lo.get(), 1000000, MPFR_RNDD);
  mpfr_set_ui(k_hi.get(), 44715, MPFR_RNDN);
  mpfr_div_ui(k_hi.get(), k_hi.get(), 1000000, MPFR_RNDU);

  Mpfr a(kPrec), a3(kPrec), z_lo(kPrec), z_hi(kPrec);
  mpfr_set_d(a.get(), std::fabs(x), MPFR_RNDN);
  mpfr_mul(a3.get(), a.get(), a.get(), MPFR_RNDN);
  mpfr_mul(a3.get(), a3.get(), a.get(), MPFR_RNDN);  // exact: 159 bits <= kPrec
  mpfr_mul(z_lo.get(), a3.get(), k_lo.get(), MPFR_RNDD);
  mpfr_add(z_lo.get(), z_lo.get(), a.get(), MPFR_RNDD);
  mpfr_mul(z_lo.get(), z_lo.get(), b_lo.get(), MPFR_RNDD);
  mpfr_mul(z_hi.get(), a3.get(), k_hi.get(), MPFR_RNDU);
  mpfr_add(z_hi.get(), z_hi.get(), a.get(), MPFR_RNDU);
  mpfr_mul(z_hi.get(), z_hi.get(), b_hi.get(), MPFR_RNDU);

  // 1 + tanh(z) = 2 / (1 + e^(−2z)); g = x/2 · (1 + tanh z) = sign(x)·|x| / (1 + e^(−2z)).
  Mpfr y_lo(kPrec), y_hi(kPrec), den_lo(kPrec), den_hi(kPrec), q_lo(kPrec), q_hi(kPrec), two(kPrec);
  mpfr_mul_2ui(y_lo.get(), z_lo.get(), 1, MPFR_RNDN);  // exact
  mpfr_mul_2ui(y_hi.get(), z_hi.get(), 1, MPFR_RNDN);
  one_plus_exp(x < 0.0, y_lo.get(), y_hi.get(), den_lo.get(), den_hi.get());
  GeluTanh r;
  quotient(a.get(), den_lo.get(), den_hi.get(), q_lo.get(), q_hi.get());
  r.g = signed_enclosure(x < 0.0, q_lo.get(), q_hi.get());
  r.z = signed_enclosure(x < 0.0, z_lo.get(), z_hi.get());
  mpfr_set_ui(two.get(), 2, MPFR_RNDN);
  quotient(two.get(), den_lo.get(), den_hi.get(), q_lo.get(), q_hi.get());
  r.one_plus_tanh = {down(q_lo.get()), std::min(2.0, up(q_hi.get()))};
  return r;
}

}  // namespace kvconf::ref
