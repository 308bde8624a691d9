// Correct rounding into any Format: integer significand arithmetic on the double's bits, with the
// residual sign (Tailed::tail) deciding ties and directed modes. Compiled with -ffp-contract=off.
#include "kvconf/numerics/rounding.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace kvconf {
namespace {

enum class Kind { zero, finite, inf, nan };

// A rounded magnitude M·2^q with its sign (or a special value).
struct Rounded {
  Kind kind;
  bool neg;
  std::uint64_t M = 0;
  int q = 0;
};

Rounded overflow(const FormatInfo& fi, bool neg, RoundOptions o) {
  const int p = fi.p;
  const bool to_max = o.saturate || o.mode == Rounding::toward_zero || o.mode == Rounding::to_odd ||
                      (o.mode == Rounding::up && neg) || (o.mode == Rounding::down && !neg);
  if (to_max) {
    // max_finite = M_max · 2^(emax - p + 1)
    const auto M = static_cast<std::uint64_t>(std::ldexp(fi.max_finite, -(fi.emax - p + 1)));
    return {Kind::finite, neg, M, fi.emax - p + 1};
  }
  return {fi.has_inf() ? Kind::inf : Kind::nan, neg};
}

Rounded round_core(const FormatInfo& fi, Tailed v, RoundOptions o) {
  const double x = v.x;
  if (std::isnan(x)) return {Kind::nan, std::signbit(x)};
  if (std::isinf(x)) {
    if (fi.has_inf()) return {Kind::inf, std::signbit(x)};
    if (o.saturate) return overflow(fi, std::signbit(x), o);
    return {Kind::nan, std::signbit(x)};
  }
  const int p = fi.p;
  const int q_sub = fi.emin - p + 1;  // quantum of the subnormal range and the lowest normal binade
  if (x == 0.0 && v.tail == 0) return {Kind::zero, std::signbit(x)};

  bool neg;
  std::uint64_t M;  // floor of |exact| / 2^q
  int q;
  int cmp;  // fraction of a quantum left over: -1 below half, 0 exactly half, +1 above half
  bool inexact;
  if (x == 0.0) {
    // An exact zero double with a non-zero residual: a positive or negative value smaller than
    // any quantum of any format (only reachable through a caller-built Tailed).
    neg = v.tail < 0;
    M = 0;
    q = q_sub;
    cmp = -1;
    inexact = true;
  } else {
    neg = std::signbit(x);
    int e = 0;
    const double f = std::frexp(std::fabs(x), &e);                   // |x| = f·2^e, f in [0.5, 1)
    const auto m53 = static_cast<std::uint64_t>(std::ldexp(f, 53));  // |x| = m53·2^(e-53), exact
    const int e53 = e - 53;
    const int E = e - 1;  // floor(log2 |x|)
    q = (E < fi.emin) ? q_sub : E - (p - 1);
    const int shift = q - e53;
    std::uint64_t rem = 0, half = 0;
    if (shift <= 0) {
      M = m53 << (-shift);  // exact at this quantum; M < 2^p so no overflow
    } else if (shift < 64) {
      M = m53 >> shift;
      rem = m53 & ((std::uint64_t{1} << shift) - 1);
      half = std::uint64_t{1} << (shift - 1);
    } else {
      M = 0;
      rem = m53;
      half = std::numeric_limits<std::uint64_t>::max();  // m53 < 2^53 <= half: strictly below half
    }
    const int tmag = (v.tail == 0) ? 0 : ((v.tail > 0) != neg ? 1 : -1);  // residual sign vs |x|
    if (rem == 0) {
      if (tmag == 0) {
        cmp = -1;
        inexact = false;
      } else if (tmag > 0) {
        cmp = -1;  // a hair above M·2^q
        inexact = true;
      } else {
        // A hair below M·2^q. If M·2^q is the bottom of a normal binade above the lowest one,
        // the exact value lies in the binade below, whose quantum is half as big.
        if (M == (std::uint64_t{1} << (p - 1)) && q > q_sub) {
          M <<= 1;
          q -= 1;
        }
        M -= 1;
        cmp = +1;
        inexact = true;
      }
    } else {
      inexact = true;
      if (rem < half)
        cmp = -1;
      else if (rem > half)
        cmp = +1;
      else
        cmp = (tmag > 0) ? +1 : (tmag < 0 ? -1 : 0);
    }
  }

  bool up = false;
  switch (o.mode) {
    case Rounding::nearest_even:
      up = cmp > 0 || (cmp == 0 && (M & 1));
      break;
    case Rounding::toward_zero:
      break;
    case Rounding::up:
      up = inexact && !neg;
      break;
    case Rounding::down:
      up = inexact && neg;
      break;
    case Rounding::to_odd:
      if (inexact) M |= 1;
      break;
  }
  if (up) ++M;
  if (M == (std::uint64_t{1} << p)) {  // carried into the next binade
    M >>= 1;
    q += 1;
  }
  if (M == 0) return {Kind::zero, neg};
  // Overflow: the value rounded with unbounded exponent exceeds the largest finite number.
  if (std::ldexp(static_cast<double>(M), q) > fi.max_finite) return overflow(fi, neg, o);
  if (o.ftz && std::ldexp(static_cast<double>(M), q) < fi.min_normal) return {Kind::zero, neg};
  return {Kind::finite, neg, M, q};
}

double value_of(const Rounded& r) {
  switch (r.kind) {
    case Kind::zero:
      return r.neg ? -0.0 : 0.0;
    case Kind::inf:
      return r.neg ? -HUGE_VAL : HUGE_VAL;
    case Kind::nan:
      return r.neg ? -std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::quiet_NaN();
    case Kind::finite:
      break;
  }
  const double m = std::ldexp(static_cast<double>(r.M), r.q);
  return r.neg ? -m : m;
}

void check_bits_format(Format f) {
  if (f == Format::fp64)
    throw std::invalid_argument("kvconf::encode/decode: fp64 bit patterns do not fit uint32_t; use std::bit_cast");
}

}  // namespace

double round_to(Format f, Tailed v, RoundOptions o) { return value_of(round_core(info(f), v, o)); }

std::uint32_t nan_bits(Format f) {
  check_bits_format(f);
  const FormatInfo& fi = info(f);
  const std::uint32_t exp_all = (1u << fi.exp_bits) - 1;
  if (fi.nan == NanEncoding::fn_no_inf) return (exp_all << fi.man_bits) | ((1u << fi.man_bits) - 1);
  return (exp_all << fi.man_bits) | (1u << (fi.man_bits - 1));  // quiet NaN
}

std::uint32_t encode(Format f, Tailed v, RoundOptions o) {
  check_bits_format(f);
  const FormatInfo& fi = info(f);
  const Rounded r = round_core(fi, v, o);
  const std::uint32_t sign = r.neg ? (1u << (fi.bits - 1)) : 0u;
  const std::uint32_t exp_all = (1u << fi.exp_bits) - 1;
  switch (r.kind) {
    case Kind::zero:
      return sign;
    case Kind::inf:
      return sign | (exp_all << fi.man_bits);
    case Kind::nan:
      return sign | nan_bits(f);
    case Kind::finite:
      break;
  }
  const std::uint64_t hidden = std::uint64_t{1} << (fi.p - 1);
  if (r.M < hidden) return sign | static_cast<std::uint32_t>(r.M);  // subnormal: exponent field 0
  const int biased = r.q + fi.p - 1 + fi.bias;
  return sign | (static_cast<std::uint32_t>(biased) << fi.man_bits) | static_cast<std::uint32_t>(r.M - hidden);
}

double decode(Format f, std::uint32_t bits, bool daz) {
  check_bits_format(f);
  const FormatInfo& fi = info(f);
  if (fi.bits < 32 && (bits >> fi.bits) != 0)
    throw std::invalid_argument("kvconf::decode: bit pattern 0x" + std::to_string(bits) + " is wider than " +
                                std::string(fi.name) + " (" + std::to_string(fi.bits) + " bits)");
  const bool neg = (bits >> (fi.bits - 1)) & 1u;
  const std::uint32_t exp_all = (1u << fi.exp_bits) - 1;
  const std::uint32_t ex = (bits >> fi.man_bits) & exp_all;
  const std::uint32_t man = bits & ((1u << fi.man_bits) - 1);
  double mag;
  if (ex == exp_all && fi.nan == NanEncoding::ieee) {
    mag = (man == 0) ? HUGE_VAL : std::numeric_limits<double>::quiet_NaN();
  } else if (ex == exp_all && man == (1u << fi.man_bits) - 1) {
    mag = std::numeric_limits<double>::quiet_NaN();  // E4M3: S.1111.111
  } else if (ex == 0) {
    mag = daz ? 0.0 : std::ldexp(static_cast<double>(man), fi.emin - fi.man_bits);
  } else {
    mag = std::ldexp(static_cast<double>(man | (1u << fi.man_bits)), static_cast<int>(ex) - fi.bias - fi.man_bits);
  }
  return neg ? -mag : mag;
}

bool representable(Format f, double x) {
  if (std::isnan(x)) return true;
  if (std::isinf(x)) return info(f).has_inf();
  if (f == Format::fp64) return true;
  const double r = round_to(f, x);
  return r == x;
}

}  // namespace kvconf
