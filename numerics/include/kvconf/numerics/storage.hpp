// Storage types that keep bit patterns: Fp16, Bf16, Fp8E4M3, Fp8E5M2 (fp32/fp64 are float/double).
// They convert with correct rounding and do no arithmetic of their own: arithmetic is arith.hpp,
// done on decoded values, never on compiler _Float16/__bf16 types (notes/numerics.md §4.2).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kvconf/numerics/rounding.hpp"

namespace kvconf {

template <Format F>
struct Stored {
  static constexpr Format format = F;
  using Bits = std::conditional_t<(F == Format::fp8_e4m3 || F == Format::fp8_e5m2), std::uint8_t, std::uint16_t>;
  Bits bits = 0;

  static Stored from_bits(Bits b) { return Stored{b}; }
  static Stored from(double x, RoundOptions o = {}) { return Stored{static_cast<Bits>(encode(F, x, o))}; }
  double value() const { return decode(F, bits); }
  friend bool operator==(Stored a, Stored b) { return a.bits == b.bits; }  // bitwise, not IEEE equality
};

using Fp16 = Stored<Format::fp16>;
using Bf16 = Stored<Format::bf16>;
using Fp8E4M3 = Stored<Format::fp8_e4m3>;
using Fp8E5M2 = Stored<Format::fp8_e5m2>;

static_assert(sizeof(Fp16) == 2 && sizeof(Bf16) == 2 && sizeof(Fp8E4M3) == 1 && sizeof(Fp8E5M2) == 1);

}  // namespace kvconf
