// Deterministic and probabilistic error bounds of the accumulation orders (bounds.hpp). Derivations and
// sources: docs/TOLERANCES.md §1–§5. Every formula below works on non-negative doubles without
// cancellation; results are scaled by kSafety.
#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <variant>

#include "kvconf/reference/bounds.hpp"

namespace kvconf::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double safe(double x) { return std::isinf(x) ? x : x * kSafety; }

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
std::size_t ceil_log2(std::size_t n) { return n <= 1 ? 0 : static_cast<std::size_t>(std::bit_width(n - 1)); }

// Quantum of the subnormal range, 2^(emin − p + 1).
int q_min(const FormatInfo& f) { return f.emin - f.p + 1; }

// out ⊇ acc: every value of acc is a value of out.
bool contains(Format out, Format acc) {
  const FormatInfo& o = info(out);
  const FormatInfo& a = info(acc);
  return o.p >= a.p && o.emin <= a.emin && o.emax >= a.emax;
}

// Is the leaf rounding (product into acc for dots, x_i into acc for sums) free of *relative* error?
// Underflow of a leaf is covered by the η term counted for every operation.
bool leaf_relatively_exact(const AccumSpec& s, bool dot) {
  const FormatInfo& in = info(s.in);
  const FormatInfo& acc = info(s.acc);
  return dot ? 2 * in.p <= acc.p : in.p <= acc.p;
}

// Affine error algebra. An inner error (rel, abs) combined by an outer chain with gamma g and total
// absolute (underflow) contribution h: (rel(1+g) + g, abs(1+g) + h).
ErrorTerms compose(ErrorTerms inner, double g, double h) {
  if (std::isinf(g) || std::isinf(inner.rel) || std::isinf(inner.abs)) return {kInf, kInf};
  return {inner.rel * (1.0 + g) + g, inner.abs * (1.0 + g) + h};
}

// A chain where every term goes through at most m roundings in format f, with n_ops operations in all.
ErrorTerms chain(std::size_t m, std::size_t n_ops, double u, double eta, double g_override = -1.0) {
  const double g = g_override >= 0.0 ? g_override : gamma(m, u);
  if (std::isinf(g)) return {kInf, kInf};
  return {g, static_cast<double>(n_ops) * eta * (1.0 + g)};
}

// Final rounding of a result held in format `have` (acc unless a ThreadStrided combine format says
// otherwise) to spec.out (skipped when out ⊇ have and nothing is flushed).
ErrorTerms finish(const AccumSpec& s, ErrorTerms e, Format have) {
  if (contains(s.out, have) && !s.round.ftz) return e;
  return compose(e, unit_roundoff(s.out, s.round), underflow_unit(s.out, s.round));
}
ErrorTerms finish(const AccumSpec& s, ErrorTerms e) { return finish(s, e, s.acc); }

bool is_pow2(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Tensor-core chain over n terms (docs/TOLERANCES.md §4): e_j <= β e_{j−1} + K_A·A + K_F per block.
ErrorTerms tensor_core_terms(const TensorCoreParams& p, Format in, Format acc, std::size_t n, double max_abs) {
  if (p.k < 1 || p.neab < 0)
    throw std::invalid_argument("kvconf::ref bounds: tensor-core parameters need k >= 1 and neab >= 0");
  if (acc != Format::fp32 && acc != Format::fp16)
    throw std::invalid_argument("kvconf::ref bounds: the tensor-core order needs acc = fp32 or fp16, got " +
                                std::string(name(acc)));
  if (n == 0) return {0.0, 0.0};
  const FormatInfo& fin = info(in);
  RoundOptions ro;
  ro.mode = tensor_core_rounding(p, acc);
  const double delta = unit_roundoff(acc, ro);
  const double eta = underflow_unit(acc, ro);
  const double alpha = static_cast<double>(p.k + 1) * std::ldexp(1.0, -23 - p.neab);
  const double m = std::min(max_abs, fin.max_finite);
  const double emin_in = std::ldexp(1.0, fin.emin);
  const double F = std::max(std::ldexp(1.0, -126), emin_in * std::max(m, emin_in));
  const double beta = (1.0 + delta) * (1.0 + alpha);
  const double KA = (1.0 + delta) * alpha + delta;
  const double KF = (1.0 + delta) * alpha * F + eta;
  const std::size_t blocks = ceil_div(n, static_cast<std::size_t>(p.k));
  double r = 0.0, a = 0.0;
  for (std::size_t j = 0; j < blocks; ++j) {
    r = beta * r + KA;
    a = beta * a + KF;
    if (std::isinf(r) || std::isinf(a)) return {kInf, kInf};
  }
  return {r, a};
}

// Terms of a dot product or sum, optionally with the accumulator's γ replaced (probabilistic bound).
// gamma_acc(m) returns the constant to use for m roundings in acc.
template <class GammaAcc>
ErrorTerms terms_impl(const AccumSpec& s, const Order& order, std::size_t n, double max_abs, bool dot,
                      GammaAcc gamma_acc) {
  if (s.in == Format::fp64) throw std::invalid_argument("kvconf::ref bounds: input format fp64 is not supported");
  const double u_acc = unit_roundoff(s.acc, s.round);
  const double eta_acc = underflow_unit(s.acc, s.round);
  if (!dot) max_abs = std::max(std::min(max_abs, info(s.in).max_finite), 1.0);  // sums: terms x_i·1
  if (n == 0) return {0.0, 0.0};

  if (const auto* tc = std::get_if<TensorCore>(&order))
    return finish(s, tensor_core_terms(tc->params, s.in, s.acc, n, max_abs));
  if (const auto* o = std::get_if<SplitK>(&order)) {
    if (o->s < 1) throw std::invalid_argument("kvconf::ref bounds: SplitK slice count s must be >= 1, got 0");
    const std::size_t L = ceil_div(n, o->s);
    const std::size_t slices = ceil_div(n, L);
    const bool to_acc = o->combine == SplitKCombine::accumulator;
    ErrorTerms partials;  // error of the slices before the out-format combine
    if (o->tensor_core) {
      // Slices are tensor-core chains: compose their (per-slice) terms with the combine.
      const ErrorTerms slice = tensor_core_terms(*o->tensor_core, s.in, s.acc, L, max_abs);
      partials = {slice.rel, slice.abs * static_cast<double>(slices)};
      if (to_acc) {
        const double g = gamma_acc(slices - 1);
        return finish(s, compose(partials, g, static_cast<double>(slices) * eta_acc * (1.0 + g)));
      }
    } else {
      // One chain per term: the slice chain plus, when combined in acc, the s'−1 combine additions.
      const std::size_t m = roundings_per_term(s, order, n, dot);
      partials = chain(m, 2 * n, u_acc, eta_acc, gamma_acc(m));
      if (to_acc) return finish(s, partials);
    }
    // Each slice rounded to out (1) and s'−1 additions in out: s' roundings of out per term.
    const double g = gamma(slices, unit_roundoff(s.out, s.round));
    return compose(partials, g, static_cast<double>(2 * slices) * underflow_unit(s.out, s.round) * (1.0 + g));
  }
  if (const auto* o = std::get_if<ThreadStrided>(&order)) {
    // Chains in acc, then the per-thread combine and the trees in C (docs/TOLERANCES.md §1, ThreadStrided).
    const ThreadStridedRoundings r = thread_strided_roundings(s, *o, n, dot);
    const Format C = o->combine.value_or(s.acc);
    const std::size_t lanes = o->split_lanes ? o->vec : 1;
    // Operations in C: per thread A conversions and A−1 combine additions, then < T + 32 tree additions.
    const std::size_t outer_ops = o->threads * (o->interleave * lanes + 1) + 32;
    if (C == s.acc) {
      const std::size_t m = r.acc + r.combine;
      return finish(s, chain(m, 2 * n + outer_ops, u_acc, eta_acc, gamma_acc(m)), C);
    }
    const ErrorTerms inner = chain(r.acc, 2 * n, u_acc, eta_acc, gamma_acc(r.acc));
    const double g = gamma(r.combine, unit_roundoff(C, s.round));
    return finish(s, compose(inner, g, static_cast<double>(outer_ops) * underflow_unit(C, s.round) * (1.0 + g)), C);
  }
  const std::size_t m = roundings_per_term(s, order, n, dot);
  ErrorTerms e = chain(m, 2 * n, u_acc, eta_acc, gamma_acc(m));
  if (const auto* o = std::get_if<AnyOrder>(&order); o && dot && o->operand_roundings > 0 && std::isfinite(e.abs)) {
    // An operand rounded in acc may underflow: an absolute η_acc per rounding, times the other operand
    // (|y| <= max_abs, at most the input format's largest value), for each of the 2n operands.
    const double M = std::min(max_abs, info(s.in).max_finite);
    e.abs += static_cast<double>(2 * n * o->operand_roundings) * eta_acc * M * (1.0 + e.rel);
  }
  return finish(s, e);
}

ErrorTerms scaled(ErrorTerms e) { return {safe(e.rel), safe(e.abs)}; }

}  // namespace

double ErrorTerms::at(double condition) const {
  if (std::isinf(rel) || std::isinf(abs) || std::isinf(condition)) return kInf;
  if (std::isnan(condition) || condition < 0.0)
    throw std::invalid_argument("kvconf::ref::ErrorTerms::at: the condition quantity must be >= 0");
  return safe(rel * condition + abs);
}

double unit_roundoff(Format f, RoundOptions o) {
  const double u = info(f).unit_roundoff;
  return o.mode == Rounding::nearest_even ? u : 2.0 * u;
}

double underflow_unit(Format f, RoundOptions o) {
  const FormatInfo& fi = info(f);
  if (o.ftz) return fi.min_normal;
  const double spacing = std::ldexp(1.0, q_min(fi));
  // Half the spacing for nearest-even; for fp64 that is 2^-1075, below double's range: round it up
  // to the spacing itself rather than down to 0.
  if (o.mode == Rounding::nearest_even && spacing / 2.0 > 0.0) return spacing / 2.0;
  return spacing;
}

double gamma(std::size_t m, double u) {
  if (m == 0) return 0.0;
  const double mu = static_cast<double>(m) * u;  // exact: u is a power of two, m < 2^53
  if (mu >= 1.0) return kInf;
  return mu / (1.0 - mu);  // 1 − mu is exact (a multiple of u in (0, 1))
}

std::size_t roundings_per_term(const AccumSpec& s, const Order& order, std::size_t n, bool dot) {
  if (n == 0) return 0;
  const std::size_t leaf = leaf_relatively_exact(s, dot) ? 0 : 1;
  if (std::holds_alternative<Sequential>(order)) return leaf + (n - 1);
  if (const auto* o = std::get_if<AnyOrder>(&order)) {
    // Operands rounded before the product make the product inexact: it is charged a rounding too.
    const std::size_t r = o->operand_roundings;
    return (r > 0 && dot ? r + 1 : leaf) + (n - 1);
  }
  if (std::holds_alternative<Pairwise>(order)) return leaf + ceil_log2(n);
  if (const auto* o = std::get_if<Blocked>(&order)) {
    if (o->b < 1) throw std::invalid_argument("kvconf::ref bounds: Blocked block size b must be >= 1, got 0");
    const std::size_t b = std::min(o->b, n);
    return leaf + (o->tree_inside ? ceil_log2(b) : b - 1) + (ceil_div(n, o->b) - 1);
  }
  if (const auto* o = std::get_if<ThreadStrided>(&order)) {
    const ThreadStridedRoundings r = thread_strided_roundings(s, *o, n, dot);
    return o->combine.value_or(s.acc) == s.acc ? r.acc + r.combine : r.acc;
  }
  if (const auto* o = std::get_if<SplitK>(&order)) {
    if (o->s < 1) throw std::invalid_argument("kvconf::ref bounds: SplitK slice count s must be >= 1, got 0");
    if (o->tensor_core)
      throw std::invalid_argument("kvconf::ref::roundings_per_term: tensor-core slices are not a chain");
    const std::size_t L = ceil_div(n, o->s);
    const std::size_t in_slice = leaf + (L - 1);
    return o->combine == SplitKCombine::accumulator ? in_slice + (ceil_div(n, L) - 1) : in_slice;
  }
  throw std::invalid_argument("kvconf::ref::roundings_per_term: the tensor-core order is not a chain of roundings");
}

ThreadStridedRoundings thread_strided_roundings(const AccumSpec& s, const ThreadStrided& o, std::size_t n, bool dot) {
  const std::size_t T = o.threads, V = o.vec, I = o.interleave;
  if (V < 1 || I < 1) throw std::invalid_argument("kvconf::ref bounds: ThreadStrided vec and interleave must be >= 1");
  const bool ok = o.tree == ThreadTree::warp_first ? (T >= 1 && ((T <= 32 && is_pow2(T)) || (T % 32 == 0 && T <= 1024)))
                                                   : (is_pow2(T) && T <= 1024);
  if (!ok)
    throw std::invalid_argument("kvconf::ref bounds: ThreadStrided thread count " + std::to_string(T) +
                                " is not allowed");
  if (n == 0) return {};
  const std::size_t leaf = leaf_relatively_exact(s, dot) ? 0 : 1;
  const std::size_t G = ceil_div(n, V);
  const std::size_t visits0 = ceil_div(G, T);  // thread 0 visits the most groups
  const std::size_t group = std::min(V, n);    // terms in thread 0's first group
  // Longest accumulator chain: thread 0, slot 0.
  const std::size_t chain_len = ceil_div(visits0, I) * (o.split_lanes ? 1 : group);
  // Accumulators of thread 0 that take a term (the others are +0; adding +0 is exact).
  const std::size_t used = std::min(I, visits0) * (o.split_lanes ? group : 1);
  std::size_t levels = 0;
  if (o.tree == ThreadTree::warp_first) {
    levels = ceil_log2(std::min<std::size_t>(T, 32));
    if (T > 32) levels += ceil_log2(T / 32);  // additions of the +0 padding lanes are exact
  } else {
    levels = ceil_log2(T);
  }
  const Format C = o.combine.value_or(s.acc);
  const std::size_t convert = contains(C, s.acc) ? 0 : 1;
  return {leaf + (chain_len - 1), (used - 1) + levels + convert};
}

ErrorTerms dot_error_terms(const AccumSpec& spec, const Order& order, std::size_t n, double max_abs_operand) {
  const double u = unit_roundoff(spec.acc, spec.round);
  return scaled(terms_impl(spec, order, n, max_abs_operand, true, [u](std::size_t m) { return gamma(m, u); }));
}

double dot_error_bound(const AccumSpec& spec, const Order& order, std::size_t n, double sum_abs,
                       double max_abs_operand) {
  return dot_error_terms(spec, order, n, max_abs_operand).at(sum_abs);
}

ErrorTerms sum_error_terms(const AccumSpec& spec, const Order& order, std::size_t n, double max_abs_operand) {
  const double u = unit_roundoff(spec.acc, spec.round);
  return scaled(terms_impl(spec, order, n, max_abs_operand, false, [u](std::size_t m) { return gamma(m, u); }));
}

double sum_error_bound(const AccumSpec& spec, const Order& order, std::size_t n, double sum_abs,
                       double max_abs_operand) {
  return sum_error_terms(spec, order, n, max_abs_operand).at(sum_abs);
}

double higham_mary_lambda(std::size_t n, double failure_probability, double u) {
  if (!(failure_probability > 0.0 && failure_probability < 1.0))
    throw std::invalid_argument("kvconf::ref::higham_mary_lambda: failure probability must be in (0, 1)");
  if (n == 0) return 0.0;
  // 2n·exp(−λ²(1−u)²/2) = δ  ⇔  λ = sqrt(2·ln(2n/δ)) / (1−u). A larger λ only lowers the failure
  // probability, so round up generously (log/sqrt are within a few ulps).
  const double l = std::sqrt(2.0 * std::log(2.0 * static_cast<double>(n) / failure_probability)) / (1.0 - u);
  return l * (1.0 + 0x1p-40);
}

double higham_mary_gamma(std::size_t m, double lambda, double u) {
  if (m == 0) return 0.0;
  const double md = static_cast<double>(m);
  const double g = std::expm1(lambda * std::sqrt(md) * u + md * u * u / (1.0 - u));
  return std::isfinite(g) ? g : kInf;
}

ErrorTerms probabilistic_dot_error_terms(const AccumSpec& spec, const Order& order, std::size_t n,
                                         double failure_probability) {
  if (spec.round.mode != Rounding::nearest_even)
    throw std::invalid_argument(
        "kvconf::ref::probabilistic_dot_error_terms: the Higham–Mary model needs "
        "round-to-nearest (directed rounding errors are not mean-zero)");
  if (std::holds_alternative<TensorCore>(order) ||
      (std::holds_alternative<SplitK>(order) && std::get<SplitK>(order).tensor_core))
    throw std::invalid_argument(
        "kvconf::ref::probabilistic_dot_error_terms: tensor-core truncation is biased; "
        "use dot_error_terms");
  const double u = unit_roundoff(spec.acc, spec.round);
  const double lambda = higham_mary_lambda(std::max<std::size_t>(n, 1), failure_probability, u);
  return scaled(terms_impl(spec, order, n, kUnknown, true,
                           [u, lambda](std::size_t m) { return higham_mary_gamma(m, lambda, u); }));
}

double probabilistic_dot_error_bound(const AccumSpec& spec, const Order& order, std::size_t n, double sum_abs,
                                     double failure_probability) {
  return probabilistic_dot_error_terms(spec, order, n, failure_probability).at(sum_abs);
}

}  // namespace kvconf::ref
