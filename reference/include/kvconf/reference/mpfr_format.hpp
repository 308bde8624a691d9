// MPFR-side correct rounding into kvconf Formats, independent of numerics/rounding.cpp: MPFR's own
// emin / mpfr_check_range / mpfr_subnormalize machinery (MPFR manual, "mpfr_subnormalize").
// Used as the golden reference in the format tests and for the oracle's final rounding.
#pragma once

#include <mpfr.h>

#include "kvconf/numerics/rounding.hpp"

namespace kvconf::ref {

// MPFR rounding mode for a kvconf Rounding (to_odd has no MPFR mode and throws).
mpfr_rnd_t to_mpfr(Rounding r);

// Round x (any precision) to format f with MPFR rounding rnd; overflow follows o.saturate and the
// format's special values exactly as documented in rounding.hpp; o.ftz flushes subnormal results.
// o.mode == to_odd is emulated as RZ plus "set the last bit if inexact". Returns a double holding
// the rounded value.
double round_mpfr(Format f, mpfr_srcptr x, RoundOptions o = {});

// Reference arithmetic: the operation evaluated by MPFR directly at the format's precision with
// subnormal emulation (not via double). Operands are exact doubles.
enum class Op { add, sub, mul, div, sqrt, fma };
double op_mpfr(Format f, Op op, double a, double b, double c, RoundOptions o = {});

// Scoped change of MPFR's exponent range (restored on destruction). MPFR's exponent convention is
// x = 0.1b... × 2^e, so the format's smallest subnormal 2^(emin - man_bits) has e = emin - man_bits + 1.
class ExponentRange {
 public:
  ExponentRange(mpfr_exp_t emin, mpfr_exp_t emax);
  ~ExponentRange();
  ExponentRange(const ExponentRange&) = delete;
  ExponentRange& operator=(const ExponentRange&) = delete;

 private:
  mpfr_exp_t old_emin_, old_emax_;
};

}  // namespace kvconf::ref
