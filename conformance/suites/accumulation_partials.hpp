// The partial sums an accumulation order rounds, for the accumulation suite's model of the fp32 accumulation error
// (docs/TOLERANCES.md "Accumulation (Experiment 1)", term A): under the Higham–Mary model every rounding r of a
// partial value P̂_r adds δ_r·P̂_r with E[δ_r | past] = 0, |δ_r| <= u, so the error is a martingale with
// E[e²] <= Σ_r c_r² and P(|e| >= λ·√Σ c_r²) <= 2·exp(−λ²/2) (Azuma–Hoeffding), c_r = u·(|P_r| + B)·(1 + u)^m.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace kvconf::conformance::accumulation {

// How an order's roundings are laid out over the terms (dot products with FMA: leaf products are exact in fp32).
enum class Shape {
  chain,       // one sequential chain
  pairwise,    // level-wise adjacent pairs
  blocked,     // sequential chains over blocks of `block` terms, then a chain over the block results
  generic,     // any other round-to-nearest order with n − 1 additions: |P_r| <= Σ|t| for every rounding
  truncating,  // tensor-core truncation: biased, no martingale model (deterministic bound only)
};

// Σ_r (|P_r| + B)² over the roundings of a chain over t[lo, hi) (the first term is the exact leaf); the chain's
// value is returned in `value`.
inline double chain_sq(const std::vector<double>& t, std::size_t lo, std::size_t hi, double B, double& value) {
  double s = lo < hi ? t[lo] : 0.0, acc = 0.0;
  for (std::size_t k = lo + 1; k < hi; ++k) {
    s += t[k];
    acc += (std::fabs(s) + B) * (std::fabs(s) + B);
  }
  value = s;
  return acc;
}

// Σ_r (|P_r| + B)² for the order; t: (n) the exact products x_i·y_i; B bounds |P̂_r − P_r| (the deterministic
// accumulation bound of the whole dot product bounds that of every partial).
inline double rounded_partials_sq(Shape shape, std::size_t block, const std::vector<double>& t, double abs_sum,
                                  double B) {
  const std::size_t n = t.size();
  double v = 0.0;
  switch (shape) {
    case Shape::chain:
      return chain_sq(t, 0, n, B, v);
    case Shape::pairwise: {
      std::vector<double> cur = t, next;
      double acc = 0.0;
      while (cur.size() > 1) {
        next.clear();
        for (std::size_t j = 0; j + 1 < cur.size(); j += 2) {
          next.push_back(cur[j] + cur[j + 1]);
          acc += (std::fabs(next.back()) + B) * (std::fabs(next.back()) + B);
        }
        if (cur.size() % 2 == 1) next.push_back(cur.back());
        cur.swap(next);
      }
      return acc;
    }
    case Shape::blocked: {
      std::vector<double> blocks;
      double acc = 0.0;
      for (std::size_t lo = 0; lo < n; lo += block) {
        acc += chain_sq(t, lo, std::min(n, lo + block), B, v);
        blocks.push_back(v);
      }
      return acc + chain_sq(blocks, 0, blocks.size(), B, v);
    }
    case Shape::generic:
      return n > 1 ? static_cast<double>(n - 1) * (abs_sum + B) * (abs_sum + B) : 0.0;
    case Shape::truncating:
      break;
  }
  return HUGE_VAL;
}

}  // namespace kvconf::conformance::accumulation
