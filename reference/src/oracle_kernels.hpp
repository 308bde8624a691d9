// Internal to the oracle: the loops over whole rows that dominate its cost (input validation, K and V to integers,
// exact integer dot products, the level-0 sums Σ_j Ẽ_j V_jc, the condition sums), written to vectorise.
// Each is exact integer arithmetic, or the same IEEE double operations in the same order per element as the scalar
// code it replaced, so no result depends on the instruction set (AVX2 when the host has it: reference/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kvconf/reference/oracle_detail.hpp"

namespace kvconf::ref::detail {

// check_values' fast test (fast_check_values) over a buffer given in pieces, at one fixed point 2^L: L is at least
// the format's smallest subnormal exponent (fixed_point_lsb) and within [-1022, 1022]; it decides for values below
// 2^(L+52).
class FastCheck {
 public:
  FastCheck(Format f, int L);
  void add(const double* x, std::size_t n);
  // true: every value added is finite and representable in the format, and *r = their range_of; false: undecided.
  bool finish(Range* r) const;
  double scale() const { return S_; }  // 2^-L

 private:
  Format f_;
  int L_;
  int hi_fmt_ = 0;         // max_finite < 2^hi_fmt
  bool full_top_ = false;  // every p-bit value below 2^hi_fmt is finite
  double maxf_ = 0, S_ = 1;
  std::uint64_t bad_[4] = {}, t_or_[4] = {}, a_or_[4] = {};  // the vector accumulators between pieces
};
// The smallest subnormal exponent of f: every value of f is a multiple of 2^fixed_point_lsb(f).
int fixed_point_lsb(Format f);
// The exponent hi with max_finite(f) < 2^hi.
int format_hi(Format f);

// The fused decode path's test (oracle_attention_setup.cpp), applied while rows are converted to the integers
// x·2^-L at L = fixed_point_lsb(f): every value must be representable in f and its integer exact with magnitude at
// most 2^31. A value that is not gives some result (never undefined behaviour) and makes finish false.
class ConvertCheck {
 public:
  explicit ConvertCheck(Format f);
  // *D = Σ q[t]·K[t], *A = Σ |q[t]|·|K[t]| for K = k·2^-L, exactly when finish holds and the sums fit int64
  // (|q| < 2^31, qa = |q|).
  void dot_i32(const std::int64_t* q, const std::int64_t* qa, const double* k, std::size_t n, std::int64_t* D,
               std::int64_t* A);
  void to_int(const double* x, std::size_t n, std::int64_t* dst);  // dst[i] = x[i]·2^-L
  void add(const double* x, std::size_t n);                         // the test alone
  // true: every value passed; *bits = the bit length of the largest |integer| (0: all zero).
  bool finish(int* bits) const;

 private:
  Format f_;
  double S_ = 1, maxf_ = 0;
  bool full_top_ = false;
  int hi_fmt_ = 0, L_ = 0;
  bool bad_ = false;         // some value failed
  std::uint64_t x_or_ = 0;   // OR of the values' bits (their low significand bits: at most p significant bits)
  std::uint32_t i_or_ = 0;   // OR of the integers' magnitudes
};

// dst[i] = x[i]·scale, i < n, as integers. Exact when scale = 2^-lo of x's Range (span <= 62);
// fits32: every |x[i]·scale| < 2^31 (span <= 31).
void to_int(const double* x, double scale, std::int64_t* dst, std::size_t n, bool fits32);

// *D = Σ q[t]·k[t], *A = Σ |q[t]|·|k[t]| over t < n, exactly. qa = |q|. Every |q[t]|, |k[t]| < 2^31 and both sums
// fit int64 (the attention oracle's qk64 with spans <= 31).
void dot_i32(const std::int64_t* q, const std::int64_t* qa, const std::int64_t* k, std::size_t n, std::int64_t* D,
             std::int64_t* A);
// dot_i32 with k given as doubles, converted on the way: k[t]·sk (exact integers, |.| < 2^31).
void dot_i32_from_double(const std::int64_t* q, const std::int64_t* qa, const double* k, double sk, std::size_t n,
                         std::int64_t* D, std::int64_t* A);

// N[c] += Σ_{t<m} E[t]·rows[t][c] for c < dv, exactly in int128, and (AV not null) AV[c] += Σ_t |rows[t][c]|, which
// must fit int64. E[t] < 2^63, m <= kEvChunk. fits32: every rows[t][c] is an int32 value (the vectorised path);
// else any values whose products and sums fit int128.
inline constexpr std::size_t kEvChunk = 1024;
void accumulate_ev(const std::uint64_t* E, const std::int64_t* const* rows, std::size_t m, std::size_t dv, bool fits32,
                   i128* N, std::int64_t* AV);

// AV[c] += |row[c]| for c < n.
void add_abs(const std::int64_t* row, std::size_t n, i128* AV);

// The condition sums of one attention row: for each key t < m in order, A[c] += p[t]·|v_tc| and
// B[c] += p[t]·|v_tc − o[c]| (double, round to nearest, in this order), c < dv; v_t = rows[t].
void condition_sums(const double* p, const double* const* rows, std::size_t m, std::size_t dv, const double* o,
                    double* A, double* B);

}  // namespace kvconf::ref::detail
