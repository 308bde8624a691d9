// The KV cache's narrower formats (kv_format.hpp). KIVI (Liu et al. 2024) quantizes keys per channel over groups of
// tokens and values per token, asymmetric (min/max with a zero point); llama.cpp's q8_0 stores blocks of 32 as int8
// with one fp16 scale d = amax/127, q4_0 as 4-bit (q − 8)·d with d = (the value of largest magnitude)/(−8), fp16
// scale (ggml-quants' block layouts, facts only); fp8 rounds to nearest with saturation (vLLM's fp8 cache).
// quantize_rows and within_step run the same loops: the bound of each element comes from its exact value and its
// block (as quantized), and the stored value is either computed here or the one another engine stored.
#include "kvconf/engine/kv_format.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/bounds.hpp"

namespace kvconf::engine {
namespace {

constexpr std::array<const char*, 8> kNames = {"fp8_e4m3",   "fp8_e5m2",     "int8_token", "int8_channel",
                                               "int4_token", "int4_channel", "q8_0",       "q4_0"};

// Where the values come from and go: x the exact values (stride apart), `given` (may be null) the values another
// engine stored for them, `out` (may be null) where the round trip's values are written.
struct Elems {
  const float* x;
  const float* given;
  float* out;
  std::size_t n, stride;
  float at(std::size_t i) const { return x[i * stride]; }
};

double rnd(double x, bool truncate) { return truncate ? std::trunc(x) : std::nearbyint(x); }

// One storage rounding's bound at |x̂| (round to nearest: u·|exact| <= u/(1−u)·|x̂|, plus half the subnormal spacing).
double storage_bound(Format f, double xq) {
  const double u = ref::unit_roundoff(f);
  return u / (1.0 - u) * std::fabs(xq) + ref::underflow_unit(f);
}

void record(QuantCheck& c, double x, double xq, double bound) {
  const double err = std::fabs(x - xq);
  const double r = bound > 0.0 ? err / bound : (err == 0.0 ? 0.0 : INFINITY);
  if (r > c.worst_ratio || c.elements == 0)
    c.worst_ratio = std::max(c.worst_ratio, r), c.err = err, c.bound = bound, c.x = x, c.xq = xq,
    c.worst_at = c.elements;
  ++c.elements;
}

// Element i: its computed round trip `xq` (stored in storage format) or the given one, checked against the bound
// `step` (the format's own step at the exact value) plus the storage rounding at the stored value.
void finish(const Elems& e, std::size_t i, double xq, double step, Format st, QuantCheck& c) {
  xq = e.given ? double(e.given[i * e.stride]) : round_to(st, xq);
  record(c, e.at(i), xq, step + storage_bound(st, xq));
  if (e.out) e.out[i * e.stride] = static_cast<float>(xq);
}

// Asymmetric b-bit quantization (KIVI): scale = (max − min)/(2^b − 1).
void int_asym(const Elems& e, int bits, Format st, bool truncate, QuantCheck& c) {
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t i = 0; i < e.n; ++i) lo = std::min(lo, double(e.at(i))), hi = std::max(hi, double(e.at(i)));
  const double levels = std::ldexp(1.0, bits) - 1.0, scale = (hi - lo) / levels;
  for (std::size_t i = 0; i < e.n; ++i) {
    const double q = scale > 0.0 ? std::clamp(rnd((e.at(i) - lo) / scale, truncate), 0.0, levels) : 0.0;
    finish(e, i, lo + q * scale, scale / 2.0 * (1.0 + 1e-12), st, c);
  }
}

// llama.cpp q8_0 (bits 8) or q4_0 (bits 4) over one block, fp16 scale.
void q_block(const Elems& e, int bits, Format st, bool truncate, QuantCheck& c) {
  double amax = 0.0, maxv = 0.0;
  for (std::size_t i = 0; i < e.n; ++i)
    if (std::fabs(double(e.at(i))) > amax) amax = std::fabs(double(e.at(i))), maxv = e.at(i);
  const double d = round_to(Format::fp16, bits == 8 ? amax / 127.0 : maxv / -8.0);
  const double u16 = ref::unit_roundoff(Format::fp16);
  for (std::size_t i = 0; i < e.n; ++i) {
    double xq = 0.0, step = 0.0;
    if (d != 0.0) {
      if (bits == 8) {
        xq = std::clamp(rnd(e.at(i) / d, truncate), -127.0, 127.0) * d;
        step = std::fabs(d) * (0.5 + 127.0 * u16 * 2.0);
      } else {
        const double r = e.at(i) / d + 8.0;
        xq = (std::clamp(rnd(r, truncate), 0.0, 15.0) - 8.0) * d;
        // Half a step, but a whole one where the top clamps at 7d (judged with margin: ggml picks q with the fp32
        // scale, dequantises with the fp16 one).
        step = std::fabs(d) * ((r >= 15.5 - 16.0 * u16 ? 1.0 : 0.5) + 8.0 * u16 * 2.0);
      }
    }
    finish(e, i, xq, step, st, c);
  }
}

void fp8(const Elems& e, Format f8, Format st, bool truncate, QuantCheck& c) {
  RoundOptions o;
  o.saturate = true;
  if (truncate) o.mode = Rounding::toward_zero;
  const double max8 = info(f8).max_finite;
  for (std::size_t i = 0; i < e.n; ++i) {
    const double x = e.at(i), over = std::max(0.0, std::fabs(x) - max8);  // saturation
    finish(e, i, round_to(f8, x, o), ref::unit_roundoff(f8) * std::fabs(x) + ref::underflow_unit(f8) + over, st, c);
  }
}

// Rows [r0, r1) (kvd values each) of the exact values `x`, as `e` directs.
void rows(KvFormat f, const float* x, const float* given, float* out, std::size_t kvd, std::size_t r0, std::size_t r1,
          Format st, bool truncate, QuantCheck& c) {
  const std::size_t off = r0 * kvd, n = (r1 - r0) * kvd;
  const auto at = [&](std::size_t o, std::size_t cnt, std::size_t stride) {
    return Elems{x + o, given ? given + o : nullptr, out ? out + o : nullptr, cnt, stride};
  };
  switch (f) {
    case KvFormat::fp8_e4m3:
    case KvFormat::fp8_e5m2:
      fp8(at(off, n, 1), f == KvFormat::fp8_e4m3 ? Format::fp8_e4m3 : Format::fp8_e5m2, st, truncate, c);
      return;
    case KvFormat::int8_token:
    case KvFormat::int4_token:
      for (std::size_t r = r0; r < r1; ++r)
        int_asym(at(r * kvd, kvd, 1), f == KvFormat::int8_token ? 8 : 4, st, truncate, c);
      return;
    case KvFormat::int8_channel:
    case KvFormat::int4_channel:  // r0, r1: one complete group of rows
      for (std::size_t j = 0; j < kvd; ++j)
        int_asym(at(off + j, r1 - r0, kvd), f == KvFormat::int8_channel ? 8 : 4, st, truncate, c);
      return;
    case KvFormat::q8_0:
    case KvFormat::q4_0:
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t b = 0; b < kvd; b += kKvBlock)
          q_block(at(r * kvd + b, std::min(kKvBlock, kvd - b), 1), f == KvFormat::q8_0 ? 8 : 4, st, truncate, c);
      return;
  }
}

}  // namespace

const char* kv_format_name(KvFormat f) { return kNames[static_cast<std::size_t>(f)]; }

bool per_channel(KvFormat f) { return f == KvFormat::int8_channel || f == KvFormat::int4_channel; }

std::optional<KvFormat> parse_kv_format(std::string_view s) {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (s == kNames[i] && !per_channel(static_cast<KvFormat>(i))) return static_cast<KvFormat>(i);
  return std::nullopt;
}

std::string kv_format_names_text() {
  std::string t, last;
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (per_channel(static_cast<KvFormat>(i))) continue;
    if (!last.empty()) t += (t.empty() ? "" : ", ") + last;
    last = kNames[i];
  }
  return t + " or " + last;
}

void quantize_rows(KvFormat f, std::span<float> buf, std::size_t kvd, std::size_t r0, std::size_t r1, Format st,
                   bool truncate, QuantCheck& c) {
  rows(f, buf.data(), nullptr, buf.data(), kvd, r0, r1, st, truncate, c);
}

void within_step(KvFormat f, std::span<const float> exact, std::span<const float> stored, std::size_t kvd,
                 std::size_t r0, std::size_t r1, Format st, QuantCheck& c) {
  rows(f, exact.data(), stored.data(), nullptr, kvd, r0, r1, st, false, c);
}

}  // namespace kvconf::engine
