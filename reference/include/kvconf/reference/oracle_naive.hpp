// Straightforward evaluations in Boost.Multiprecision mpfr_float at one fixed precision: no exact
// sums, no error bounds, no certification. The independent cross-check of the oracle in its tests
// and the baseline of bench/bench_oracle.cpp. Same conventions as oracle.hpp (masks, heads).
// Its results are NOT certified: exact ties, exactly representable results under directed rounding
// and near-ties can come out wrong. Each call sets Boost's default mpfr_float precision for its
// duration (restored on return), so concurrent calls in several threads are not supported.
#pragma once

#include <span>
#include <vector>

#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::ref::naive {

// The MPFR precision (bits) Boost's mpfr_float uses when asked for at least `bits` bits (Boost sets
// precision in decimal digits, so this is a few bits more).
unsigned boost_bits(unsigned bits);

// q: (n_q, n_heads, d), k: (n_kv, n_kv_heads, d), v: (n_kv, n_kv_heads, d_v) → (n_q, n_heads, d_v),
// the mpfr_float result rounded to `out` by round_mpfr. No input validation.
std::vector<double> attention(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                              const AttentionShape& shape, const AttentionParams& params, Format out,
                              RoundOptions round, unsigned bits);

// scores: (n), -inf = masked → (n).
std::vector<double> softmax(std::span<const double> scores, Format out, RoundOptions round, unsigned bits);

}  // namespace kvconf::ref::naive
