// Elementwise ops with PyTorch's opmath rounding (ops.hpp). Compiled with -ffp-contract=off: each fp32 op rounds.
#include "ops.hpp"

#include <cmath>
#include <stdexcept>

#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::engine::ops {
namespace {

inline float rnd(Format f, float x) { return kernels::round_float(f, x); }

void check(const char* fn, std::size_t a, std::size_t b) {
  if (a != b) throw std::invalid_argument(std::string("kvconf::engine::ops::") + fn + ": spans differ in length");
}

}  // namespace

void add(Format f, std::span<const float> a, std::span<const float> b, std::span<float> out) {
  check("add", a.size(), b.size());
  check("add", a.size(), out.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = rnd(f, a[i] + b[i]);
}

void mul(Format f, std::span<const float> a, std::span<const float> b, std::span<float> out) {
  check("mul", a.size(), b.size());
  check("mul", a.size(), out.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = rnd(f, a[i] * b[i]);
}

void scale(Format f, std::span<float> x, float s) {
  for (float& v : x) v = rnd(f, v * s);
}

void activation(Format f, Activation a, std::span<const float> x, std::span<float> out) {
  check("activation", x.size(), out.size());
  if (a == Activation::silu) {
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = rnd(f, x[i] / (1.0f + kernels::exp_f32(-x[i])));
    return;
  }
  constexpr float kBeta = 0.7978845608028654f;  // √(2/π)
  constexpr float kKappa = 0.044715f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    const float cube = v * v * v;  // PyTorch's order: x_cube = x·x·x, inner = β·(x + κ·x_cube)
    const float inner = kBeta * (v + kKappa * cube);
    out[i] = rnd(f, 0.5f * v * (1.0f + kernels::tanh_f32(inner)));
  }
}

void softcap(Format f, std::span<float> z, float cap) {
  for (float& v : z) v = rnd(f, rnd(f, kernels::tanh_f32(rnd(f, v / cap))) * cap);
}

RopeRow rope_row(Format f, double theta, std::size_t d, std::size_t pos) {
  RopeRow r;
  const std::size_t h = d / 2;
  r.cos.resize(h);
  r.sin.resize(h);
  const float theta_f = static_cast<float>(theta);
  for (std::size_t i = 0; i < h; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(d);
    const float p = static_cast<float>(std::pow(static_cast<double>(theta_f), static_cast<double>(e)));
    const float inv = 1.0f / p;
    const float ang = static_cast<float>(pos) * inv;
    r.cos[i] = rnd(f, static_cast<float>(std::cos(static_cast<double>(ang))));
    r.sin[i] = rnd(f, static_cast<float>(std::sin(static_cast<double>(ang))));
  }
  return r;
}

void rope(Format f, const ModelConfig& c, std::span<float> x, std::size_t heads,
          std::span<const std::size_t> positions) {
  const std::size_t d = c.head_dim, h = d / 2, rows = positions.size();
  if (x.size() != rows * heads * d) throw std::invalid_argument("kvconf::engine::ops::rope: x is not (rows, heads, d)");
  for (std::size_t r = 0; r < rows; ++r) {
    const RopeRow t = rope_row(f, c.rope_theta, d, positions[r]);
    for (std::size_t hd = 0; hd < heads; ++hd) {
      float* v = x.data() + (r * heads + hd) * d;
      for (std::size_t i = 0; i < h; ++i) {
        const float cs = t.cos[i], sn = t.sin[i];
        if (c.rope_interleaved) {
          const float v0 = v[2 * i], v1 = v[2 * i + 1];
          v[2 * i] = rnd(f, rnd(f, v0 * cs) - rnd(f, v1 * sn));
          v[2 * i + 1] = rnd(f, rnd(f, v0 * sn) + rnd(f, v1 * cs));
        } else {
          const float a = v[i], b = v[i + h];
          v[i] = rnd(f, rnd(f, a * cs) + rnd(f, -b * sn));
          v[i + h] = rnd(f, rnd(f, b * cs) + rnd(f, a * sn));
        }
      }
    }
  }
}

}  // namespace kvconf::engine::ops
