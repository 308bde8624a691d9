// Correctly rounded arithmetic: compute the double result plus the sign of its exact residual
// (error-free transformations), then round once with round_to(). Compiled with -ffp-contract=off.
//
// Why this is exact: the double result r = RN53(exact) and the residual sign determine on which
// side of every narrower format's rounding boundary the exact value lies, because those boundaries
// are multiples of ulp53(r) (proof in docs/FORMATS.md). Unlike RN16(fmaf(a,b,c)) or
// RN_bf16(fma(a,b,c)) (double rounding, notes/numerics.md §4.3), nothing is rounded twice.
#include "kvconf/numerics/arith.hpp"

#include <cmath>
#include <stdexcept>

namespace kvconf {
namespace {

int sign_of(double r) { return (r > 0) - (r < 0); }

// IEEE 754-2019 §6.3: an exact zero sum x + y (x, y not both zeros of the same sign, e.g. x − x) is +0
// in every rounding mode except roundTowardNegative, where it is −0. The double sum was computed in
// round-to-nearest, so fix the sign of an exact zero for `down`.
Tailed signed_zero_sum(Tailed t, double x, double y, RoundOptions o) {
  if (t.x == 0.0 && t.tail == 0 && o.mode == Rounding::down) t.x = (std::signbit(x) || std::signbit(y)) ? -0.0 : 0.0;
  return t;
}

}  // namespace

Tailed exact_sum(double a, double b) {
  const double s = a + b;
  if (!std::isfinite(s)) return {s, 0};
  const double bb = s - a;
  const double err = (a - (s - bb)) + (b - bb);
  return {s, sign_of(err)};
}

Tailed exact_product(double a, double b) {
  const double p = a * b;
  if (!std::isfinite(p)) return {p, 0};
  return {p, sign_of(std::fma(a, b, -p))};
}

Tailed exact_quotient(double a, double b) {
  const double q = a / b;
  if (!std::isfinite(q) || q == 0.0) return {q, 0};
  const double r = std::fma(-q, b, a);  // exact remainder a − q·b
  return {q, sign_of(r) * sign_of(b)};
}

Tailed exact_sqrt(double a) {
  const double s = std::sqrt(a);
  if (!std::isfinite(s) || s == 0.0) return {s, 0};
  return {s, sign_of(std::fma(-s, s, a))};  // exact a − s²
}

Tailed exact_fma(double a, double b, double c) {
  const double p = a * b;  // exact for operands of <= 26 significant bits
  if (!std::isfinite(p) || !std::isfinite(c)) return {p + c, 0};
  if (std::fma(a, b, -p) != 0.0)
    throw std::invalid_argument(
        "kvconf::fma: a*b is not exact in double; operands must be values of a format "
        "with at most 26 significant bits (fp32 or narrower)");
  return exact_sum(p, c);
}

double add(Format f, double a, double b, RoundOptions o) {
  return round_to(f, signed_zero_sum(exact_sum(a, b), a, b, o), o);
}
double sub(Format f, double a, double b, RoundOptions o) {
  return round_to(f, signed_zero_sum(exact_sum(a, -b), a, -b, o), o);
}
double mul(Format f, double a, double b, RoundOptions o) { return round_to(f, exact_product(a, b), o); }
double div(Format f, double a, double b, RoundOptions o) { return round_to(f, exact_quotient(a, b), o); }
double sqrt(Format f, double a, RoundOptions o) { return round_to(f, exact_sqrt(a), o); }

double fma(Format f, double a, double b, double c, RoundOptions o) {
  if (f == Format::fp64) {  // a·b is not exact in double: use the native FMA
    if (o.mode != Rounding::nearest_even || o.ftz)
      throw std::invalid_argument("kvconf::fma: fp64 fma supports only nearest-even rounding without ftz");
    return std::fma(a, b, c);
  }
  return round_to(f, signed_zero_sum(exact_fma(a, b, c), a * b, c, o), o);
}

}  // namespace kvconf
