// Divergence metrics between two logit vectors (KL, JS, top-1/top-2 margin, largest difference), hidden-state drift
// and the flip index of two token sequences. Everything is computed in double.
#include "kvconf/analysis/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

namespace kvconf::analysis {

void check_same_length(const char* fn, std::size_t a, std::size_t b) {
  if (a != b)
    throw std::invalid_argument(std::string(fn) + ": lengths differ (" + std::to_string(a) + " vs " +
                                std::to_string(b) + ")");
  if (a == 0) throw std::invalid_argument(std::string(fn) + ": empty input");
}

std::vector<double> log_softmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("log_softmax: empty input");
  double m = -std::numeric_limits<double>::infinity();
  for (float x : logits) m = std::max(m, static_cast<double>(x));
  double s = 0.0;
  for (float x : logits) s += std::exp(static_cast<double>(x) - m);
  const double ls = std::log(s);
  std::vector<double> out(logits.size());  // (vocab)
  // (x − m) − log s, not x − (m + log s): x − m of two floats is exact in double, and rounding m + log s would lose
  // the low bits of log s when |m| is large (shifted logits then give exactly the same result).
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = (static_cast<double>(logits[i]) - m) - ls;
  return out;
}

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  check_same_length("kl_divergence", p_logits.size(), q_logits.size());
  const std::vector<double> lp = log_softmax(p_logits), lq = log_softmax(q_logits);  // (vocab)
  double kl = 0.0;
  for (std::size_t i = 0; i < lp.size(); ++i) {
    const double p = std::exp(lp[i]);
    if (p > 0.0) kl += p * (lp[i] - lq[i]);  // 0 · log 0 = 0
  }
  return std::max(kl, 0.0);  // rounding can leave a tiny negative sum for (nearly) equal distributions
}

double js_divergence(std::span<const float> p_logits, std::span<const float> q_logits) {
  check_same_length("js_divergence", p_logits.size(), q_logits.size());
  const std::vector<double> lp = log_softmax(p_logits), lq = log_softmax(q_logits);  // (vocab)
  // JS = ½ KL(P‖M) + ½ KL(Q‖M), M = (P + Q) / 2. With a = log p − log q: log p − log m = ln 2 − softplus(−a) and
  // log q − log m = ln 2 − softplus(a), so equal entries contribute exactly 0 and swapping P and Q is exact.
  const auto softplus = [](double t) { return t > 0 ? t + std::log1p(std::exp(-t)) : std::log1p(std::exp(t)); };
  double js = 0.0;
  for (std::size_t i = 0; i < lp.size(); ++i) {
    const double p = std::exp(lp[i]), q = std::exp(lq[i]);
    if (p == 0.0 && q == 0.0) continue;
    const double a = lp[i] - lq[i];  // ±inf when one side is 0: its term is 0 · (...) and skipped below
    const double tp = p > 0.0 ? 0.5 * p * (std::numbers::ln2 - softplus(-a)) : 0.0;
    const double tq = q > 0.0 ? 0.5 * q * (std::numbers::ln2 - softplus(a)) : 0.0;
    js += tp + tq;
  }
  return std::clamp(js, 0.0, std::numbers::ln2);
}

Top2 top2(std::span<const float> logits) {
  if (logits.size() < 2) throw std::invalid_argument("top2: needs at least two logits");
  Top2 t;
  for (std::size_t i = 0; i < logits.size(); ++i) {  // NaN entries are never ranked
    if (std::isnan(logits[i])) continue;
    const int k = static_cast<int>(i);
    if (t.top1 < 0 || logits[i] > logits[static_cast<std::size_t>(t.top1)]) {
      t.top2 = t.top1;
      t.top1 = k;
    } else if (t.top2 < 0 || logits[i] > logits[static_cast<std::size_t>(t.top2)]) {
      t.top2 = k;
    }
  }
  if (t.top1 >= 0 && t.top2 >= 0)
    t.margin = static_cast<double>(logits[static_cast<std::size_t>(t.top1)]) -
               static_cast<double>(logits[static_cast<std::size_t>(t.top2)]);
  return t;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  check_same_length("max_abs_diff", a.size(), b.size());
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d)) return d;  // a NaN on either side is reported, not hidden
    m = std::max(m, d);
  }
  return m;
}

Drift drift(std::span<const float> a, std::span<const float> b) {
  check_same_length("drift", a.size(), b.size());
  double d2 = 0.0, ab = 0.0, aa = 0.0, bb = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    d2 += (x - y) * (x - y);
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  Drift d;
  d.l2 = std::sqrt(d2);
  if (aa == 0.0 && bb == 0.0)
    d.cosine = 1.0;
  else if (aa == 0.0 || bb == 0.0)
    d.cosine = 0.0;
  else {
    // sqrt(aa·bb): for a == b it is exactly aa (sqrt(x²) == |x| under RNE), so identical vectors give cosine 1.
    const double p = aa * bb;
    const double den = std::isfinite(p) && p > 0.0 ? std::sqrt(p) : std::sqrt(aa) * std::sqrt(bb);
    d.cosine = std::clamp(ab / den, -1.0, 1.0);
  }
  return d;
}

std::optional<std::size_t> flip_index(std::span<const int> a, std::span<const int> b) {
  const std::size_t n = std::min(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return i;
  if (a.size() != b.size()) return n;
  return std::nullopt;
}

}  // namespace kvconf::analysis
