// Oracle internals shared by dot/projection, softmax and attention: validation, dynamic ranges,
// int128 <-> MPFR, the proven fixed-point exp, and the certification (Ziv) step.
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace kvconf::ref::detail {
namespace {

// For finite x != 0: 2^lsb is the weight of x's lowest set significand bit and |x| < 2^hi.
struct Bits {
  int lsb, hi;
};
inline Bits bits_of(double x) {
  const auto b = std::bit_cast<std::uint64_t>(x);
  const int E = static_cast<int>((b >> 52) & 0x7ff);
  std::uint64_t M = b & ((std::uint64_t{1} << 52) - 1);
  if (E == 0) return {-1074 + __builtin_ctzll(M), 64 - __builtin_clzll(M) - 1074};  // subnormal
  M |= std::uint64_t{1} << 52;
  return {E - 1075 + __builtin_ctzll(M), E - 1022};
}

}  // namespace

// ---- validation -------------------------------------------------------------------------------

void check_size(std::string_view fn, std::string_view arg, std::size_t size, std::size_t expected,
                std::string_view expected_text) {
  if (size == expected) return;
  throw std::invalid_argument(std::string(fn) + ": " + std::string(arg) + " has " + std::to_string(size) +
                              " values, expected " + std::string(expected_text) + " = " + std::to_string(expected));
}

Range check_values(std::string_view fn, std::string_view arg, std::span<const double> x, Format f, bool allow_neg_inf) {
  if (Range fast; fast_check_values(x, f, &fast)) return fast;
  const FormatInfo& fi = info(f);
  const int min_lsb = fi.emin - fi.man_bits;
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    if (v == 0.0) continue;
    // Fast sufficient test: a finite binary number is in the format iff |v| <= max_finite, its
    // lowest bit is not below the smallest subnormal's, and it has at most p significant bits.
    if (std::isfinite(v)) {
      const Bits b = bits_of(v);
      lo = std::min(lo, b.lsb);
      hi = std::max(hi, b.hi);
      if (std::fabs(v) <= fi.max_finite && b.lsb >= min_lsb && b.hi - b.lsb <= fi.p) continue;
      if (representable(f, v)) continue;
    }
    if (allow_neg_inf && std::isinf(v) && v < 0) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    std::string why;
    if (std::isnan(v))
      why = " is NaN (the oracle certifies finite inputs only)";
    else if (std::isinf(v))
      why = allow_neg_inf ? " is +inf (only -inf, meaning masked, is allowed)"
                          : " is infinite (the oracle certifies finite inputs only)";
    else
      why = " is not representable in " + std::string(name(f));
    throw std::invalid_argument(std::string(fn) + ": " + std::string(arg) + "[" + std::to_string(i) + "] = " + buf +
                                why);
  }
  if (lo > hi) return {0, 0};  // all zero (or masked)
  return {lo, hi};
}

std::size_t checked_mul(std::string_view fn, std::size_t a, std::size_t b) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a)
    throw std::invalid_argument(std::string(fn) + ": shape product overflows");
  return a * b;
}

// ---- ranges -----------------------------------------------------------------------------------

Range range_of(std::span<const double> x) {
  bool any = false;
  int lo = 0, hi = 0;
  for (const double v : x) {
    if (v == 0.0 || !std::isfinite(v)) continue;
    const Bits b = bits_of(v);
    if (!any) {
      lo = b.lsb;
      hi = b.hi;
      any = true;
    } else {
      lo = std::min(lo, b.lsb);
      hi = std::max(hi, b.hi);
    }
  }
  return {lo, hi};
}

int ceil_log2(std::uint64_t n) {
  if (n <= 1) return 0;
  return 64 - __builtin_clzll(n - 1);
}

// ---- int128 -----------------------------------------------------------------------------------

void set_i128(mpfr_ptr r, i128 v) {
  if (v >= std::numeric_limits<long>::min() && v <= std::numeric_limits<long>::max()) {
    mpfr_set_si(r, static_cast<long>(v), MPFR_RNDN);
    return;
  }
  const bool neg = v < 0;
  const u128 m = neg ? -static_cast<u128>(v) : static_cast<u128>(v);
  mpfr_set_ui(r, static_cast<unsigned long>(m >> 64), MPFR_RNDN);
  mpfr_mul_2ui(r, r, 64, MPFR_RNDN);
  mpfr_add_ui(r, r, static_cast<unsigned long>(m), MPFR_RNDN);  // exact: precision >= 128
  if (neg) mpfr_neg(r, r, MPFR_RNDN);
}

double i128_to_double(i128 v, int e, mpfr_rnd_t rnd) {
  Mpfr t(128);
  set_i128(t.get(), v);
  mpfr_mul_2si(t.get(), t.get(), e, MPFR_RNDN);
  return mpfr_get_d(t.get(), rnd);
}

// ---- fixed-point exp ----------------------------------------------------------------------------
//
// Computes Ẽ = round(2^F · 2^-y) for y in [0, F + 2), F <= 62, with a proven error bound.
// Write y = k + f (k = floor(ŷ) integer, f in [0, 1) taken to 64 bits by truncation: f64 = floor(f·2^64)),
// f = i/256 + g with i = the top 8 bits of f64 and g in [0, 2^-8) the low 56 bits.
//   2^-y = 2^-k · 2^-(i/256) · 2^-g.
// Units: "u63" = 2^-63.
// - T[i] = RN(2^63 · 2^-(i/256)) from MPFR: error <= 0.5 u63 (+2^-137 from MPFR's own rounding).
// - 2^-g = Σ_k (−1)^k a_k g^k, a_k = ln2^k / k!. Degree 6; remainder a_7 g^7 <= 2^-72 = 2^-9 u63.
//   A[k] = RN(2^63 a_k) (error <= 0.5 u63, A[0] = 2^63 exact). Horner from the top, all partial
//   results positive (g < 2^-8, a_{k+1} < a_k): t_6 = A6, t_k = A_k − floor(t_{k+1}·G / 2^64) where
//   G = g·2^64 < 2^56. Each step adds <= 1 u63 (truncation) + 0.5 u63 (A_k); earlier errors are
//   damped by g < 2^-8: total <= 1 + (1.5)(2^-8)/(1 − 2^-8) + 2^-9 < 1.01 u63 (A[0] exact).
// - f truncation to 64 bits and the input error |ŷ − y| <= 2^-120 change 2^-g by a relative
//   <= ln2·(2^-64 + 2^-120): <= 0.35 u63.
//   So |t_0 − 2^63·2^-g_true| <= 1.36 u63.
// - M = floor(T[i]·t_0 / 2^63): error <= 0.5 (T) + 1.36 (t_0) + 1 (floor) + (cross term < 2^-60)
//   = 2.86 u63 against 2^63 · 2^-f_true.
// - Ẽ = round-half-up(M / 2^s), s = 63 − F + k >= 1: error <= 2.86·2^-s + 0.5 <= 1.93 units of 2^-F.
// The constant kFixedExpEta = 3 keeps a margin over 1.93; oracle_detail_test measures the error.
namespace {

struct ExpTables {
  std::uint64_t T[256];
  std::uint64_t A[7];
  Mpfr log2e{256};
  ExpTables() {
    Mpfr x(256), y(256);
    for (int i = 0; i < 256; ++i) {
      mpfr_set_si(x.get(), -i, MPFR_RNDN);
      mpfr_div_ui(x.get(), x.get(), 256, MPFR_RNDN);  // exact: i/256 is dyadic
      mpfr_exp2(y.get(), x.get(), MPFR_RNDN);
      mpfr_mul_2ui(y.get(), y.get(), 63, MPFR_RNDN);
      T[i] = mpfr_get_ui(y.get(), MPFR_RNDN);
    }
    mpfr_const_log2(x.get(), MPFR_RNDN);
    mpfr_set_ui(y.get(), 1, MPFR_RNDN);
    for (int k = 0; k < 7; ++k) {
      // y = ln2^k / k!
      Mpfr z(256);
      mpfr_mul_2ui(z.get(), y.get(), 63, MPFR_RNDN);
      A[k] = mpfr_get_ui(z.get(), MPFR_RNDN);
      mpfr_mul(y.get(), y.get(), x.get(), MPFR_RNDN);
      mpfr_div_ui(y.get(), y.get(), static_cast<unsigned long>(k) + 1, MPFR_RNDN);
    }
    // log2(e) = 1 / ln 2
    Mpfr l(300);
    mpfr_const_log2(l.get(), MPFR_RNDN);
    mpfr_ui_div(log2e.get(), 1, l.get(), MPFR_RNDN);
  }
};

const ExpTables& tables() {
  static const ExpTables t;
  return t;
}

}  // namespace

mpfr_srcptr log2e_256() { return tables().log2e.get(); }

std::uint64_t fixed_exp2_neg(mpfr_srcptr y, int F, mpfr_ptr tmp) {
  if (mpfr_zero_p(y)) return std::uint64_t{1} << F;
  if (mpfr_cmp_ui(y, static_cast<unsigned long>(F + 2)) >= 0) return 0;
  const unsigned long k = mpfr_get_ui(y, MPFR_RNDZ);  // floor (y >= 0)
  mpfr_sub_ui(tmp, y, k, MPFR_RNDN);                  // exact: tmp has y's precision
  mpfr_mul_2ui(tmp, tmp, 64, MPFR_RNDN);
  return fixed_exp2_neg_parts(k, mpfr_get_ui(tmp, MPFR_RNDZ), F);
}

std::uint64_t fixed_exp2_neg_parts(std::uint64_t k, std::uint64_t f64, int F) {
  if (k >= static_cast<std::uint64_t>(F) + 2) return 0;
  const ExpTables& tb = tables();
  const unsigned i = static_cast<unsigned>(f64 >> 56);
  const std::uint64_t G = f64 & ((std::uint64_t{1} << 56) - 1);
  std::uint64_t t = tb.A[6];
  for (int j = 5; j >= 0; --j) t = tb.A[j] - static_cast<std::uint64_t>((static_cast<u128>(t) * G) >> 64);
  const u128 M = (static_cast<u128>(tb.T[i]) * t) >> 63;                        // <= 2^63
  const unsigned s = static_cast<unsigned>(63 - F) + static_cast<unsigned>(k);  // 1 <= s <= 64
  return static_cast<std::uint64_t>((M + (static_cast<u128>(1) << (s - 1))) >> s);
}

YScale make_yscale(mpfr_srcptr KL) {
  YScale s;
  if (mpfr_zero_p(KL)) return s;
  const long e = mpfr_get_exp(KL);  // KL = 0.1xxx·2^e
  if (e >= 64) {
    s.huge = true;
    return s;
  }
  Mpfr t(mpfr_get_prec(KL) + 8), u(mpfr_get_prec(KL) + 8);
  mpfr_mul_2si(t.get(), KL, 64 - e, MPFR_RNDN);  // in [2^63, 2^64)
  const std::uint64_t hi = mpfr_get_ui(t.get(), MPFR_RNDZ);
  mpfr_sub_ui(u.get(), t.get(), hi, MPFR_RNDN);
  mpfr_mul_2ui(u.get(), u.get(), 64, MPFR_RNDN);
  const std::uint64_t lo = mpfr_get_ui(u.get(), MPFR_RNDZ);
  s.K = (static_cast<u128>(hi) << 64) | lo;  // K = floor(KL·2^(128−e)), KL ≈ K·2^(e−128)
  s.sh = static_cast<int>(64 - e);           // ŷ·2^64 = a·K·2^(e−128+64)
  return s;
}

bool apply_yscale(const YScale& s, u128 a, std::uint64_t limit, std::uint64_t* k, std::uint64_t* f64) {
  if (a == 0 || s.K == 0) {
    *k = 0;
    *f64 = 0;
    return true;
  }
  if (s.huge) return false;
  // 256-bit product a·K in limbs L[0..3] (little-endian), L[4..7] = 0 for the shift below.
  const std::uint64_t a0 = static_cast<std::uint64_t>(a), a1 = static_cast<std::uint64_t>(a >> 64);
  const std::uint64_t k0 = static_cast<std::uint64_t>(s.K), k1 = static_cast<std::uint64_t>(s.K >> 64);
  const u128 p00 = static_cast<u128>(a0) * k0, p01 = static_cast<u128>(a0) * k1;
  const u128 p10 = static_cast<u128>(a1) * k0, p11 = static_cast<u128>(a1) * k1;
  const u128 mid = (p00 >> 64) + static_cast<std::uint64_t>(p01) + static_cast<std::uint64_t>(p10);
  const u128 mid2 = (mid >> 64) + (p01 >> 64) + (p10 >> 64) + static_cast<std::uint64_t>(p11);
  const std::uint64_t L[8] = {static_cast<std::uint64_t>(p00),
                              static_cast<std::uint64_t>(mid),
                              static_cast<std::uint64_t>(mid2),
                              static_cast<std::uint64_t>((mid2 >> 64) + (p11 >> 64)),
                              0,
                              0,
                              0,
                              0};
  // r = bits [sh, sh + 256) of the product, as four limbs (the product has 256 bits).
  if (s.sh >= 256) {
    *k = 0;
    *f64 = 0;
    return true;
  }
  const int w = s.sh / 64, b = s.sh % 64;
  std::uint64_t r[4];
  for (int t = 0; t < 4; ++t) r[t] = b == 0 ? L[w + t] : (L[w + t] >> b) | (L[w + t + 1] << (64 - b));
  if ((r[2] | r[3]) != 0 || r[1] >= limit) return false;
  *k = r[1];
  *f64 = r[0];
  return true;
}

// ---- certification ------------------------------------------------------------------------------

static bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The one-sided limit of rounding at x: the rounding of x moved by one unit at precision prec(x) + 64.
// That point has more than 64 significant bits below x's last one, so it is neither a representable
// value nor a midpoint of any format (all have <= 54 bits, or are multiples of a subnormal quantum far
// above its last bit), and no boundary lies between it and x.
static double inner_limit(Format f, RoundOptions o, mpfr_srcptr x, bool up) {
  Mpfr t(std::max<mpfr_prec_t>(mpfr_get_prec(x), 64) + 64);
  mpfr_set(t.get(), x, MPFR_RNDN);  // exact
  if (up)
    mpfr_nextabove(t.get());
  else
    mpfr_nextbelow(t.get());
  return round_mpfr(f, t.get(), o);
}

Rounded certify(Format f, RoundOptions o, mpfr_srcptr lo, mpfr_srcptr hi, bool lo_open, bool hi_open) {
  const double a = lo_open ? inner_limit(f, o, lo, true) : round_mpfr(f, lo, o);
  const double b = hi_open ? inner_limit(f, o, hi, false) : round_mpfr(f, hi, o);
  return {b, same(a, b)};
}

Rounded certify_d(Format f, RoundOptions o, double lo, double hi) {
  const double a = round_to(f, lo, o);
  const double b = round_to(f, hi, o);
  return {b, same(a, b)};
}

// num/den is an exact rational q. If q is exact at precision P, lo = hi = q and it certifies.
// Otherwise lo < q < hi are consecutive P-bit numbers and no rounding boundary of f (a number of
// <= 54 significant bits, or a multiple of a subnormal quantum) lies strictly between them; the
// bracket can fail only when lo or hi is itself a boundary, and doubling P moves both ends strictly
// inside, so the loop ends within a few doublings.
double round_quotient(Format f, RoundOptions o, mpfr_srcptr num, unsigned long den) {
  mpfr_prec_t P = mpfr_get_prec(num) + 64;
  for (int iter = 0; iter < 16; ++iter, P *= 2) {
    Mpfr lo(P), hi(P);
    mpfr_div_ui(lo.get(), num, den, MPFR_RNDD);
    mpfr_div_ui(hi.get(), num, den, MPFR_RNDU);
    const Rounded r = certify(f, o, lo.get(), hi.get());
    if (r.ok) return r.value;
  }
  throw std::logic_error("kvconf::ref::round_quotient: failed to certify an exact quotient");
}

}  // namespace kvconf::ref::detail
