// MPFR-side rounding into kvconf Formats (the independent golden path for format tests and oracle).
#include "kvconf/reference/mpfr_format.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvconf::ref {
namespace {

// RAII mpfr_t.
struct Mp {
  mpfr_t v;
  explicit Mp(mpfr_prec_t prec) { mpfr_init2(v, prec); }
  ~Mp() { mpfr_clear(v); }
  Mp(const Mp&) = delete;
  Mp& operator=(const Mp&) = delete;
};

double overflow_value(const FormatInfo& fi, bool neg, RoundOptions o) {
  const bool to_max = o.saturate || o.mode == Rounding::toward_zero || o.mode == Rounding::to_odd ||
                      (o.mode == Rounding::up && neg) || (o.mode == Rounding::down && !neg);
  double m;
  if (to_max)
    m = fi.max_finite;
  else
    m = fi.has_inf() ? HUGE_VAL : std::numeric_limits<double>::quiet_NaN();
  return neg ? -m : m;
}

}  // namespace

mpfr_rnd_t to_mpfr(Rounding r) {
  switch (r) {
    case Rounding::nearest_even:
      return MPFR_RNDN;
    case Rounding::toward_zero:
      return MPFR_RNDZ;
    case Rounding::up:
      return MPFR_RNDU;
    case Rounding::down:
      return MPFR_RNDD;
    case Rounding::to_odd:
      break;
  }
  throw std::invalid_argument("kvconf::ref::to_mpfr: round-to-odd has no MPFR rounding mode");
}

ExponentRange::ExponentRange(mpfr_exp_t emin, mpfr_exp_t emax)
    : old_emin_(mpfr_get_emin()), old_emax_(mpfr_get_emax()) {
  if (mpfr_set_emin(emin) != 0 || mpfr_set_emax(emax) != 0)
    throw std::invalid_argument("kvconf::ref::ExponentRange: exponent range not supported by MPFR");
}
ExponentRange::~ExponentRange() {
  mpfr_set_emin(old_emin_);
  mpfr_set_emax(old_emax_);
}

// Shared tail of round_mpfr/op_mpfr: y holds an MPFR result at precision p with ternary inex,
// computed with the format's emin in force and a wide emax.
static double finish(const FormatInfo& fi, mpfr_t y, int inex, mpfr_rnd_t rnd, RoundOptions o) {
  inex = mpfr_check_range(y, inex, rnd);
  inex = mpfr_subnormalize(y, inex, rnd);
  if (mpfr_nan_p(y)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = mpfr_signbit(y) != 0;
  if (mpfr_inf_p(y)) {
    if (fi.has_inf()) return neg ? -HUGE_VAL : HUGE_VAL;
    return o.saturate ? (neg ? -fi.max_finite : fi.max_finite) : std::numeric_limits<double>::quiet_NaN();
  }
  double d = mpfr_get_d(y, MPFR_RNDN);  // exact: p <= 53 and within double's range
  if (o.mode == Rounding::to_odd && inex != 0) {
    // RZ result with the last significand bit forced to 1.
    const double ulp = (std::fabs(d) < fi.min_normal) ? fi.min_subnormal : std::ldexp(1.0, std::ilogb(d) - fi.man_bits);
    const double k = std::fabs(d) / ulp;  // integer significand at this quantum
    if (std::fmod(k, 2.0) == 0.0) d = neg ? -(std::fabs(d) + ulp) : std::fabs(d) + ulp;
  }
  if (std::fabs(d) > fi.max_finite) return overflow_value(fi, neg, o);
  if (o.ftz && d != 0.0 && std::fabs(d) < fi.min_normal) return neg ? -0.0 : 0.0;
  return d;
}

double round_mpfr(Format f, mpfr_srcptr x, RoundOptions o) {
  const FormatInfo& fi = info(f);
  const mpfr_rnd_t rnd = (o.mode == Rounding::to_odd) ? MPFR_RNDZ : to_mpfr(o.mode);
  // Round to p bits in MPFR's default exponent range (x may lie below the format's range), then
  // narrow the range: mpfr_check_range + mpfr_subnormalize take y and its ternary value from there
  // without double rounding (MPFR manual, mpfr_check_range and mpfr_subnormalize).
  Mp y(fi.p);
  const int inex = mpfr_set(y.v, x, rnd);
  const ExponentRange range(fi.emin - fi.man_bits + 1, 4096);
  return finish(fi, y.v, inex, rnd, o);
}

double op_mpfr(Format f, Op op, double a, double b, double c, RoundOptions o) {
  const FormatInfo& fi = info(f);
  const mpfr_rnd_t rnd = (o.mode == Rounding::to_odd) ? MPFR_RNDZ : to_mpfr(o.mode);
  Mp A(53), B(53), C(53);
  mpfr_set_d(A.v, a, MPFR_RNDN);  // exact
  mpfr_set_d(B.v, b, MPFR_RNDN);
  mpfr_set_d(C.v, c, MPFR_RNDN);
  const ExponentRange range(fi.emin - fi.man_bits + 1, 4096);
  Mp y(fi.p);
  int inex = 0;
  switch (op) {
    case Op::add:
      inex = mpfr_add(y.v, A.v, B.v, rnd);
      break;
    case Op::sub:
      inex = mpfr_sub(y.v, A.v, B.v, rnd);
      break;
    case Op::mul:
      inex = mpfr_mul(y.v, A.v, B.v, rnd);
      break;
    case Op::div:
      inex = mpfr_div(y.v, A.v, B.v, rnd);
      break;
    case Op::sqrt:
      inex = mpfr_sqrt(y.v, A.v, rnd);
      break;
    case Op::fma:
      inex = mpfr_fma(y.v, A.v, B.v, C.v, rnd);
      break;
  }
  return finish(fi, y.v, inex, rnd, o);
}

}  // namespace kvconf::ref
