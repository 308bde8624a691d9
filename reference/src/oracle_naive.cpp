// Straightforward Boost mpfr_float attention and softmax (the oracle's cross-check and benchmark baseline).
#include "kvconf/reference/oracle_naive.hpp"

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "kvconf/reference/mpfr_format.hpp"

namespace kvconf::ref::naive {
namespace {

using boost::multiprecision::mpfr_float;

unsigned digits10_for(unsigned bits) {
  unsigned d10 = 1;
  while (boost::multiprecision::detail::digits10_2_2(d10) < bits) ++d10;
  return d10;
}

// Sets mpfr_float's default precision for the scope.
class PrecisionScope {
 public:
  explicit PrecisionScope(unsigned bits) : old_(mpfr_float::default_precision()) {
    mpfr_float::default_precision(digits10_for(bits));
  }
  ~PrecisionScope() { mpfr_float::default_precision(old_); }

 private:
  unsigned old_;
};

}  // namespace

unsigned boost_bits(unsigned bits) {
  return static_cast<unsigned>(boost::multiprecision::detail::digits10_2_2(digits10_for(bits)));
}

std::vector<double> attention(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                              const AttentionShape& sh, const AttentionParams& pr, Format out, RoundOptions round,
                              unsigned bits) {
  const PrecisionScope scope(bits);
  const std::size_t H = sh.n_heads, Hk = sh.n_kv_heads, d = sh.d, dv = sh.d_v;
  std::vector<double> o(sh.n_q * H * dv, 0.0);
  std::vector<mpfr_float> s, e;
  std::vector<std::size_t> js;
  const mpfr_float scale =
      pr.exact_inv_sqrt_d ? mpfr_float(1) / sqrt(mpfr_float(static_cast<unsigned>(d))) : mpfr_float(pr.scale);
  const mpfr_float cap(pr.softcap);
  for (std::size_t i = 0; i < sh.n_q; ++i) {
    const std::int64_t pos = pr.q_offset + static_cast<std::int64_t>(i);
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t g = h / (H / Hk);
      s.clear();
      js.clear();
      for (std::size_t j = 0; j < sh.n_kv; ++j) {
        const std::int64_t dist = pos - static_cast<std::int64_t>(j);
        if (pr.causal && dist < 0) continue;
        if (pr.window > 0 && (pr.causal ? dist >= pr.window : std::llabs(dist) >= pr.window)) continue;
        mpfr_float acc = 0;
        for (std::size_t t = 0; t < d; ++t) acc += mpfr_float(q[(i * H + h) * d + t]) * k[(j * Hk + g) * d + t];
        mpfr_float z = acc * scale;
        if (pr.softcap > 0) z = cap * tanh(z / cap);
        s.push_back(z);
        js.push_back(j);
      }
      if (s.empty()) continue;
      mpfr_float m = s[0];
      for (const auto& z : s)
        if (z > m) m = z;
      e.resize(s.size());
      mpfr_float S = 0;
      for (std::size_t t = 0; t < s.size(); ++t) {
        e[t] = exp(s[t] - m);
        S += e[t];
      }
      for (std::size_t c = 0; c < dv; ++c) {
        mpfr_float acc = 0;
        for (std::size_t t = 0; t < s.size(); ++t) acc += e[t] * v[(js[t] * Hk + g) * dv + c];
        const mpfr_float oc = acc / S;
        o[(i * H + h) * dv + c] = round_mpfr(out, oc.backend().data(), round);
      }
    }
  }
  return o;
}

std::vector<double> softmax(std::span<const double> scores, Format out, RoundOptions round, unsigned bits) {
  const PrecisionScope scope(bits);
  std::vector<double> p(scores.size(), 0.0);
  double m = -HUGE_VAL;
  for (const double x : scores) m = std::max(m, x);
  if (!std::isfinite(m)) return p;
  mpfr_float S = 0;
  std::vector<mpfr_float> e(scores.size());
  for (std::size_t j = 0; j < scores.size(); ++j) {
    if (!std::isfinite(scores[j])) continue;
    e[j] = exp(mpfr_float(scores[j]) - m);
    S += e[j];
  }
  for (std::size_t j = 0; j < scores.size(); ++j) {
    if (!std::isfinite(scores[j])) continue;
    const mpfr_float pj = e[j] / S;
    p[j] = round_mpfr(out, pj.backend().data(), round);
  }
  return p;
}

}  // namespace kvconf::ref::naive
