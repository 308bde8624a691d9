// Decoding strategies (greedy, top-k, top-p with temperature) and the per-step uniform draw shared by both paths of a
// comparison. The order of operations follows HF generate: logits / T, then the top-k or top-p filter, then softmax.
#include "kvconf/engine/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kvconf/numerics/number_text.hpp"

namespace kvconf::engine {
namespace {

// Arg-max, lowest index on ties; NaN entries are never chosen (0 when every entry is NaN).
int argmax(std::span<const float> logits) {
  std::size_t best = logits.size();
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best == logits.size() || logits[i] > logits[best]) best = i;
  }
  return best == logits.size() ? 0 : static_cast<int>(best);
}

void check(const Sampler& s, std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("sample: empty logits");
  if (s.strategy == Strategy::greedy) return;
  if (!(s.temperature > 0.0) || !std::isfinite(s.temperature))
    throw std::invalid_argument("sample: temperature must be > 0 (got " + num_option(s.temperature) + ")");
  if (s.strategy == Strategy::top_k && s.top_k == 0) throw std::invalid_argument("sample: top_k must be >= 1");
  if (s.strategy == Strategy::top_p && !(s.top_p > 0.0 && s.top_p <= 1.0))
    throw std::invalid_argument("sample: top_p must be in (0, 1] (got " + num_option(s.top_p) + ")");
}

}  // namespace

const char* strategy_key(Strategy s) {
  switch (s) {
    case Strategy::greedy:
      return "greedy";
    case Strategy::top_k:
      return "topk";
    case Strategy::top_p:
      return "topp";
  }
  return "?";
}

std::string Sampler::name() const {
  switch (strategy) {
    case Strategy::greedy:
      return "greedy";
    case Strategy::top_k:
      return "topk" + std::to_string(top_k) + "_t" + num_option(temperature);
    case Strategy::top_p:
      return "topp" + num_option(top_p) + "_t" + num_option(temperature);
  }
  return "?";
}

Strategy parse_strategy(std::string_view s) {
  if (s == "greedy") return Strategy::greedy;
  if (s == "topk") return Strategy::top_k;
  if (s == "topp") return Strategy::top_p;
  throw std::invalid_argument("unknown sampling strategy '" + std::string(s) + "' (choices: greedy, topk, topp)");
}

// Output number `step` (0-based) of a SplitMix64 generator seeded with `seed` (Steele, Lea & Flood 2014; constants
// of Vigna's splitmix64.c), its top 53 bits scaled to [0, 1).
double step_draw(std::uint64_t seed, std::size_t step) {
  std::uint64_t z = seed + (static_cast<std::uint64_t>(step) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int sample(const Sampler& s, std::span<const float> logits, double u) {
  check(s, logits);
  if (s.strategy == Strategy::greedy) return argmax(logits);

  // z = logits / T in double; NaN never kept (as -inf).
  const std::size_t n = logits.size();
  std::vector<double> z(n);  // (vocab)
  for (std::size_t i = 0; i < n; ++i)
    z[i] = std::isnan(logits[i]) ? -std::numeric_limits<double>::infinity()
                                 : static_cast<double>(logits[i]) / s.temperature;
  // Tokens by (probability desc, index asc): probability is monotone in z.
  std::vector<int> order(n);  // (vocab)
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  const double zmax = z[static_cast<std::size_t>(argmax(logits))];
  if (zmax == -std::numeric_limits<double>::infinity()) return argmax(logits);  // nothing has mass
  // Unnormalized weights exp(z - zmax); the maxima weigh 1 (also when zmax = +inf).
  const auto weight = [&](int i) { return z[i] == zmax ? 1.0 : std::exp(z[i] - zmax); };

  std::size_t kept = 0;
  if (s.strategy == Strategy::top_k) {
    kept = std::min(s.top_k, n);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
    double total = 0.0;
    for (int i : order) total += weight(i);
    double mass = 0.0;
    while (kept < n) {  // the smallest prefix whose probability mass reaches p (at least one token)
      mass += weight(order[kept]) / total;
      ++kept;
      if (mass >= s.top_p) break;
    }
  }
  // Renormalized over the kept tokens taken in vocabulary order (as torch.multinomial walks the filtered
  // distribution): the first whose cumulative mass exceeds u. Walking them in probability order instead would let a
  // rounding-sized swap of two near-equal probabilities move a whole token's mass across u.
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept));
  std::vector<double> w(kept);  // (kept)
  double sum = 0.0;
  for (std::size_t r = 0; r < kept; ++r) sum += (w[r] = weight(order[r]));
  const double target = u * sum;
  double cum = 0.0;
  for (std::size_t r = 0; r < kept; ++r) {
    cum += w[r];
    if (cum > target) return order[r];
  }
  return order[kept - 1];  // u so close to 1 that rounding left the cumulative mass below it
}

}  // namespace kvconf::engine
