// The KV-cache perturbations of the kv_injection experiment (seed 002; KIVI; llama.cpp q8_0/q4_0), applied to rows
// of one layer's K or V buffer (rows × kv_dim, values in the storage format) as a cache that perturbs on store would:
// noise relative to each value's magnitude, absolute normal noise, sign flips, and quantize-dequantize round trips.
// Each quantizer also returns, per element, the bound its own rounding step allows (QuantizerWithinStep); the
// quantizers themselves are the KV cache formats of kvconf/engine/kv_format.hpp (the kv_dtype scenario's too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvconf/engine/kv_format.hpp"
#include "kvconf/numerics/format.hpp"

namespace kvconf::protocol::experiments {

enum class Perturb {
  uniform_rel,
  normal_abs,
  sign_flip,
  fp8_e4m3,
  fp8_e5m2,
  int8_token,
  int8_channel,
  int4_token,
  int4_channel,
  q8_0,
  q4_0
};

struct Variant {
  Perturb kind;
  double amplitude = 0.0;    // uniform_rel: a of x·(1 + a·U(−1,1)); normal_abs: σ; sign_flip: probability; else 0
  std::string name() const;  // "uniform_rel:0.000488", "int8_channel", ...
  std::string family() const;  // "uniform_rel", "normal_abs", "sign_flip", "quantization"
  bool per_channel() const;    // quantized in complete groups of kGroupRows rows (KIVI's key quantization)
  bool quantizer() const;
};
inline constexpr std::size_t kGroupRows = engine::kKvGroupRows;  // KIVI's group of tokens for per-channel scales

// The variants kv_injection runs for a model stored in `storage` (the uniform amplitudes start at its unit roundoff).
std::vector<Variant> injection_variants(Format storage);

using QuantCheck = engine::QuantCheck;  // the quantizers' own rule: |x − x̂| <= bound per element

// Perturbs rows [r0, r1) of `buf` (row-major, kv_dim values per row) in place; results rounded to `storage`.
// `rng` is the variant's stream (advanced). `truncate`: quantizers round toward zero (a planted fault).
void perturb_rows(const Variant& v, std::span<float> buf, std::size_t kv_dim, std::size_t r0, std::size_t r1,
                  Format storage, std::uint64_t& rng, double scale, bool truncate, QuantCheck& check);

}  // namespace kvconf::protocol::experiments
