// Fast, correctly rounded scalar operations on floats that hold values of fp16, bf16 or fp32: the
// building blocks of the CPU kernels' inner loops (F16C conversions, native fp32 ops, double FMAs).
// Each agrees bit for bit with the slow reference ops of numerics/arith.hpp (tests/kernels/fast_fp_test.cpp).
// Native fp32 +, −, ×, ÷, sqrt and fmaf are IEEE correctly rounded (SSE, -ffp-contract=off).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#if defined(KVCONF_HAVE_F16C)
#include <immintrin.h>
#endif

#include "kvconf/numerics/format.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::kernels {

// float → fp16 value (RNE, overflow to ±inf, subnormals kept), returned as a float.
inline float round_fp16(float x) {
#if defined(KVCONF_HAVE_F16C)
  return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  return static_cast<float>(round_to(Format::fp16, static_cast<double>(x)));
#endif
}

// float → bf16 value (RNE, overflow to ±inf, NaN stays NaN).
inline float round_bf16(float x) {
  std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  if ((b & 0x7f800000u) == 0x7f800000u) return (b & 0x007fffffu) ? std::bit_cast<float>(b | 0x00400000u) : x;
  b += 0x7fffu + ((b >> 16) & 1u);
  return std::bit_cast<float>(b & 0xffff0000u);
}

// double → float with round-to-odd (Boldo–Melquiond): truncate, and set the last bit when inexact.
// Rounding that float to fp16/bf16 (p <= 22) with RNE is then the correct rounding of the double.
inline float to_float_odd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || std::isnan(d)) return f;
  std::uint32_t b = std::bit_cast<std::uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) b -= 1;  // step the magnitude toward zero
  return std::bit_cast<float>(b | 1u);
}

// float → value of f (fp32: unchanged). f must be fp16, bf16 or fp32.
inline float round_float(Format f, float x) {
  switch (f) {
    case Format::fp16:
      return round_fp16(x);
    case Format::bf16:
      return round_bf16(x);
    default:
      return x;
  }
}

// double → value of f, correctly rounded (RNE). f must be fp16, bf16 or fp32.
inline float round_double(Format f, double x) {
  if (f == Format::fp32) return static_cast<float>(x);
  return round_float(f, to_float_odd(x));
}

// a·b + c rounded once to f (a, b, c values of f). fp32: fmaf; fp16: the double fma is exact or
// correctly rounded with enough margin (notes/numerics.md §4), then round-to-odd keeps it correct;
// bf16: the exact a·b + c via numerics (bf16 accumulation is rare).
float fma_format(Format f, float a, float b, float c);

// fl_f(a + b), fl_f(a · b) for values of f.
inline float add_format(Format f, float a, float b) {
  if (f == Format::fp32) return a + b;
  return round_double(f, static_cast<double>(a) + static_cast<double>(b));  // exact in double
}
inline float mul_format(Format f, float a, float b) {
  if (f == Format::fp32) return a * b;
  return round_double(f, static_cast<double>(a) * static_cast<double>(b));  // exact in double
}

// exp and tanh in fp32: the libm double result rounded to float. Relative error at most
// kExpRelError (libm's < 1 ulp of double, then one fp32 rounding), plus fp32 underflow.
inline constexpr double kExpRelError = 0x1p-24 + 0x1p-51;
inline float exp_f32(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }
inline float tanh_f32(float x) { return static_cast<float>(std::tanh(static_cast<double>(x))); }
// 1/sqrt(x) in fp32 (correctly rounded up to the same kExpRelError-type bound: sqrt and divide in double,
// then one fp32 rounding; the double steps add < 2^-52 relative).
inline float rsqrt_f32(float x) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }

// ---- The kernels' implementation switch and 8-lane (AVX2/F16C) forms of the operations above ----------

// Whether the CPU kernels run their AVX2/FMA/F16C loops (the default where compiled in) or their scalar
// loops, which give identical bits; tests run both. set_simd_enabled(true) has no effect where
// KVCONF_HAVE_F16C is not defined (simd_enabled() stays false). Process-wide; not meant to be flipped while
// kernels run on other threads.
bool simd_enabled();
void set_simd_enabled(bool on);

#if defined(KVCONF_HAVE_F16C)
// 8 floats → fp16 values (RNE, overflow to ±inf, subnormals kept), as floats: round_fp16 per lane.
inline __m256 round_fp16_x8(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 8 floats → bf16 values: round_bf16 per lane, same bits (NaN keeps its payload with the quiet bit set).
inline __m256 round_bf16_x8(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
  const __m256i is_nan = _mm256_andnot_si256(
      _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)), _mm256_setzero_si256()),
      _mm256_cmpeq_epi32(_mm256_and_si256(b, exp_mask), exp_mask));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_and_si256(_mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)),
                                     _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m256i q = _mm256_or_si256(b, _mm256_set1_epi32(0x00400000));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(r, q, is_nan));
}

// fl16(a·b + c) per lane for fp16 values a, b, c, correctly rounded (= fma_format(Format::fp16, ...)):
// a·b is exact in fp32 (22 significant bits, exponent >= −48); TwoSum (Knuth) gives s + e = a·b + c
// exactly with s = fl32(a·b + c); (s, e) is rounded to odd in fp32 (truncate toward zero, set the last
// bit when e != 0) and that to fp16 with RNE, which is the correct rounding because fp32 carries at
// least 2 more bits than fp16 at every magnitude (Boldo & Melquiond, IEEE TC 57(4), 2008).
inline __m256 fma_fp16_x8(__m256 a, __m256 b, __m256 c) {
  const __m256 p = _mm256_mul_ps(a, b);
  const __m256 s = _mm256_add_ps(p, c);
  const __m256 bb = _mm256_sub_ps(s, p);
  const __m256 e = _mm256_add_ps(_mm256_sub_ps(p, _mm256_sub_ps(s, bb)), _mm256_sub_ps(c, bb));
  const __m256i sb = _mm256_castps_si256(s);
  const __m256i nz = _mm256_castps_si256(_mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_NEQ_OQ));
  // s − 1 ulp (toward zero) where the residual points toward zero (signs differ), then the sticky bit.
  const __m256i differ = _mm256_srai_epi32(_mm256_xor_si256(sb, _mm256_castps_si256(e)), 31);
  const __m256i odd =
      _mm256_or_si256(_mm256_add_epi32(sb, _mm256_and_si256(differ, nz)), _mm256_and_si256(nz, _mm256_set1_epi32(1)));
  return round_fp16_x8(_mm256_castsi256_ps(odd));
}
#endif

}  // namespace kvconf::kernels
