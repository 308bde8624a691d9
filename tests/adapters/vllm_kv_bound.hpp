// vLLM's layer-0 cached K/V (a --kv trace's k_rows / v_rows, read from its paged cache) judged against kvconf's fp32
// engine on the same sequence by the projection bound cached_kv uses for rows computed by different paths
// (conformance::layer0_kv_bound): |K_vllm − K_kvconf| <= kvconf's bound + vLLM's, vLLM's described as a black box.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kvconf/conformance/engine_checks.hpp"
#include "kvconf/conformance/scenario_rules.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/black_box.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/trace.hpp"
#include "kvconf/reference/elementwise.hpp"

namespace kvconf::testing {

// vLLM's CPU build in fp32, as kvconf describes an engine it cannot read the order of (a black box, as cached_kv
// bounds a torch or plugin side): the input RMSNorm (vLLM's native rms_norm: Σx² in fp32 by torch's reduction, the
// rest as HF's, x · rsqrt then · w, Gemma's w + 1 in fp32) and the K/V projection (its fused qkv_proj through oneDNN,
// fp32 products and sums) in any order: kernels::black_box_norm_path / black_box_gemm_path. Every other kernel is
// kvconf's fp32 (layer0_kv_bound reads only the norm's and the GEMM's paths).
struct BlackBoxFp32 {
  kernels::GemmKernel gemm;
  kernels::NormKernel norm;
  engine::ProfileKernels k;
};
inline const engine::ProfileKernels& black_box_fp32(const kernels::Registry& cpu) {
  static const std::unique_ptr<BlackBoxFp32> b = [&cpu] {
    auto x = std::make_unique<BlackBoxFp32>();
    x->k = engine::resolve(engine::find_profile("fp32"), cpu);
    x->gemm = *x->k.gemm;
    x->gemm.path = [](const kernels::GemmShape&) { return kernels::black_box_gemm_path(Format::fp32, Format::fp32); };
    x->norm = *x->k.norm;
    x->norm.path = [](const kernels::NormShape&) { return kernels::black_box_norm_path(Format::fp32); };
    x->k.gemm = &x->gemm;
    x->k.norm = &x->norm;
    return x;
  }();
  return b->k;
}

// vLLM's RoPE table (RotaryEmbedding._compute_cos_sin_cache): inv = 1 / base ** (arange(0, d, 2) / d), angles
// fl32(pos · inv), cos and sin, all torch fp32 on the CPU: the steps layer0_kv_bound's RoPE term models
// (ref::rope_angle_rel_error), but pow, cos and sin are torch's vectorised Sleef u10 functions, documented within
// 1.0 ulp (relative <= 2^-23), where the bound's default is a libm through double (kLibmViaDoubleRelError, about half
// that). The rotation itself (vLLM's rotary_embedding op, x·cos ∓ y·sin in fp32, fused or not) is the bound's model.
inline constexpr double kSleefU10RelError = 0x1p-23;

// Upper bounds a' of |k̂| before RoPE, as vLLM computes it, for the row x (kv_dim):
// a'_j = (1 + 2^-10) Σ_i |W_k,ji| · |x_i| · r · |w'_i| (1 + 2^-10), r = 1 / sqrt(Σx²/D + fl32(eps)) exactly, w' the
// norm's weight (Gemma: 1 + w): the computed rsqrt is within (1 − γ_D)^(−1/2)(1 + u)^3 of r and each product and dot
// within (1 + γ_D) of its magnitude, all below 1 + 2^-10 for D <= 2^12 (checked).
inline std::vector<double> pre_rope_k_magnitudes(const engine::Model& m, std::span<const float> x) {
  const engine::ModelConfig& c = m.config;
  const std::size_t D = c.hidden, kvd = c.kv_dim();
  if (D > 4096 || x.size() != D)
    throw std::invalid_argument("pre_rope_k_magnitudes: x must hold hidden <= 4096 values");
  const engine::LayerWeights& w = m.layers[0];
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * static_cast<double>(v);
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(D) + static_cast<double>(static_cast<float>(c.rms_eps)));
  constexpr double kUp = 1.0 + 0x1p-10;
  std::vector<double> y(D), a(kvd, 0.0);
  for (std::size_t i = 0; i < D; ++i) {
    const double wi = static_cast<double>(w.attn_norm[i]);
    y[i] = std::fabs(static_cast<double>(x[i])) * r * std::fabs(c.norm_one_plus_weight ? 1.0 + wi : wi) * kUp;
  }
  for (std::size_t j = 0; j < kvd; ++j) {
    for (std::size_t i = 0; i < D; ++i) a[j] += std::fabs(static_cast<double>(w.wk[j * D + i])) * y[i];
    a[j] *= kUp;
  }
  return a;
}

// What vLLM's 1-ulp table adds to layer0_kv_bound's K bound at row `pos`, per element (kv_dim): rope_error_bound with
// the Sleef error minus it with the default, at a = pre_rope_k_magnitudes >= |k̂|. The bound is affine in |x_cos|,
// |x_sin| and |y| with non-negative coefficients; those of |x_cos| and |x_sin| grow with the libm error and that of
// |y| does not. So at vLLM's true |k̂| the Sleef bound is the default one (at most layer0_kv_bound's own RoPE term,
// whose magnitudes are also >= |k̂|) plus a difference that grows with the magnitudes (at most this one at a).
inline std::vector<double> sleef_rope_extra(const engine::Model& m, const std::vector<double>& a, std::size_t pos) {
  const engine::ModelConfig& c = m.config;
  const std::size_t d = c.head_dim, h = d / 2;
  std::vector<double> extra(c.kv_dim(), 0.0);
  for (std::size_t i = 0; i < h; ++i) {
    const ref::RopeAngle ang = ref::rope_angle(pos, i, d, c.rope_theta);
    const double ac = std::max(std::fabs(ang.cos.lo), std::fabs(ang.cos.hi)),
                 as = std::max(std::fabs(ang.sin.lo), std::fabs(ang.sin.hi));
    for (std::size_t hd = 0; hd < c.n_kv_heads; ++hd) {
      const std::size_t ia = c.rope_interleaved ? hd * d + 2 * i : hd * d + i;
      const std::size_t ib = c.rope_interleaved ? hd * d + 2 * i + 1 : hd * d + i + h;
      for (const auto& [out, xc, xs] : {std::tuple{ia, a[ia], a[ib]}, std::tuple{ib, a[ib], a[ia]}}) {
        ref::RopeErrorInputs ri;
        ri.storage = Format::fp32;
        ri.theta = c.rope_theta;
        ri.d = d;
        ri.i = i;
        ri.pos = pos;
        ri.abs_x_cos = xc;
        ri.abs_x_sin = xs;
        ri.exact = ang;
        ri.abs_y = (ac * xc + as * xs) * (1.0 + 0x1p-40);
        const double base = ref::rope_error_bound(ri);
        ri.libm_rel_error = kSleefU10RelError;
        const double sleef = ref::rope_error_bound(ri);
        extra[out] = std::max(0.0, sleef - base) + sleef * 0x1p-40;  // the subtraction's rounding, relative to sleef
      }
    }
  }
  return extra;
}

// vLLM's CPU KV blocks (adapters/vllm/vllm_engine.py BLOCK_SIZE): the unit of its K layout (the plant reads it back).
inline constexpr std::size_t kVllmBlock = 32;

// One trace's layer-0 rows against kvconf's.
struct Layer0Judgement {
  std::size_t rows = 0, checked = 0, values = 0, over = 0;
  double max_dk = 0.0, max_dv = 0.0, max_bound_k = 0.0, max_bound_v = 0.0;
  double max_extra_share = 0.0;  // the largest share of a K bound that sleef_rope_extra makes
  double worst_ratio = 0.0, worst_error = 0.0, worst_bound = 0.0;  // max |d| / bound, at that value
  std::string worst_at, first_over;
  double headroom() const { return 1.0 - worst_ratio; }  // (bound − |d|) / bound at the worst value
};

// Layer 0 of the trace's k_rows / v_rows (rows 0 … N − 1 of prompt + generated) against kvconf fp32's cache of the
// same N tokens (one prefill, M = N): each value within layer0_kv_bound(kvconf fp32, M = N) + layer0_kv_bound(vLLM as
// a black box, M = the rows of vLLM's call that fed the row) + sleef_rope_extra (K), from the row's layer-0 input
// (kvconf's embedding, Gemma's scaled by fl32(sqrt(hidden)): the same bits as vLLM's, an exact lookup and one fp32
// product). Every row is judged: a row the trace holds that vLLM no longer did (a block its sliding-window manager
// freed, read as the null block's zeros) fails naming it (the adapter refuses --kv on such models: docs/MODELS.md).
inline Layer0Judgement judge_layer0(const engine::Model& m, const engine::ProfileKernels& kvconf_k,
                                    const engine::ProfileKernels& box, const protocol::Trace& t) {
  const engine::ModelConfig& c = m.config;
  const std::size_t N = t.kv_rows, kvd = c.kv_dim(), D = c.hidden;
  Layer0Judgement j;
  j.rows = N;
  if (t.k_rows.empty() || t.kv_dim != kvd) {
    j.first_over = "the trace holds no K/V rows of this model's kv_dim " + std::to_string(kvd);
    ++j.over;
    return j;
  }
  std::vector<int> tokens = t.prompt_ids;
  tokens.insert(tokens.end(), t.generated_ids.begin(), t.generated_ids.end());
  tokens.resize(N);
  engine::Context ctx(m, kvconf_k);
  engine::ForwardOptions fo;
  fo.capture_hidden = true;
  ctx.prefill(tokens, fo);
  const std::vector<float> x = ctx.trace().hidden.at(0);  // (N, hidden)
  const std::vector<float>& kk = ctx.cache().k[0];
  const std::vector<float>& kv = ctx.cache().v[0];
  const std::vector<engine::CallRecord> calls =
      t.kv_step ? std::vector<engine::CallRecord>{t.calls.at(t.call_of_step.at(*t.kv_step))} : t.calls;
  const std::vector<std::size_t> M = conformance::kv_row_calls(calls, N);
  const float* vk = t.k_rows.data();  // layer 0: the first N · kv_dim values
  const float* vv = t.v_rows.data();
  for (std::size_t p = 0; p < N; ++p) {
    const auto row = std::span<const float>(x).subspan(p * D, D);
    if (M[p] == 0) {
      if (j.over++ == 0) j.first_over = "row " + std::to_string(p) + ": no call of the trace fed it";
      continue;
    }
    const std::vector<double> bk = conformance::layer0_kv_bound(m, kvconf_k, row, p, N);
    const std::vector<double> bv = conformance::layer0_kv_bound(m, box, row, p, M[p]);
    const std::vector<double> extra = sleef_rope_extra(m, pre_rope_k_magnitudes(m, row), p);
    ++j.checked;
    for (std::size_t e = 0; e < 2 * kvd; ++e) {
      const bool is_v = e >= kvd;
      const std::size_t col = e % kvd;
      const float a = (is_v ? vv : vk)[p * kvd + col], b = (is_v ? kv : kk)[p * kvd + col];
      const double d = std::fabs(static_cast<double>(a) - static_cast<double>(b));
      const double bound = (bk[e] + bv[e] + (is_v ? 0.0 : extra[col])) * (1.0 + 0x1p-40);
      ++j.values;
      (is_v ? j.max_dv : j.max_dk) = std::max(is_v ? j.max_dv : j.max_dk, d);
      (is_v ? j.max_bound_v : j.max_bound_k) = std::max(is_v ? j.max_bound_v : j.max_bound_k, bound);
      if (!is_v) j.max_extra_share = std::max(j.max_extra_share, extra[col] / bound);
      const double ratio = std::isnan(d) ? std::numeric_limits<double>::infinity() : d / bound;
      const bool over = !(d <= bound), worse = ratio > j.worst_ratio || j.worst_at.empty();
      if (!over && !worse) continue;
      char where[320];
      std::snprintf(where, sizeof where,
                    "%s layer 0 row %zu head %zu dim %zu: vLLM %.9g vs kvconf %.9g, |d| %.3g %s %.3g", is_v ? "V" : "K",
                    p, col / c.head_dim, col % c.head_dim, static_cast<double>(a), static_cast<double>(b), d,
                    over ? "> bound" : "<= bound", bound);
      if (over && j.over++ == 0) j.first_over = where;
      if (worse) j.worst_ratio = ratio, j.worst_error = d, j.worst_bound = bound, j.worst_at = where;
    }
  }
  return j;
}

}  // namespace kvconf::testing
