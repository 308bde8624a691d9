// Format parameter table (IEEE 754-2019 binary16/32/64, bfloat16, OCP 8-bit FP v1.0 E4M3/E5M2).
#include "kvconf/numerics/format.hpp"

#include <cmath>
#include <stdexcept>

namespace kvconf {
namespace {

FormatInfo make(std::string_view name, int exp_bits, int man_bits, NanEncoding nan) {
  FormatInfo f{};
  f.name = name;
  f.bits = 1 + exp_bits + man_bits;
  f.exp_bits = exp_bits;
  f.man_bits = man_bits;
  f.bias = (1 << (exp_bits - 1)) - 1;
  f.p = man_bits + 1;
  f.emin = 1 - f.bias;
  f.nan = nan;
  if (nan == NanEncoding::ieee) {
    // All-ones exponent is reserved for Inf/NaN.
    f.emax = ((1 << exp_bits) - 2) - f.bias;
    f.max_finite = std::ldexp(2.0 - std::ldexp(1.0, -man_bits), f.emax);
  } else {
    // E4M3: the all-ones exponent holds normal numbers except mantissa all ones (NaN),
    // so the largest finite value is 1.110b * 2^8 = 448.
    f.emax = ((1 << exp_bits) - 1) - f.bias;
    f.max_finite = std::ldexp(2.0 - std::ldexp(2.0, -man_bits), f.emax);
  }
  f.min_normal = std::ldexp(1.0, f.emin);
  f.min_subnormal = std::ldexp(1.0, f.emin - man_bits);
  f.unit_roundoff = std::ldexp(1.0, -f.p);
  return f;
}

const FormatInfo kInfo[] = {
    make("fp8_e4m3", 4, 3, NanEncoding::fn_no_inf), make("fp8_e5m2", 5, 2, NanEncoding::ieee),
    make("bf16", 8, 7, NanEncoding::ieee),          make("fp16", 5, 10, NanEncoding::ieee),
    make("fp32", 8, 23, NanEncoding::ieee),         make("fp64", 11, 52, NanEncoding::ieee),
};

}  // namespace

const FormatInfo& info(Format f) {
  const auto i = static_cast<std::size_t>(f);
  if (i >= std::size(kInfo)) throw std::invalid_argument("kvconf::info: unknown Format value");
  return kInfo[i];
}

std::string_view name(Format f) { return info(f).name; }

std::optional<Format> parse_format(std::string_view s) {
  struct Alias {
    std::string_view text;
    Format f;
  };
  static constexpr Alias kAliases[] = {
      {"fp8_e4m3", Format::fp8_e4m3}, {"e4m3", Format::fp8_e4m3}, {"fp8_e5m2", Format::fp8_e5m2},
      {"e5m2", Format::fp8_e5m2},     {"bf16", Format::bf16},     {"bfloat16", Format::bf16},
      {"fp16", Format::fp16},         {"f16", Format::fp16},      {"half", Format::fp16},
      {"fp32", Format::fp32},         {"f32", Format::fp32},      {"float", Format::fp32},
      {"fp64", Format::fp64},         {"f64", Format::fp64},      {"double", Format::fp64},
  };
  for (const auto& a : kAliases)
    if (a.text == s) return a.f;
  return std::nullopt;
}

}  // namespace kvconf
