// Number formats kvconf emulates: their parameters (precision, exponent range, special values).
// A value "in format F" is carried as a double holding exactly a number representable in F;
// storage keeps bit patterns (see storage.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvconf {

enum class Format : std::uint8_t { fp8_e4m3, fp8_e5m2, bf16, fp16, fp32, fp64 };

// How a format encodes NaN (and whether it has infinities).
enum class NanEncoding : std::uint8_t {
  ieee,       // exponent all ones: mantissa 0 = infinity, mantissa != 0 = NaN
  fn_no_inf,  // OCP E4M3 ("fn"): no infinities; only S.1111.111 is NaN, S.1111.xxx (xxx != 111) are normal
};

struct FormatInfo {
  std::string_view name;  // "fp16", "bf16", "fp8_e4m3", ...
  int bits;               // storage width
  int exp_bits;
  int man_bits;  // stored fraction bits
  int bias;
  int p;                 // precision in bits, hidden bit included (man_bits + 1)
  int emin;              // exponent of the smallest normal number: 2^emin
  int emax;              // exponent of the largest finite binade
  double max_finite;     // largest finite value
  double min_normal;     // 2^emin
  double min_subnormal;  // 2^(emin - man_bits)
  double unit_roundoff;  // u = 2^-p (round to nearest)
  NanEncoding nan;
  bool has_inf() const { return nan == NanEncoding::ieee; }
};

const FormatInfo& info(Format f);

// All formats, narrowest first.
inline constexpr Format kAllFormats[] = {Format::fp8_e4m3, Format::fp8_e5m2, Format::bf16,
                                         Format::fp16,     Format::fp32,     Format::fp64};

std::string_view name(Format f);
// Parses "fp16", "f16", "half", "bf16", "fp8_e4m3", "e4m3", "fp8_e5m2", "e5m2", "fp32", "f32", "fp64".
std::optional<Format> parse_format(std::string_view s);

}  // namespace kvconf
