// The elementwise stages of a decoder layer: rigorous MPFR enclosures of RoPE (exact cos/sin of the exact angle
// pos·θ^(−2i/d)), SiLU and GELU-tanh, and the a-priori error bounds of the engine's PyTorch-opmath evaluation of
// them and of the residual add and the MLP product (docs/TOLERANCES.md "EngineMatchesOracle").
//
// Oracle contract: each function returns an Enclosure lo <= exact <= hi of the real result for exactly
// representable double inputs (every float is one), computed in MPFR with directed rounding; the width is a few
// units of 2^-120 relative (or of 2^-53 for RoPE outputs, whose cos/sin enclosures are doubles), far below any
// storage rounding. Bounds follow bounds.hpp: rigorous, evaluated in double on non-negative quantities, times kSafety;
// +inf where the analysis does not apply.
#pragma once

#include <cstddef>

#include "kvconf/numerics/format.hpp"

namespace kvconf::ref {

// lo <= exact <= hi.
struct Enclosure {
  double lo = 0.0;
  double hi = 0.0;
  double abs_up() const;    // an upper bound of |exact|
  double abs_down() const;  // a lower bound of |exact| (0 when the enclosure contains 0)
};
// An upper bound of |computed − exact| for every exact value in e: max(|c − lo|, |c − hi|) rounded up.
double enclosure_error(double computed, const Enclosure& e);
// The enclosure of a value known to within one double ulp (the oracles' `approx` fields: nearest double).
Enclosure around_approx(double approx);

// Relative error of fl32(f(x)) for a libm double function f (exp, tanh, pow, cos, sin) with error < 1 ulp of
// double: 2^-52 relative, doubled for safety, then one fp32 rounding (= kernels::kExpRelError).
inline constexpr double kLibmViaDoubleRelError = 0x1p-24 + 0x1p-51;

// ---------------------------------------------------------------------------------------------------------------
// Oracles.

// RoPE pair i of a head of size d at position pos with base θ > 0: A = pos·θ^(−2i/d), cos A and sin A.
struct RopeAngle {
  Enclosure angle;
  Enclosure cos;
  Enclosure sin;
};
RopeAngle rope_angle(std::size_t pos, std::size_t i, std::size_t d, double theta);
// x_cos·cos A + x_sin·sin A (x_cos, x_sin exact doubles): the rotated component. HF rotate_half pair (a, b) =
// (x_i, x_{i+d/2}): out_i = a·cos − b·sin → (a, −b); out_{i+d/2} = b·cos + a·sin → (b, a). Interleaved likewise.
Enclosure rope_component(double x_cos, double x_sin, const RopeAngle& t);

// SiLU x / (1 + e^(−x)).
Enclosure silu(double x);

// GELU with the tanh approximation, g = ½·x·(1 + tanh(z)), z = √(2/π)·(x + 0.044715·x³), with the exact
// constants; also z and 1 + tanh(z) (the bound needs them).
struct GeluTanh {
  Enclosure g;
  Enclosure z;
  Enclosure one_plus_tanh;
};
GeluTanh gelu_tanh(double x);

// ---------------------------------------------------------------------------------------------------------------
// Bounds of the engine's evaluation (engine/src/ops.cpp): every elementwise op computed in fp32 from storage values,
// its result rounded once to the storage format F (PyTorch opmath), all round-to-nearest-even without ftz.

// fl_F(fl32(z)) = z(1 + δ) + η: |δ| <= rel, |η| <= abs. F = fp32: (u32, η32); otherwise the double rounding
// (u32 + u_F + u32·u_F, η32·(1 + u_F) + η_F).
struct OpRounding {
  double rel = 0.0;
  double abs = 0.0;
};
OpRounding opmath_rounding(Format storage);

// |fl_F(fl32(a + b)) − (a + b)| and |fl_F(fl32(a·b)) − a·b| for storage values a, b; abs_exact >= |exact result|.
double opmath_add_bound(Format storage, double abs_exact);
double opmath_mul_bound(Format storage, double abs_exact);

// The engine's RoPE table angle fl32(fl32(pos) · fl32(1 / fl32(pow(fl32(θ), fl32(2i)/fl32(d))))) against the exact
// angle A: |Â − A| <= rel·A. Requires pos < 2^24, 2i < d < 2^24, θ > 0.
double rope_angle_rel_error(double theta, std::size_t d, std::size_t i, double libm_rel_error = kLibmViaDoubleRelError);

// One rotated component ŷ = fl_F(fl32(P1 ± P2)), P1 = fl_F(fl32(x_cos·ĉ)), P2 = fl_F(fl32(x_sin·ŝ)) with the table
// entries ĉ = fl_F(fl32(cos_libm(Â))), ŝ likewise, against y = x_cos·cos A + x_sin·sin A.
struct RopeErrorInputs {
  Format storage = Format::fp32;
  double theta = 10000.0;
  std::size_t d = 2;       // head dim
  std::size_t i = 0;       // pair index, < d/2
  std::size_t pos = 0;     // absolute position, < 2^24
  double abs_x_cos = 0.0;  // |coefficient of cos A|
  double abs_x_sin = 0.0;  // |coefficient of sin A|
  RopeAngle exact;         // the oracle's angle, cos and sin
  double abs_y = 0.0;      // >= |y|
  double libm_rel_error = kLibmViaDoubleRelError;
};
double rope_error_bound(const RopeErrorInputs& in);

// SiLU ŷ = fl_F(fl32(x / fl32(1 + exp_f32(−x)))), exp_f32 with relative error <= exp_rel_error (rounding included);
// abs_s >= |silu(x)|.
double silu_error_bound(Format storage, double x, double abs_s, double exp_rel_error = kLibmViaDoubleRelError);

// GELU-tanh as PyTorch evaluates it in fp32: c = fl(fl(x·x)·x), inner = fl(β̂·fl(x + fl(κ̂·c))), t = tanh_f32(inner),
// ŷ = fl_F(fl(fl(0.5·x)·fl(1 + t))) with β̂ = fl32(√(2/π)), κ̂ = fl32(0.044715). +inf for |x| > 2^40 (the fp32 cube
// would overflow).
double gelu_tanh_error_bound(Format storage, double x, const GeluTanh& exact,
                             double tanh_rel_error = kLibmViaDoubleRelError);

}  // namespace kvconf::ref
