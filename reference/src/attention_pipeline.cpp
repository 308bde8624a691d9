// attention_pipeline_bound(): the per-element attention bound of bounds.hpp extended to the kernels'
// pipelines — scores with an fp16 rounding and a softcap, online softmax over KV blocks (rescales),
// split-KV partitions with their own normalisation and a log-sum-exp combine, epsilons in the
// denominators. Derivation: docs/TOLERANCES.md §7. Every quantity is non-negative; results are
// scaled by kSafety.
#include "kvconf/reference/attention_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvconf::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
double safe(double x) { return std::isfinite(x) ? x * kSafety : kInf; }
double one_minus_lower(double x) { return (1.0 - x) * (1.0 - 0x1p-50); }
// (1 + x)^m − 1 for x >= 0, rounded up generously (relative 2^-40).
double pow1m(double x, double m) { return std::expm1(m * std::log1p(x)) * (1.0 + 0x1p-40); }
// Upper bound of ln(y) for y >= 1 (std::log is within an ulp; pad it).
double log_up(double y) { return std::log(y) * (1.0 + 0x1p-40) + 0x1p-60; }

// Compose an inner error (rel, abs) with an outer chain of m roundings in f (bounds.cpp's compose()).
ErrorTerms compose_chain(ErrorTerms inner, std::size_t m, Format f) {
  if (m == 0) return inner;
  const double g = gamma(m, unit_roundoff(f));
  if (std::isinf(g)) return {kInf, kInf};
  return {inner.rel * (1.0 + g) + g, inner.abs * (1.0 + g) + static_cast<double>(m) * underflow_unit(f) * (1.0 + g)};
}

bool visible(const AttentionParams& p, std::int64_t pos, std::int64_t j) {
  if (p.causal && j > pos) return false;
  if (p.window > 0) {
    const std::int64_t dist = p.causal ? pos - j : (pos > j ? pos - j : j - pos);
    if (dist >= p.window) return false;
  }
  return true;
}

}  // namespace

AttentionPipeline black_box_pipeline(Format in, Format out, std::size_t n_visible_max, double exp_rel_error,
                                     double exp_abs_error) {
  AttentionPipeline p;
  p.name = "black-box";
  p.in = in;
  p.qk_spec = {in, Format::fp32, Format::fp32, false};
  p.qk_order = AnyOrder{2};
  p.score = Format::fp32;
  p.scale_rel_error = 2.0 * unit_roundoff(Format::fp32) * (1.0 + unit_roundoff(Format::fp32));
  p.softmax = Format::fp32;
  p.exp_rel_error = exp_rel_error;
  p.exp_abs_error = exp_abs_error;
  p.kv_blocks = std::max<std::size_t>(n_visible_max, 1);
  p.splits = 1;
  p.normalize_either = true;
  p.p_cast = info(in).p < info(Format::fp32).p ? std::optional<Format>(in) : std::nullopt;
  p.pv_spec = {p.p_cast.value_or(Format::fp32), Format::fp32, Format::fp32, false};
  p.pv_order = AnyOrder{};
  p.out = out;
  return p;
}

double attention_pipeline_bound(const AttentionPipeline& p, const AttentionParams& params,
                                const AttentionElementStats& s) {
  if (p.normalize_either) {
    AttentionPipeline before = p, after = p;
    before.normalize_either = after.normalize_either = false;
    before.normalize_before_pv = true;
    after.normalize_before_pv = false;
    return std::max(attention_pipeline_bound(before, params, s), attention_pipeline_bound(after, params, s));
  }
  if (params.exact_inv_sqrt_d)
    throw std::invalid_argument(
        "kvconf::ref::attention_pipeline_bound: params.exact_inv_sqrt_d must be false (kernels multiply by "
        "params.scale, which the oracle must take as exact)");
  if (!(params.scale != 0.0) || !std::isfinite(params.scale))
    throw std::invalid_argument("kvconf::ref::attention_pipeline_bound: params.scale must be finite and non-zero");
  if (s.n_visible == 0) return 0.0;  // the output is exactly zero
  const double n = static_cast<double>(s.n_visible);
  const double tau = std::fabs(params.scale);
  const double c = params.softcap;

  // --- Scores: Δs >= |ŝ_j − s_j| (TOLERANCES §7.1) ---
  ScoreErrorInputs si;
  si.qk = dot_error_terms(p.qk_spec, p.qk_order, std::max<std::size_t>(s.head_dim, 1));
  si.sum_abs_qk = s.max_abs_qk;
  si.abs_qk = s.max_abs_qk;
  si.tau = tau;
  si.tau_rel_error = p.scale_rel_error;
  si.score = p.score;
  // A score format narrower than fp32 may be reached by a double rounding fl_s(fl32(x)) (PyTorch computes
  // fp16 elementwise ops in fp32): |fl_s(fl32(x)) − x| <= (u_s + u32 + u_s·u32)|x| + η_s, so each such
  // operation is charged u32 more (TOLERANCES §6b).
  const bool narrow = info(p.score).p < info(Format::fp32).p;
  const double u32 = narrow ? unit_roundoff(Format::fp32) : 0.0;
  double delta1 = score_error_bound(si);  // pre-softcap score
  delta1 += u32 * (1.0 + unit_roundoff(p.score)) * (tau * s.max_abs_qk + delta1);
  double delta_s = delta1;
  double score_abs = tau * s.max_abs_qk + delta1;  // >= |ŝ_j|
  if (c > 0.0) {
    const double us = unit_roundoff(p.score) + u32 * (1.0 + unit_roundoff(p.score));
    const double es = underflow_unit(p.score);
    const double et = p.tanh_rel_error + us + p.tanh_rel_error * us;  // tanh, then rounded to `score`
    const double A = tau * s.max_abs_qk + delta1;                     // >= |pre-softcap score|
    delta_s = delta1 + us * A + c * es + c * (et + es) + us * c * (1.0 + et + es) + es;
    score_abs = std::min(score_abs, c * (1.0 + et + es) * (1.0 + us) + es);
  }
  if (!std::isfinite(delta_s)) return kInf;
  double range = 2.0 * tau * s.max_abs_qk;  // max s − min s
  if (c > 0.0) range = std::min(range, 2.0 * c);
  const double R = range + 2.0 * delta_s;

  // --- Softmax within one split (§7.2): φ per exp, B−1 rescales, the row sum, 1/(l + eps) ---
  const double u = unit_roundoff(p.softmax), eta = underflow_unit(p.softmax);
  const double eps_exp = p.exp_rel_error;
  const double B = static_cast<double>(std::max<std::size_t>(p.kv_blocks, 1));
  const double phi = std::expm1(u * R) * (1.0 + eps_exp) + eps_exp;
  const double phi_blk = pow1m(phi, B);                                    // own exp and B−1 rescale factors
  const double phi_l = (1.0 + phi_blk) * (1.0 + pow1m(u, B - 1.0)) - 1.0;  // + rescale multiplications
  const AccumSpec row_spec{p.softmax, p.softmax, p.softmax};
  const ErrorTerms row = sum_error_terms(row_spec, Sequential{}, s.n_visible);  // any order: n − 1 adds
  if (!std::isfinite(row.rel)) return kInf;
  const double eta_e = eta + p.exp_abs_error;  // absolute error of one exp: underflow, or the exp's own flush
  const double Lambda0 = phi_l + row.rel * (1.0 + phi_l) + n * eta_e * (1.0 + row.rel) + row.abs;
  if (!(Lambda0 < 1.0)) return kInf;
  // Reciprocal 1/(l̂ + eps) rounded once: l̃ = (l̂ + eps)/(1+δ) = L(1+λ'), l̂ >= L(1 − Λ0) >= 1 − Λ0.
  const double Lambda =
      (1.0 + Lambda0) * (1.0 + p.denominator_eps / one_minus_lower(Lambda0)) / one_minus_lower(u) - 1.0;
  if (!(Lambda < 1.0)) return kInf;
  const double one_minus = one_minus_lower(Lambda);
  const double etaP = p.p_cast ? underflow_unit(*p.p_cast) : 0.0;
  const double uP = p.p_cast ? unit_roundoff(*p.p_cast) : 0.0;
  // Underflow of rescale factors, and P's cast error carried through up to B−1 rescales (§7.2).
  const double extra_abs = etaP * pow1m(phi, B - 1.0) + 2.0 * B * eta;
  SoftmaxErrors sm;
  sm.norm_rel = Lambda;
  if (p.normalize_before_pv) {
    sm.weight_rel = (1.0 + phi_blk) * (1.0 + u) - 1.0;
    sm.weight_abs = eta_e * (1.0 + u) / one_minus + eta + extra_abs;
  } else {
    sm.weight_rel = phi_blk;
    sm.weight_abs = eta_e / one_minus + extra_abs;
  }

  // --- PV: the accumulation chain plus B−1 rescale multiplications in acc ---
  AccumSpec pv_spec = p.pv_spec;
  pv_spec.out = pv_spec.acc;
  const std::size_t pv_n = p.pv_terms ? p.pv_terms : s.n_visible;
  const ErrorTerms pv = compose_chain(dot_error_terms(pv_spec, p.pv_order, pv_n, std::max(2.0, s.max_abs_v)),
                                      static_cast<std::size_t>(B) - 1, pv_spec.acc);

  if (p.splits <= 1) {
    AttentionErrorInputs ai;
    ai.delta_s = delta_s;
    ai.spread = s.spread;
    ai.weighted_abs = s.weighted_abs;
    ai.abs_o = s.abs_o;
    ai.sum_abs_v = s.sum_abs_v;
    ai.softmax = sm;
    ai.p_cast = p.p_cast;
    ai.pv = pv;
    if (!p.normalize_before_pv) ai.divide = p.softmax;  // o = acc · fl(1/l): the multiplication
    ai.out = p.out;
    return attention_error_bound(ai);
  }

  // --- Split-KV (§7.3): per-split outputs, weighted by the exact split weights W'_s ---
  if (!std::isfinite(pv.rel) || !std::isfinite(pv.abs)) return kInf;
  const double S = static_cast<double>(p.splits);
  const double E2 = std::expm1(2.0 * delta_s);
  const double Wp = (1.0 + E2) * s.weighted_abs;  // Σ p'_j|v_j| = Σ_s W'_s Σ_{j∈s} p'^s_j |v_j|
  const double kappa = sm.weight_rel + uP + sm.weight_rel * uP;
  const double zeta = sm.weight_abs * (1.0 + uP) + etaP / one_minus;
  const double V = s.sum_abs_v;
  // Σ_s W'_s |ô_s,pre − o'_s| (|o'_s| weighted by W'_s sums to <= W').
  const double Dw = (kappa * Wp + Lambda * Wp) / one_minus + zeta * V;
  const double M = (1.0 + kappa) * Wp / one_minus + zeta * V;
  double D = Dw + pv.rel * M + pv.abs / one_minus;
  // |ô_s| for any single split, to carry the absolute error of the weights.
  double Ocap = ((1.0 + kappa) * s.max_abs_v / one_minus + zeta * V) * (1.0 + pv.rel) + pv.abs / one_minus;
  if (!p.normalize_before_pv) {
    D = (1.0 + u) * D + u * Wp + eta;
    Ocap = (1.0 + u) * Ocap + eta;
  }
  const double uso = unit_roundoff(p.split_out), eso = underflow_unit(p.split_out);
  Ocap = Ocap * (1.0 + uso) + eso;
  // Relative error of the combine weights W_s = exp(lse_s − lse) (or rescaled sums / global sum).
  const double log_n = log_up(n) + 1.0;
  const double log_S = log_up(S) + 1.0;
  const double m_abs = score_abs + delta_s;  // >= |m_s|
  const double E_lse = -std::log1p(-Lambda) * (1.0 + 0x1p-40) + eps_exp * log_n + u * (m_abs + log_n);
  const double phi_S = std::expm1(u * (R + log_n + 2.0 * E_lse)) * (1.0 + eps_exp) + eps_exp;
  const double gS = gamma(static_cast<std::size_t>(S), u);
  const double Lambda_S = phi_S + gS * (1.0 + phi_S) + S * eta * (1.0 + gS);
  if (!(Lambda_S < 1.0)) return kInf;
  const double E_comb = -std::log1p(-Lambda_S) * (1.0 + 0x1p-40) + eps_exp * log_S + u * (m_abs + log_n + log_S);
  const double omega = std::exp(2.0 * E_lse + E_comb + u * (R + log_n + 2.0)) * (1.0 + eps_exp) *
                           (1.0 + pow1m(u, 3.0)) * (1.0 + p.denominator_eps / one_minus_lower(Lambda_S)) -
                       1.0;
  const double zeta_W = 3.0 * eta;
  const double T = (1.0 + omega) * (1.0 + uso) * D + Wp * ((1.0 + omega) * (1.0 + uso) - 1.0) + (1.0 + omega) * eso +
                   zeta_W * S * Ocap;
  const double sum_WO = (1.0 + omega) * ((1.0 + uso) * (Wp + D) + eso) + zeta_W * S * Ocap;
  const double gC = gamma(static_cast<std::size_t>(S) + 1, u);
  const double comb = gC * sum_WO + 2.0 * (S + 1.0) * eta;
  const double pre = E2 * s.spread + T + comb;
  const double uo = unit_roundoff(p.out), eo = underflow_unit(p.out);
  return safe((1.0 + uo) * pre + uo * s.abs_o + eo);
}

AttentionElementStats element_stats(const AttentionResult& r, std::span<const double> v, const AttentionShape& shape,
                                    const AttentionParams& params, std::size_t row, std::size_t head, std::size_t col) {
  if (row >= shape.n_q || head >= shape.n_heads || col >= shape.d_v || shape.n_kv_heads == 0 ||
      shape.n_heads % shape.n_kv_heads != 0)
    throw std::invalid_argument("kvconf::ref::element_stats: element (row, head, col) outside the shape");
  if (v.size() != shape.n_kv * shape.n_kv_heads * shape.d_v)
    throw std::invalid_argument("kvconf::ref::element_stats: v must hold n_kv * n_kv_heads * d_v values");
  const std::size_t idx = (row * shape.n_heads + head) * shape.d_v + col;
  const AttentionRowStats& rs = r.rows.at(row * shape.n_heads + head);
  AttentionElementStats s;
  s.n_visible = rs.n_visible;
  s.head_dim = shape.d;
  s.max_abs_qk = rs.max_abs_qk;
  const double pad = 1.0 + static_cast<double>(shape.n_kv + 2) * 0x1p-50;  // double approximations → upper bounds
  s.weighted_abs = r.sum_p_abs_v.at(idx) * pad;
  s.spread = r.sum_p_abs_dev.at(idx) * pad;
  s.abs_o = std::fabs(r.approx.at(idx)) * (1.0 + 0x1p-50);
  const std::size_t kvh = head / (shape.n_heads / shape.n_kv_heads);
  const auto pos = params.q_offset + static_cast<std::int64_t>(row);
  double sum = 0.0, mx = 0.0;
  for (std::size_t j = 0; j < shape.n_kv; ++j) {
    if (!visible(params, pos, static_cast<std::int64_t>(j))) continue;
    const double a = std::fabs(v[(j * shape.n_kv_heads + kvh) * shape.d_v + col]);
    sum += a;
    mx = std::max(mx, a);
  }
  s.sum_abs_v = sum * pad;
  s.max_abs_v = mx;
  return s;
}

}  // namespace kvconf::ref
