// The kv_injection perturbations and quantizers (kv_quantize.hpp). Formats: KIVI (Liu et al. 2024) quantizes keys
// per channel over groups of tokens and values per token, asymmetric (min/max with a zero point); llama.cpp's q8_0
// stores blocks of 32 as int8 with one fp16 scale d = amax/127, q4_0 as 4-bit (q − 8)·d with d = (the value of
// largest magnitude)/(−8), fp16 scale (ggml-quants' block layouts, facts only).
#include "kv_quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kvconf/analysis/stats.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/bounds.hpp"

namespace kvconf::protocol::experiments {
namespace {

double uniform01(std::uint64_t& s) { return static_cast<double>(analysis::splitmix64_next(s) >> 11) * 0x1p-53; }

double normal(std::uint64_t& s) {  // Box–Muller
  const double a = std::max(uniform01(s), 0x1p-60), b = uniform01(s);
  return std::sqrt(-2.0 * std::log(a)) * std::cos(2.0 * 3.14159265358979323846 * b);
}

double rnd(double x, bool truncate) { return truncate ? std::trunc(x) : std::nearbyint(x); }

// One storage rounding's bound at |x̂| (round to nearest: u·|exact| <= u/(1−u)·|x̂|, plus half the subnormal spacing).
double storage_bound(Format f, double xq) {
  const double u = ref::unit_roundoff(f);
  return u / (1.0 - u) * std::fabs(xq) + ref::underflow_unit(f);
}

void record(QuantCheck& c, double x, double xq, double bound) {
  const double err = std::fabs(x - xq);
  const double r = bound > 0.0 ? err / bound : (err == 0.0 ? 0.0 : INFINITY);
  if (r > c.worst_ratio || c.elements == 0) c.worst_ratio = std::max(c.worst_ratio, r), c.err = err, c.bound = bound;
  ++c.elements;
}

// Asymmetric b-bit quantization of the values x[i·stride], i < n (KIVI): scale = (max − min)/(2^b − 1).
void int_asym(float* x, std::size_t n, std::size_t stride, int bits, Format st, bool truncate, QuantCheck& c) {
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t i = 0; i < n; ++i)
    lo = std::min(lo, double(x[i * stride])), hi = std::max(hi, double(x[i * stride]));
  const double levels = std::ldexp(1.0, bits) - 1.0, scale = (hi - lo) / levels;
  for (std::size_t i = 0; i < n; ++i) {
    float& v = x[i * stride];
    const double q = scale > 0.0 ? std::clamp(rnd((v - lo) / scale, truncate), 0.0, levels) : 0.0;
    const double xq = round_to(st, lo + q * scale);
    record(c, v, xq, scale / 2.0 * (1.0 + 1e-12) + storage_bound(st, xq));
    v = static_cast<float>(xq);
  }
}

// llama.cpp q8_0 (bits 8) or q4_0 (bits 4) over one block of n contiguous values, fp16 scale.
void q_block(float* x, std::size_t n, int bits, Format st, bool truncate, QuantCheck& c) {
  double amax = 0.0, maxv = 0.0;
  for (std::size_t i = 0; i < n; ++i)
    if (std::fabs(double(x[i])) > amax) amax = std::fabs(double(x[i])), maxv = x[i];
  const double d = round_to(Format::fp16, bits == 8 ? amax / 127.0 : maxv / -8.0);
  for (std::size_t i = 0; i < n; ++i) {
    double q = 0.0, xq = 0.0, step_bound = 0.0;
    if (d != 0.0) {
      if (bits == 8) {
        q = std::clamp(rnd(x[i] / d, truncate), -127.0, 127.0);
        xq = q * d;
        step_bound = std::fabs(d) * (0.5 + 127.0 * ref::unit_roundoff(Format::fp16) * 2.0);
      } else {
        q = std::clamp(rnd(x[i] / d + 8.0, truncate), 0.0, 15.0);
        xq = (q - 8.0) * d;
        step_bound = std::fabs(d) * (1.0 + 8.0 * ref::unit_roundoff(Format::fp16) * 2.0);  // the top clamps at 7d
      }
    }
    xq = round_to(st, xq);
    record(c, x[i], xq, step_bound + storage_bound(st, xq));
    x[i] = static_cast<float>(xq);
  }
}

}  // namespace

std::string Variant::name() const {
  static const char* names[] = {"uniform_rel",  "normal_abs", "sign_flip",    "fp8_e4m3", "fp8_e5m2", "int8_token",
                                "int8_channel", "int4_token", "int4_channel", "q8_0",     "q4_0"};
  std::string n = names[static_cast<int>(kind)];
  if (kind == Perturb::uniform_rel || kind == Perturb::normal_abs || kind == Perturb::sign_flip) {
    char b[32];
    std::snprintf(b, sizeof b, ":%g", amplitude);
    n += b;
  }
  return n;
}

std::string Variant::family() const {
  switch (kind) {
    case Perturb::uniform_rel:
      return "uniform_rel";
    case Perturb::normal_abs:
      return "normal_abs";
    case Perturb::sign_flip:
      return "sign_flip";
    default:
      return "quantization";
  }
}

bool Variant::per_channel() const { return kind == Perturb::int8_channel || kind == Perturb::int4_channel; }
bool Variant::quantizer() const { return family() == "quantization"; }

std::vector<Variant> injection_variants(Format storage) {
  std::vector<Variant> v;
  const double u = ref::unit_roundoff(storage);
  for (double a : {u, 8 * u, 64 * u, 512 * u})
    if (a < 1.0) v.push_back({Perturb::uniform_rel, a});
  for (double s : {1e-3, 1e-2, 1e-1}) v.push_back({Perturb::normal_abs, s});
  for (double p : {1e-3, 1e-2, 1e-1}) v.push_back({Perturb::sign_flip, p});
  for (Perturb q : {Perturb::fp8_e4m3, Perturb::fp8_e5m2, Perturb::int8_token, Perturb::int8_channel,
                    Perturb::int4_token, Perturb::int4_channel, Perturb::q8_0, Perturb::q4_0})
    v.push_back({q, 0.0});
  return v;
}

void perturb_rows(const Variant& v, std::span<float> buf, std::size_t kvd, std::size_t r0, std::size_t r1, Format st,
                  std::uint64_t& rng, double scale, bool truncate, QuantCheck& c) {
  float* rows = buf.data() + r0 * kvd;
  const std::size_t n = (r1 - r0) * kvd;
  switch (v.kind) {
    case Perturb::uniform_rel:
      for (std::size_t i = 0; i < n; ++i)
        rows[i] = float(round_to(st, rows[i] * (1.0 + scale * v.amplitude * (2.0 * uniform01(rng) - 1.0))));
      return;
    case Perturb::normal_abs:
      for (std::size_t i = 0; i < n; ++i) rows[i] = float(round_to(st, rows[i] + scale * v.amplitude * normal(rng)));
      return;
    case Perturb::sign_flip:
      for (std::size_t i = 0; i < n; ++i)
        if (uniform01(rng) < scale * v.amplitude) rows[i] = -rows[i];
      return;
    case Perturb::fp8_e4m3:
    case Perturb::fp8_e5m2: {
      const Format f8 = v.kind == Perturb::fp8_e4m3 ? Format::fp8_e4m3 : Format::fp8_e5m2;
      RoundOptions o;
      o.saturate = true;
      if (truncate) o.mode = Rounding::toward_zero;
      const double max8 = info(f8).max_finite;
      for (std::size_t i = 0; i < n; ++i) {
        const double x = rows[i], xq = round_to(st, round_to(f8, x, o));
        const double over = std::max(0.0, std::fabs(x) - max8);  // saturation
        record(c, x, xq,
               ref::unit_roundoff(f8) * std::fabs(x) + ref::underflow_unit(f8) + over + storage_bound(st, xq));
        rows[i] = float(xq);
      }
      return;
    }
    case Perturb::int8_token:
    case Perturb::int4_token:
      for (std::size_t r = r0; r < r1; ++r)
        int_asym(buf.data() + r * kvd, kvd, 1, v.kind == Perturb::int8_token ? 8 : 4, st, truncate, c);
      return;
    case Perturb::int8_channel:
    case Perturb::int4_channel:  // r0, r1: one complete group of rows
      for (std::size_t j = 0; j < kvd; ++j)
        int_asym(buf.data() + r0 * kvd + j, r1 - r0, kvd, v.kind == Perturb::int8_channel ? 8 : 4, st, truncate, c);
      return;
    case Perturb::q8_0:
    case Perturb::q4_0:
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t b = 0; b < kvd; b += kBlock)
          q_block(buf.data() + r * kvd + b, std::min(kBlock, kvd - b), v.kind == Perturb::q8_0 ? 8 : 4, st, truncate,
                  c);
      return;
  }
}

}  // namespace kvconf::protocol::experiments
