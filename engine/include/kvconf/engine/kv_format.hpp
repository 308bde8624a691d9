// The narrower formats a KV cache may be kept in (fp8 e4m3/e5m2, KIVI's int8/int4 per token and per channel,
// llama.cpp's q8_0/q4_0): the quantize-dequantize round trip of cached rows, and the rule each format's rounding
// step gives (|x − x̂| <= bound per element). One code for both: the kv_injection experiment and the kv_dtype
// scenario's cache store quantize through it, kv_dtype's cached_kv rule bounds a stored cache with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvconf/numerics/format.hpp"

namespace kvconf::engine {

enum class KvFormat : std::uint8_t {
  fp8_e4m3,
  fp8_e5m2,
  int8_token,
  int8_channel,
  int4_token,
  int4_channel,
  q8_0,
  q4_0
};
const char* kv_format_name(KvFormat f);  // "fp8_e4m3", "q8_0", ...
// The formats a cache stored row by row can take (the kv_dtype scenario's kv_format): every one but the per-channel
// ones, which quantize groups of kKvGroupRows rows.
std::optional<KvFormat> parse_kv_format(std::string_view s);  // nullopt for an unknown or per-channel name
std::string kv_format_names_text();  // "fp8_e4m3, fp8_e5m2, int8_token, int4_token, q8_0 or q4_0"
bool per_channel(KvFormat f);
inline constexpr std::size_t kKvGroupRows = 32;  // KIVI's group of tokens for per-channel scales
inline constexpr std::size_t kKvBlock = 32;      // llama.cpp's q8_0 / q4_0 block of values along a row

struct QuantCheck {          // the quantizers' own rule: |x − x̂| <= bound per element
  double worst_ratio = 0.0;  // max |x − x̂| / bound
  double err = 0.0, bound = 0.0;
  double x = 0.0, xq = 0.0;  // the worst element's exact and stored value
  std::size_t worst_at = 0;  // its index among the elements checked
  std::size_t elements = 0;
};

// Rows [r0, r1) of `buf` (row-major, kv_dim values per row, values of `storage`) quantized through f and back to
// `storage` in place (per-channel formats: r0, r1 one complete group). `truncate`: round toward zero (a planted
// fault). `check` records each element against its bound.
void quantize_rows(KvFormat f, std::span<float> buf, std::size_t kv_dim, std::size_t r0, std::size_t r1, Format storage,
                   bool truncate, QuantCheck& check);
// The same rule on a cache another engine stored: rows [r0, r1) of `stored` (values after f's round trip) against
// `exact` (the same rows before it), each element within the bound f's step allows at its exact value (computed as
// quantize_rows computes it: the same block scale, the same saturation).
void within_step(KvFormat f, std::span<const float> exact, std::span<const float> stored, std::size_t kv_dim,
                 std::size_t r0, std::size_t r1, Format storage, QuantCheck& check);

}  // namespace kvconf::engine
