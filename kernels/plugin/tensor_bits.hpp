// Values crossing to a plugin: kvconf holds them as floats (holding values of fp16/bf16/fp32), a plugin sees the
// format's bit patterns (IEEE binary16, bfloat16, binary32), compact row-major. Conversions are correctly rounded
// (exact for values of the format; NaN stays NaN).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kvconf/numerics/format.hpp"

namespace kvconf::kernels::plugin_bits {

std::size_t bytes_per(Format f);  // 4 for fp32, 2 for fp16 and bf16

// The bit patterns of v in format f.
std::vector<std::byte> encode(Format f, std::span<const float> v);
// bytes (v.size() values of format f) → floats.
void decode(Format f, std::span<const std::byte> bytes, std::span<float> v);

}  // namespace kvconf::kernels::plugin_bits
