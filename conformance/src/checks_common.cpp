// Helpers shared by the conformance checks: rigorous error measurement, ulps, results and headroom,
// sub-seeds, and the naive same-precision GEMM and attention references of the two-sided rule.
#include "checks_common.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/numerics/format.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::conformance {

namespace detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

double diff_up(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return 0.0;
  const double s = a - b;
  if (std::isinf(s)) return kInf;
  // TwoSum: s + t = a − b exactly.
  const double bb = s - a;
  const double t = (a - (s - bb)) + (-b - bb);
  const double d = std::fabs(s);
  return t == 0.0 ? d : std::nextafter(d, kInf);
}

double error_up(double computed, double approx) {
  const double d = diff_up(computed, approx);
  if (std::isnan(d) || std::isinf(d)) return d;
  const double a = std::fabs(approx);
  const double u = std::nextafter(a, kInf) - a;  // one ulp of double at approx (exact)
  return std::nextafter(d + u, kInf);
}

double ulp(Format f, double x) {
  const FormatInfo& fi = info(f);
  double a = std::fabs(x);
  if (!(a < fi.max_finite)) a = fi.max_finite;
  if (a < fi.min_normal) return fi.min_subnormal;
  int e = 0;
  std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - fi.p);
}

std::uint64_t ulp_distance(Format f, double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<std::uint64_t>::max();
  const int bits = info(f).bits;
  auto ordered = [&](double x) -> std::int64_t {
    const std::uint32_t e = encode(f, x);
    const std::uint32_t sign = 1u << (bits - 1);
    const std::int64_t mag = static_cast<std::int64_t>(e & (sign - 1));
    return (e & sign) ? -mag : mag;
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

double ulp_error(Format f, double a, double b) {
  const double d = diff_up(a, b);
  if (std::isnan(d)) return d;
  if (d == 0.0) return 0.0;
  return d / ulp(f, std::max(std::fabs(a), std::fabs(b)));
}

double headroom(double error, double bound) {
  if (std::isnan(error) || std::isnan(bound)) return -kInf;
  if (error <= bound) {
    if (std::isinf(bound)) return -kInf;  // a vacuous bound checks nothing (the result fails)
    if (bound == 0.0) return 1.0;
    return (bound - error) / bound;
  }
  if (bound == 0.0 || std::isinf(error)) return -kInf;
  return (bound - error) / bound;
}

CheckResult bound_result(std::string rule, double error, double bound, std::uint64_t seed, std::string detail) {
  CheckResult r;
  r.rule = std::move(rule);
  r.error = error;
  r.bound = bound;
  r.pass = !std::isnan(error) && !std::isnan(bound) && !std::isinf(bound) && error <= bound;
  r.headroom = headroom(error, bound);
  r.seed = seed;
  r.detail = std::move(detail);
  if (std::isinf(bound)) r.detail = "vacuous bound (+inf): nothing is checked; " + r.detail;
  return r;
}

CheckResult bitwise_result(std::string rule, double error, std::uint64_t seed, std::string detail) {
  CheckResult r;
  r.rule = std::move(rule);
  r.error = error;
  r.bound = 0.0;
  r.pass = error == 0.0;
  r.headroom = r.pass ? 1.0 : -kInf;
  r.seed = seed;
  r.detail = std::move(detail);
  return r;
}

CheckResult unsupported_result(const std::string& rule, const std::string& reason, std::uint64_t seed) {
  CheckResult r;
  r.rule = rule;
  r.pass = false;
  r.error = kInf;
  r.bound = 0.0;
  r.headroom = -kInf;
  r.seed = seed;
  r.detail = "the kernel does not support a call this rule needs: " + reason + " (seed " + std::to_string(seed) + ")";
  return r;
}

void Worst::add(std::size_t i, double e, double b) {
  ++count;
  const bool nan = std::isnan(e) || std::isnan(b);
  if (nan || std::isnan(max_error))
    max_error = std::numeric_limits<double>::quiet_NaN();
  else
    max_error = std::max(max_error, e);
  double r = 0.0;
  if (nan)
    r = kInf;
  else if (e == 0.0)
    r = 0.0;
  else
    r = b == 0.0 ? kInf : e / b;  // b = +inf gives 0
  if (nan || !(e <= b)) ++failed;
  if (r > ratio) {
    ratio = r;
    error = nan ? std::numeric_limits<double>::quiet_NaN() : e;
    bound = b;
    index = i;
  }
}

void Comparison::add(double a, double b, std::size_t ctx, std::size_t index, double bound) {
  ++count;
  const bool same = std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
  if (!same) ++differ;
  const double d = diff_up(a, b);
  if (std::isnan(d)) {
    if (!std::isnan(max_diff)) {
      diff_ctx = ctx;
      diff_index = index;
    }
    max_diff = std::numeric_limits<double>::quiet_NaN();
  } else if (!std::isnan(max_diff) && d > max_diff) {
    max_diff = d;
    diff_ctx = ctx;
    diff_index = index;
  }
  if (!std::isnan(b)) max_abs_b = std::max(max_abs_b, std::fabs(b));
  if (!same) {
    const double u = ulp_error(out, a, b);
    if (std::isnan(u) || std::isnan(max_ulp))
      max_ulp = std::numeric_limits<double>::quiet_NaN();
    else
      max_ulp = std::max(max_ulp, u);
  }
  if (!bitwise) {
    const double before = worst.ratio;
    worst.add(where.size(), d, bound);
    where.emplace_back(ctx, index);
    if (worst.ratio > before || where.size() == 1) {
      worst_a = a;
      worst_b = b;
    }
  }
}

double Comparison::bitwise_error() const {
  if (std::isnan(max_diff) || max_diff > 0.0) return max_diff;
  return differ > 0 ? std::numeric_limits<double>::denorm_min() : 0.0;
}

double Comparison::max_rel() const {
  if (std::isnan(max_diff)) return max_diff;
  if (max_diff == 0.0) return 0.0;
  return max_abs_b > 0.0 ? max_diff / max_abs_b : std::numeric_limits<double>::infinity();
}

std::string Comparison::stats() const {
  std::string s = "differing=";
  s += std::to_string(differ);
  s += "/";
  s += std::to_string(count);
  s += " max_ulp=";
  s += num(max_ulp);
  s += " max_rel(normwise)=";
  s += num(max_rel());
  return s;
}

std::uint64_t sub_seed(std::uint64_t seed, const char* tag) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = tag; *c != '\0'; ++c) {
    h ^= static_cast<unsigned char>(*c);
    h *= 1099511628211ull;
  }
  std::uint64_t z = seed ^ h;  // splitmix64 finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<double> to_double(std::span<const float> x) { return {x.begin(), x.end()}; }

float naive_dot(Format acc, Format out, const float* x, const float* w, std::size_t k) {
  float s = 0.0f;
  if (acc == Format::fp32) {
    for (std::size_t i = 0; i < k; ++i) s = std::fmaf(x[i], w[i], s);
  } else {
    for (std::size_t i = 0; i < k; ++i) s = kernels::fma_format(acc, x[i], w[i], s);
  }
  return kernels::round_float(out, s);
}

bool visible(const ref::AttentionParams& p, std::int64_t pos, std::int64_t j) {
  if (p.causal) {
    if (j > pos) return false;
    return p.window <= 0 || pos - j < p.window;
  }
  return p.window <= 0 || std::llabs(pos - j) < p.window;
}

std::vector<float> naive_attention(Format in, Format qk_out, Format score, Format out, Format partial,
                                   const kernels::AttentionCall& call, std::span<const float> q,
                                   std::span<const float> k, std::span<const float> v) {
  const auto& sh = call.shape;
  const auto& p = call.params;
  const std::size_t group = sh.n_heads / sh.n_kv_heads;
  const bool cast_p = in == Format::fp16 || in == Format::bf16;
  const float scale = static_cast<float>(p.scale);
  const float cap = static_cast<float>(p.softcap);
  // Each step of the P·V chain rounded to `partial` when it is narrower than fp32 (exact otherwise).
  const auto step = [partial](float x) { return partial == Format::fp32 ? x : kernels::round_float(partial, x); };
  std::vector<float> o(sh.n_q * sh.n_heads * sh.d_v, 0.0f);  // (n_q, H, d_v)
  std::vector<float> s(sh.n_kv);
  std::vector<float> acc(sh.d_v);
  std::vector<std::size_t> vis;
  for (std::size_t i = 0; i < sh.n_q; ++i) {
    const std::int64_t pos = p.q_offset + static_cast<std::int64_t>(i);
    vis.clear();
    for (std::size_t j = 0; j < sh.n_kv; ++j)
      if (visible(p, pos, static_cast<std::int64_t>(j))) vis.push_back(j);
    for (std::size_t h = 0; h < sh.n_heads; ++h) {
      if (vis.empty()) continue;
      const std::size_t kh = h / group;
      const float* qr = &q[(i * sh.n_heads + h) * sh.d];
      float m = -std::numeric_limits<float>::infinity();
      for (std::size_t j : vis) {
        const float* kr = &k[(j * sh.n_kv_heads + kh) * sh.d];
        float d = 0.0f;
        for (std::size_t c = 0; c < sh.d; ++c) d = std::fmaf(qr[c], kr[c], d);
        d = kernels::round_float(qk_out, d);
        float z = kernels::round_float(score, d * scale);
        if (cap > 0.0f) {
          const float t = kernels::round_float(score, kernels::tanh_f32(kernels::round_float(score, z / cap)));
          z = kernels::round_float(score, cap * t);
        }
        s[j] = z;
        m = std::max(m, z);
      }
      float l = 0.0f;
      for (std::size_t j : vis) {
        s[j] = kernels::exp_f32(s[j] - m);
        l += s[j];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::size_t j : vis) {
        float pj = s[j] / l;
        if (cast_p) pj = kernels::round_float(in, pj);
        const float* vr = &v[(j * sh.n_kv_heads + kh) * sh.d_v];
        for (std::size_t c = 0; c < sh.d_v; ++c) acc[c] = step(std::fmaf(pj, vr[c], acc[c]));
      }
      float* orow = &o[(i * sh.n_heads + h) * sh.d_v];
      for (std::size_t c = 0; c < sh.d_v; ++c) orow[c] = kernels::round_float(out, acc[c]);
    }
  }
  return o;
}

}  // namespace detail
}  // namespace kvconf::conformance

namespace kvconf::conformance::detail {

ref::ErrorTerms reduction_terms(const AccumSpec& spec, const Order& order, std::size_t n, double max_abs) {
  const ref::ErrorTerms t = ref::dot_error_terms(spec, order, n, max_abs);
  if (std::isfinite(t.rel) && std::isfinite(t.abs)) return t;
  try {
    return ref::probabilistic_dot_error_terms(spec, order, n, kProbabilisticFailure);
  } catch (const std::invalid_argument&) {
    return t;  // directed rounding or tensor cores: no probabilistic bound; stays vacuous
  }
}

}  // namespace kvconf::conformance::detail
