// Helpers shared by kvconf's unit tests: per-test seeds (KVCONF_SEED), bit-exact comparison,
// hex printing, mismatch collection with the seed in the message, and seeded random format values.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::test {

// 2^e as a double (exact for every e a double can hold).
inline double p2(int e) { return std::ldexp(1.0, e); }

inline const char* mode_name(Rounding r) {
  switch (r) {
    case Rounding::nearest_even:
      return "rne";
    case Rounding::toward_zero:
      return "rz";
    case Rounding::up:
      return "up";
    case Rounding::down:
      return "down";
    case Rounding::to_odd:
      return "odd";
  }
  return "?";
}

inline std::string opts_str(RoundOptions o) {
  return std::string(mode_name(o.mode)) + (o.ftz ? "+ftz" : "") + (o.saturate ? "+sat" : "");
}

inline std::string hex(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

inline std::string hexbits(std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(b));
  return buf;
}

// Seed of the running test: FNV-1a of its full name, unless KVCONF_SEED overrides it.
inline std::uint64_t test_seed() {
  if (const char* s = std::getenv("KVCONF_SEED"); s != nullptr && *s != '\0') return std::strtoull(s, nullptr, 0);
  const auto* ti = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = std::string(ti->test_suite_name()) + "." + ti->name();
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// Same double, bit for bit (so +0 != -0), or both NaN.
inline bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// Collects mismatches; reports the first few, the total and the seed.
struct Failures {
  std::uint64_t seed = 0;
  bool seeded = false;
  std::uint64_t checked = 0;
  std::uint64_t failed = 0;
  std::string first;

  void set_seed(std::uint64_t s) {
    seed = s;
    seeded = true;
  }
  void add(const std::string& msg) {
    if (++failed <= 10) first += "  " + msg + "\n";
  }
  void merge(const Failures& o) {
    checked += o.checked;
    if (failed < 10) first += o.first;
    failed += o.failed;
  }
  std::string seed_note() const {
    if (!seeded) return "no random draws";
    return "seed " + std::to_string(seed) + ", set KVCONF_SEED=" + std::to_string(seed) + " to reproduce";
  }
  void expect_none(const std::string& what) const {
    EXPECT_EQ(failed, 0u) << what << ": " << failed << " of " << checked << " cases differ from the reference ("
                          << seed_note() << "); first ones:\n"
                          << first;
    ::testing::Test::RecordProperty("cases_checked", std::to_string(checked));
    std::printf("[   info   ] %s: %llu cases checked\n", what.c_str(), static_cast<unsigned long long>(checked));
  }
};

// n values of format f, roughly N(0, sigma²), from a fixed seed.
inline std::vector<double> randn(std::size_t n, Format f, std::uint64_t seed, double sigma = 1.0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd(0.0, sigma);
  std::vector<double> x(n);
  for (auto& v : x) v = round_to(f, nd(g));
  return x;
}

inline AccumSpec spec_of(Format in, Format acc, Format out, bool fma = true, Rounding mode = Rounding::nearest_even) {
  AccumSpec s;
  s.in = in;
  s.acc = acc;
  s.out = out;
  s.fma = fma;
  s.round.mode = mode;
  return s;
}

}  // namespace kvconf::test
