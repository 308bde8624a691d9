// Error bounds of the engine's elementwise stages (elementwise.hpp): PyTorch-opmath add and mul, the RoPE table and
// rotation, SiLU and GELU-tanh. Derivations: docs/TOLERANCES.md "EngineMatchesOracle". Every formula works on
// non-negative doubles without cancellation ((1+a)(1+b) − 1 as a + b + ab); results are scaled by kSafety.
#include <cmath>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>

#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/elementwise.hpp"

namespace kvconf::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kU = 0x1p-24;     // fp32 unit roundoff
constexpr double kEta = 0x1p-150;  // fp32 underflow unit (half the subnormal spacing)

// Π(1 + e_k) − 1 for non-negative e_k.
double grow(std::initializer_list<double> es) {
  double g = 0.0;
  for (const double e : es) g = g + e + g * e;
  return g;
}

bool is_fp32(Format f) { return f == Format::fp32 || f == Format::fp64; }
double u_of(Format f) { return is_fp32(f) ? 0.0 : unit_roundoff(f); }
double eta_of(Format f) { return is_fp32(f) ? 0.0 : underflow_unit(f); }

void check_storage(const char* fn, Format f) {
  if (!(f == Format::fp32 || f == Format::fp16 || f == Format::bf16))
    throw std::invalid_argument(std::string(fn) + ": storage must be fp32, fp16 or bf16");
}

}  // namespace

OpRounding opmath_rounding(Format storage) {
  check_storage("kvconf::ref::opmath_rounding", storage);
  if (is_fp32(storage)) return {kU, kEta};
  const double uf = unit_roundoff(storage), ef = underflow_unit(storage);
  // |fl_F(fl32(z)) − z| <= |fl32(z) − z| + |fl_F(t) − t| <= (u + u_F(1 + u))|z| + η(1 + u_F) + η_F.
  return {kU + uf + kU * uf, kEta * (1.0 + uf) + ef};
}

double opmath_add_bound(Format storage, double abs_exact) {
  if (!(abs_exact >= 0.0)) throw std::invalid_argument("kvconf::ref::opmath_add_bound: |a + b| must be >= 0");
  const OpRounding r = opmath_rounding(storage);
  return (r.rel * abs_exact + r.abs) * kSafety;
}

double opmath_mul_bound(Format storage, double abs_exact) {
  if (!(abs_exact >= 0.0)) throw std::invalid_argument("kvconf::ref::opmath_mul_bound: |a·b| must be >= 0");
  const OpRounding r = opmath_rounding(storage);
  return (r.rel * abs_exact + r.abs) * kSafety;
}

double rope_angle_rel_error(double theta, std::size_t d, std::size_t i, double libm_rel_error) {
  static constexpr char kFn[] = "kvconf::ref::rope_angle_rel_error";
  if (!(theta > 0x1p-100 && theta < 0x1p100)) throw std::invalid_argument(std::string(kFn) + ": theta out of range");
  if (d < 2 || 2 * i >= d || d >= (std::size_t{1} << 24))
    throw std::invalid_argument(std::string(kFn) + ": need 2i < d < 2^24");
  if (!(libm_rel_error >= 0.0 && libm_rel_error < 0.5)) throw std::invalid_argument(std::string(kFn) + ": libm error");
  // The engine's steps (ops.cpp rope_row): θ̂ = fl32(θ) = θ(1 + δ0); ê = fl32(2i)/fl32(d) = e(1 + δ1) with e = 2i/d;
  // p̂ = fl32(pow(θ̂, ê)) = θ̂^ê(1 + ε_p); inv = fl32(1/p̂); Â = fl32(pos·inv)  (pos < 2^24 is exact in fp32).
  const float theta_f = static_cast<float>(theta);
  const double d0 = static_cast<double>(theta_f) == theta ? 0.0 : kU;
  const float e_f = static_cast<float>(2 * i) / static_cast<float>(d);
  // ê·d is exact in double (24-bit ê, d < 2^24), so this tells whether ê = 2i/d exactly.
  const double d1 = static_cast<double>(e_f) * static_cast<double>(d) == static_cast<double>(2 * i) ? 0.0 : kU;
  // |ê ln θ̂ − e ln θ| <= |ê − e|·|ln θ̂| + e·|ln(θ̂/θ)| <= δ1·|ln θ̂| + δ0/(1 − δ0)   (e < 1).
  const double phi = d1 * std::fabs(std::log(static_cast<double>(theta_f))) * (1.0 + 0x1p-50) + d0 / (1.0 - d0);
  // Â/A = exp(−(ê ln θ̂ − e ln θ))·(1 + δ_inv)(1 + δ_mul)/(1 + ε_p): the larger deviation from 1 is the upper one.
  const double rel = grow({std::expm1(phi) * (1.0 + 0x1p-50), kU, kU, libm_rel_error / (1.0 - libm_rel_error)});
  return rel * kSafety;
}

double rope_error_bound(const RopeErrorInputs& in) {
  static constexpr char kFn[] = "kvconf::ref::rope_error_bound";
  check_storage(kFn, in.storage);
  if (in.pos >= (std::size_t{1} << 24)) throw std::invalid_argument(std::string(kFn) + ": pos must be < 2^24");
  if (!(in.abs_x_cos >= 0.0) || !(in.abs_x_sin >= 0.0) || !(in.abs_y >= 0.0))
    throw std::invalid_argument(std::string(kFn) + ": magnitudes must be >= 0");
  const double uf = u_of(in.storage), ef = eta_of(in.storage);
  // Angle: |Â − A| <= E_A·A.
  const double dA = rope_angle_rel_error(in.theta, in.d, in.i, in.libm_rel_error) * in.exact.angle.abs_up();
  // Table entry ĉ = fl_F(fl32(cos_libm(Â))) = cos(Â)(1 + ε)(1 + δ_F) + η: with |cos Â − cos A| <= |Â − A|,
  // |ĉ − cos A| <= (1 + C)·ΔA + C·|cos A| + η32(1 + u_F) + η_F, C = (1 + ε_libm)(1 + u_F) − 1. The same for sin.
  const double C = grow({in.libm_rel_error, uf});
  const double eta_t = kEta * (1.0 + uf) + ef;
  const double abs_cos = in.exact.cos.abs_up(), abs_sin = in.exact.sin.abs_up();
  const double dc = (1.0 + C) * dA + C * abs_cos + eta_t;
  const double ds = (1.0 + C) * dA + C * abs_sin + eta_t;
  // P1 = x_c·ĉ(1 + δ1) + η1, P2 = x_s·ŝ(1 + δ2) + η2, ŷ = (P1 + P2)(1 + δ3) + η3 (opmath roundings):
  // |ŷ − y| <= (1 + u)·D + u·|y| + η,  D = |x_c|Δc + |x_s|Δs + u(|x_c|(|cos A| + Δc) + |x_s|(|sin A| + Δs)) + 2η.
  const OpRounding r = opmath_rounding(in.storage);
  const double D = in.abs_x_cos * dc + in.abs_x_sin * ds +
                   r.rel * (in.abs_x_cos * (abs_cos + dc) + in.abs_x_sin * (abs_sin + ds)) + 2.0 * r.abs;
  const double b = (1.0 + r.rel) * D + r.rel * in.abs_y + r.abs;
  return std::isfinite(b) ? b * kSafety : kInf;
}

double silu_error_bound(Format storage, double x, double abs_s, double exp_rel_error) {
  static constexpr char kFn[] = "kvconf::ref::silu_error_bound";
  check_storage(kFn, storage);
  if (!std::isfinite(x) || !(abs_s >= 0.0)) return kInf;
  if (!(exp_rel_error >= 0.0 && exp_rel_error < 0.5)) throw std::invalid_argument(std::string(kFn) + ": exp error");
  // ê = exp_f32(−x) = e^(−x)(1 + ε) + η; 1 + ê = D(1 + ε'), D = 1 + e^(−x) >= 1, |ε'| <= a = ε_exp + η;
  // q̂ = fl32(x / fl32(1 + ê)) = s(1 + δ2)/((1 + ε')(1 + δ1)) + η, s = x/D:
  // |q̂ − s| <= R|s| + η, R = (1 + u)/((1 − a)(1 − u)) − 1 = (2u + a(1 − u))/((1 − a)(1 − u)).
  const double a = exp_rel_error + kEta;
  const double R = (2.0 * kU + a * (1.0 - kU)) / ((1.0 - a) * (1.0 - kU));
  const double uf = u_of(storage), ef = eta_of(storage);
  double b = (1.0 + uf) * (R * abs_s + kEta) + uf * abs_s + ef;
  // −x >= 88 (ln of fp32's largest finite value is 88.72): exp_f32 may overflow to +inf and ŷ = ∓0, whose error is
  // |s| itself.
  if (-x >= 88.0) b = std::max(b, abs_s);
  return b * kSafety;
}

double gelu_tanh_error_bound(Format storage, double x, const GeluTanh& exact, double tanh_rel_error) {
  static constexpr char kFn[] = "kvconf::ref::gelu_tanh_error_bound";
  check_storage(kFn, storage);
  if (!std::isfinite(x) || std::fabs(x) > 0x1p40) return kInf;
  if (!(tanh_rel_error >= 0.0 && tanh_rel_error < 0.5)) throw std::invalid_argument(std::string(kFn) + ": tanh error");
  const double u = kU, eta = kEta;
  const double up = 1.0 + 0x1p-50;    // covers the double rounding of a product or sum of two terms below
  const double beta = 0.79788456081;  // > √(2/π) = 0.797884560802865...; |β̂ − β| <= u·β
  const double kappa = 0.044715 * up;
  const double g2 = 2.0 * u / (1.0 - 2.0 * u);
  const double ax = std::fabs(x);
  const double a3 = ax * ax * ax * up * up;
  // (1) ĉ = fl(fl(x·x)·x): |ĉ − x³| <= γ2|x|³ + η(1 + u)|x| + η.
  const double e_c = g2 * a3 + eta * (1.0 + u) * ax + eta;
  // (2) m̂ = fl(κ̂·ĉ), κ̂ = κ(1 + δκ): |m̂ − κx³| <= (1 + u)κ(u|x|³ + (1 + u)e_c) + uκ|x|³ + η.
  const double e_m = (1.0 + u) * kappa * (u * a3 + (1.0 + u) * e_c) + u * kappa * a3 + eta;
  // (3) ŝ = fl(x + m̂) (an addition has no underflow error); w = x + κx³ has |w| = |x| + κ|x|³:
  // |ŝ − w| <= (1 + u)E_m + u|w|.
  const double w = (ax + kappa * a3) * up;
  const double e_s = (1.0 + u) * e_m + u * w;
  // (4) inner = fl(β̂·ŝ) = β(1 + δβ)(1 + δ)ŝ + η: |inner − z| <= β(((1 + u)² − 1)|w| + (1 + u)²E_s) + η =: Δz.
  const double u2 = 2.0 * u + u * u;
  const double dz = beta * (u2 * w + (1.0 + u2) * e_s) * up + eta;
  // (5) t̂ = tanh_f32(inner) = tanh(inner)(1 + ε_t) + η. tanh' = sech² <= min(1, 4e^(−2|y|)) on |y| >= |z| − Δz.
  const double z_lo = exact.z.abs_down(), z_hi = exact.z.abs_up();
  const double L = std::min(1.0, 4.0 * std::exp(-2.0 * std::max(0.0, z_lo - dz)) * up);
  const double dt = L * dz + tanh_rel_error * std::min(1.0, z_hi + dz) + eta;
  // (6) ô = fl(1 + t̂): |ô − G| <= Δt + u(G + Δt), G = 1 + tanh z.
  const double G = exact.one_plus_tanh.abs_up();
  const double d_o = dt + u * (G + dt);
  // (7)–(8) ĥ = fl(0.5·x) = x/2 + η_h, p̂ = fl(ĥ·ô): |p̂ − g| <= (1 + u)(|x|/2·Δo + η(G + Δo)) + u|g| + η.
  const double abs_g = exact.g.abs_up();
  const double dp = (1.0 + u) * (0.5 * ax * d_o + eta * (G + d_o)) + u * abs_g + eta;
  // (9) ŷ = fl_F(p̂).
  const double uf = u_of(storage), ef = eta_of(storage);
  const double b = (1.0 + uf) * dp + uf * abs_g + ef;
  return std::isfinite(b) ? b * kSafety : kInf;
}

}  // namespace kvconf::ref
