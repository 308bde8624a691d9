// Correct rounding of exact values into any Format, and bit-pattern encode/decode.
// Every conversion and every emulated operation in kvconf funnels through round_to().
#pragma once

#include <cstdint>

#include "kvconf/numerics/format.hpp"

namespace kvconf {

enum class Rounding : std::uint8_t {
  nearest_even,  // IEEE default (RNE)
  toward_zero,   // RZ: tensor-core fp32 output, truncation
  up,            // toward +inf
  down,          // toward -inf
  to_odd,        // Boldo–Melquiond round-to-odd: the safe intermediate for double rounding
};

struct RoundOptions {
  Rounding mode = Rounding::nearest_even;
  // Flush-to-zero: a result whose rounded magnitude is below the smallest normal becomes a
  // zero of the same sign (nvcc --ftz=true / --use_fast_math). Off by default.
  bool ftz = false;
  // Saturating conversion (OCP FP8 "satfinite"): a finite value that overflows becomes ±max_finite
  // instead of ±inf (or NaN for E4M3, which has no infinity). Infinite inputs stay infinite where
  // the format has infinities, and become ±max_finite in E4M3 when saturating.
  bool saturate = false;
};

// The value x + t·ε, where x is a double and ε > 0 is smaller than half an ulp of x: the exact
// result of an operation whose double-precision rounding is x, with the sign (−1, 0, +1) of the
// residual kept. This is all a correct rounding to any narrower format needs.
struct Tailed {
  double x;
  int tail = 0;
};

// Round an exact value to format f. The result is a double holding a value of f (or ±inf/NaN).
double round_to(Format f, Tailed v, RoundOptions o = {});
inline double round_to(Format f, double x, RoundOptions o = {}) { return round_to(f, Tailed{x, 0}, o); }

// Bit patterns (right-aligned in a uint32_t; fp64 is not supported here, use std::bit_cast).
std::uint32_t encode(Format f, Tailed v, RoundOptions o = {});
inline std::uint32_t encode(Format f, double x, RoundOptions o = {}) { return encode(f, Tailed{x, 0}, o); }
// Exact value of a bit pattern. daz: subnormal inputs read as zero (denormals-are-zero).
// Throws std::invalid_argument if bits has set bits above the format's width.
double decode(Format f, std::uint32_t bits, bool daz = false);

// True if x is exactly representable in f (finite, within range, enough precision), or is ±inf
// in a format with infinities, or NaN.
bool representable(Format f, double x);

// Canonical quiet NaN pattern of a format (sign bit clear).
std::uint32_t nan_bits(Format f);

}  // namespace kvconf
