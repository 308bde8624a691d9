// Internals of the oracle shared by its translation units and unit-tested on their own: input
// validation, exact int128 fixed point, the proven fixed-point exp, and the certification step.
// Not part of the stable API.
#pragma once

#include <mpfr.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::ref::detail {

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

static_assert(sizeof(long) == 8, "the oracle assumes LP64 (unsigned long holds 64 bits)");

// ---- validation (messages name the function, the argument, the index and the value) ----------

// Throws std::invalid_argument unless size == expected.
void check_size(std::string_view fn, std::string_view arg, std::size_t size, std::size_t expected,
                std::string_view expected_text);
struct Range;
// Throws unless every x[i] is finite and representable in f (allow_neg_inf: -inf passes too), and
// returns range_of(x) (computed in the same pass).
Range check_values(std::string_view fn, std::string_view arg, std::span<const double> x, Format f,
                   bool allow_neg_inf = false);
// check_values' first try, one branch-free (vectorised) pass over x: true when every x[i] is finite and
// representable in f, with *r = range_of(x); false when undecided (a bad value, -inf, fp64, or data too wide for
// one fixed point), and check_values then runs its element-by-element test. Both accept the same values.
bool fast_check_values(std::span<const double> x, Format f, Range* r);
// a·b, throwing std::invalid_argument on overflow.
std::size_t checked_mul(std::string_view fn, std::size_t a, std::size_t b);

// ---- dynamic range of a tensor -----------------------------------------------------------------

// Every non-zero x satisfies 2^lo <= lsb(x) and |x| < 2^hi, so x·2^-lo is an integer of magnitude
// below 2^(hi − lo). All-zero (or empty) tensors give lo = hi = 0.
struct Range {
  int lo = 0;
  int hi = 0;
  int span() const { return hi - lo; }
};
Range range_of(std::span<const double> x);
// ceil(log2(n)) for n >= 1; 0 for n <= 1.
int ceil_log2(std::uint64_t n);
// x·2^-lo as an integer (exact by construction of Range; requires span <= 62).
inline std::int64_t to_fixed(double x, int lo);
// The multiplier 2^-lo as a double, or 0 when it is not a normal double (then use to_fixed).
inline double fixed_scale(int lo) { return (lo >= -1022 && lo <= 1022) ? __builtin_ldexp(1.0, -lo) : 0.0; }

// ---- int128 <-> MPFR / double --------------------------------------------------------------------

// r = v exactly (r must have at least 128 bits of precision).
void set_i128(mpfr_ptr r, i128 v);
// v·2^e rounded to double in direction rnd (via MPFR; exact input).
double i128_to_double(i128 v, int e, mpfr_rnd_t rnd);

// ---- exact dot products ------------------------------------------------------------------------

// True if an n-term dot of tensors with ranges a and b is exact in int128 fixed point: both sides fit
// int64 and |Σ| and Σ|·| stay below 2^125 (so differences of two such sums fit too).
bool int_dot_fits(const Range& a, const Range& b, std::size_t n);
// x·2^-lo for every element (requires range_of(x).span() <= 62 and lo = range_of(x).lo).
std::vector<std::int64_t> to_fixed_all(std::span<const double> x, int lo);
// Precision at which an n-term sum of products of such tensors is exact.
mpfr_prec_t exact_sum_prec(const Range& a, const Range& b, std::size_t n);
// D·2^E correctly rounded to f.
double round_i128(Format f, RoundOptions o, i128 D, int E);

// Exact dot products through MPFR: exact products (106 bits) summed by mpfr_sum. Reuses its buffers.
struct ExactDot {
  std::vector<Mpfr> prods;
  std::vector<mpfr_ptr> ptrs;
  // r = Σ_i x[i·sx]·y[i·sy] rounded to prec(r) (exact when prec(r) >= exact_sum_prec);
  // abs_up (optional) = Σ|x y| rounded up to double.
  void compute(mpfr_ptr r, const double* x, std::size_t sx, const double* y, std::size_t sy, std::size_t n,
               double* abs_up);
};

// ---- proven fixed-point exp --------------------------------------------------------------------

// round(2^F · 2^-y) for y >= 0 given as an MPFR number with |y − y_true| <= 2^-120 and 1 <= F <= 62.
// |result − 2^F·2^-y_true| <= kFixedExpEta (derivation in oracle_common.cpp; about 1.93 is
// proven, the constant keeps a margin). y >= F + 2 gives 0. tmp: scratch, precision >= prec(y).
inline constexpr double kFixedExpEta = 3.0;
std::uint64_t fixed_exp2_neg(mpfr_srcptr y, int F, mpfr_ptr tmp);
// The same from y = k + f64·2^-64 (k < F + 2; f64 truncated, input error <= 2^-120 beyond that).
std::uint64_t fixed_exp2_neg_parts(std::uint64_t k, std::uint64_t f64, int F);

// ŷ = a·KL for integers 0 <= a < 2^127 and a constant KL > 0, as k + f64·2^-64 without MPFR:
// KL is truncated to a 128-bit mantissa K·2^eK (relative error <= 2^-127) and a·K is formed exactly
// in 256 bits, so y − ŷ ∈ [0, y·2^-126 + 2^-64] (below 2^-120 + 2^-64 for y < 64).
struct YScale {
  u128 K = 0;         // 0: KL = 0
  int sh = 0;         // ŷ·2^64 = floor(a·K / 2^sh)
  bool huge = false;  // KL >= 2^63: every a >= 1 gives ŷ >= 2^63
};
YScale make_yscale(mpfr_srcptr KL);
// false when ŷ >= limit (then 2^-ŷ is negligible); else sets k and f64.
bool apply_yscale(const YScale& s, u128 a, std::uint64_t limit, std::uint64_t* k, std::uint64_t* f64);

// log2(e) to 256 bits (RN), shared and immutable after first use.
mpfr_srcptr log2e_256();

// ---- certification -------------------------------------------------------------------------------

struct Rounded {
  double value = 0.0;
  bool ok = false;
};
// lo <= true <= hi, with lo < true when lo_open and true < hi when hi_open. ok iff every value of
// the bracket rounds (in f, with o) to the same result. An open end is replaced by its one-sided limit
// (the rounding of a point 64 bits of precision inside it, which is never a rounding boundary), so
// e.g. [0, tiny] with lo_open certifies, and a probability known to lie just below 1 rounds down
// under round-down.
Rounded certify(Format f, RoundOptions o, mpfr_srcptr lo, mpfr_srcptr hi, bool lo_open = false, bool hi_open = false);
// The same test on a double bracket (numerics' round_to): a cheap first try for narrow formats.
Rounded certify_d(Format f, RoundOptions o, double lo, double hi);
// Correct rounding of the exact rational num/den (den >= 1; num exact), by a Ziv loop that always
// terminates (see oracle_common.cpp).
double round_quotient(Format f, RoundOptions o, mpfr_srcptr num, unsigned long den);

// ---- inline definitions --------------------------------------------------------------------------

inline std::int64_t to_fixed(double x, int lo) {
  // ldexp is exact here: the result is an integer below 2^62, a double with <= 53 significant bits.
  return static_cast<std::int64_t>(__builtin_ldexp(x, -lo));
}

}  // namespace kvconf::ref::detail
