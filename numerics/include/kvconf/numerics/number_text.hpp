// Numbers as text, one formatter per meaning, for every message, table and file kvconf writes.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace kvconf {

// printf's "%.<digits>g".
inline std::string num_g(double x, int digits) {
  char b[40];
  std::snprintf(b, sizeof b, "%.*g", digits, x);
  return b;
}

// Round-trips a double ("%.17g"): golden files, test properties, anything read back as a number.
inline std::string num_exact(double x) { return num_g(x, 17); }

// A measured error or bound in a check's message ("%.9g": enough to tell neighbouring floats apart).
inline std::string num_measured(double x) { return num_g(x, 9); }

// A number for a person to read in a table or a summary ("%.<digits>g"; "nan", "inf", "-inf").
inline std::string num_short(double x, int digits = 3) { return std::isnan(x) ? "nan" : num_g(x, digits); }

// A value the user gave as an option, echoed back ("%g", i.e. 6 digits: 0.9 -> "0.9", 1 -> "1").
inline std::string num_option(double x) { return num_g(x, 6); }

// A fraction as a percentage ("12.3%"); a non-finite one as num_short gives it.
inline std::string num_percent(double x, int decimals = 1) {
  if (!std::isfinite(x)) return num_short(x);
  char b[40];
  std::snprintf(b, sizeof b, "%.*f%%", decimals, 100.0 * x);
  return b;
}

}  // namespace kvconf
