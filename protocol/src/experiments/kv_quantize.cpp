// The kv_injection perturbations (kv_quantize.hpp): noise here, the quantizers through engine/kv_format.hpp.
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
    default:  // the quantizers: kv_format.hpp's formats, in the same order
      engine::quantize_rows(
          static_cast<engine::KvFormat>(static_cast<int>(v.kind) - static_cast<int>(Perturb::fp8_e4m3)), buf, kvd, r0,
          r1, st, truncate, c);
      return;
  }
}

}  // namespace kvconf::protocol::experiments
