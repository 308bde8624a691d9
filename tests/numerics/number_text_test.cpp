// numerics/number_text.hpp: each meaning's format (round-trip, measured, short, option, percent).
#include "kvconf/numerics/number_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace kvconf {
namespace {

TEST(NumberText, ExactRoundTrips) {
  for (double x : {0.1, 1.0 / 3.0, 5.960464477539063e-08, -1e300, 0.0})
    EXPECT_EQ(std::strtod(num_exact(x).c_str(), nullptr), x) << num_exact(x);
  EXPECT_EQ(num_exact(0.1), "0.10000000000000001");
}

TEST(NumberText, EachMeaningItsPrecision) {
  EXPECT_EQ(num_measured(1.0 / 3.0), "0.333333333");
  EXPECT_EQ(num_short(1.0 / 3.0), "0.333");
  EXPECT_EQ(num_short(1.0 / 3.0, 4), "0.3333");
  EXPECT_EQ(num_option(0.9), "0.9");
  EXPECT_EQ(num_option(1.0), "1");
  EXPECT_EQ(num_percent(0.1234), "12.3%");
  EXPECT_EQ(num_percent(0.1234, 2), "12.34%");
}

TEST(NumberText, NonFiniteSpelledOut) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(num_short(-std::nan("")), "nan");  // never "-nan"
  EXPECT_EQ(num_short(inf), "inf");
  EXPECT_EQ(num_short(-inf), "-inf");
  EXPECT_EQ(num_percent(std::nan("")), "nan");
}

}  // namespace
}  // namespace kvconf
