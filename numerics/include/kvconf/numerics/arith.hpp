// Correctly rounded arithmetic in any Format: +, −, ×, ÷, sqrt and fused multiply-add.
// Operands are values of the format (doubles holding representable numbers); each result is the
// exact result rounded once, in every rounding mode. One exception: fp64 fma is the native std::fma
// and supports only nearest-even without ftz (other options throw std::invalid_argument).
// Special values follow IEEE 754: NaN operands give NaN, sqrt(<0) and 0·inf give NaN, x/0 gives ±inf;
// in E4M3 (no infinities) an infinite result becomes NaN, or ±448 with RoundOptions::saturate.
#pragma once

#include "kvconf/numerics/rounding.hpp"

namespace kvconf {

double add(Format f, double a, double b, RoundOptions o = {});
double sub(Format f, double a, double b, RoundOptions o = {});
double mul(Format f, double a, double b, RoundOptions o = {});
double div(Format f, double a, double b, RoundOptions o = {});
double sqrt(Format f, double a, RoundOptions o = {});
// a·b + c with one rounding.
double fma(Format f, double a, double b, double c, RoundOptions o = {});

// Exact (double result, residual sign) forms used by the ops above. Each is exact for operands
// with at most 26 significant bits (every format but fp64) and no overflow in double.
Tailed exact_sum(double a, double b);            // TwoSum (Knuth)
Tailed exact_product(double a, double b);        // a·b with its FMA residual
Tailed exact_quotient(double a, double b);       // a/b with the sign of a − q·b
Tailed exact_sqrt(double a);                     // sqrt(a) with the sign of a − s²
Tailed exact_fma(double a, double b, double c);  // a·b exact (else std::invalid_argument), then TwoSum with c

}  // namespace kvconf
