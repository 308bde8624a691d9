// Input checks shared by the statistics (stats_*.cpp): each throws std::invalid_argument whose message starts with
// the public function's name, so a caller sees e.g. "welch_t: x has 1 value, needs at least 2".
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

namespace kvconf::analysis::stats_detail {

[[noreturn]] inline void fail(const char* fn, const std::string& what) {
  throw std::invalid_argument(std::string(fn) + ": " + what);
}

inline void require_same_length(const char* fn, std::size_t a, std::size_t b) {
  if (a != b) fail(fn, "lengths differ (" + std::to_string(a) + " vs " + std::to_string(b) + ")");
}

inline void require_at_least(const char* fn, const char* name, std::size_t n, std::size_t min) {
  if (n < min)
    fail(fn, std::string(name) + " has " + std::to_string(n) + (n == 1 ? " value" : " values") + ", needs at least " +
                 std::to_string(min));
}

inline void require_finite(const char* fn, const char* name, std::span<const double> v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) fail(fn, std::string(name) + "[" + std::to_string(i) + "] is not finite");
}

inline double mean_of(std::span<const double> v) {
  double s = 0.0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Sample variance with divisor n − 1 (two-pass: centred sum of squares).
inline double sample_variance(std::span<const double> v) {
  const double m = mean_of(v);
  double ss = 0.0;
  for (double x : v) ss += (x - m) * (x - m);
  return ss / static_cast<double>(v.size() - 1);
}

}  // namespace kvconf::analysis::stats_detail
