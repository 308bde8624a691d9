// Helpers shared by the report writers (internal): JSON numbers that may be non-finite, number formatting, the
// model×profile grouping, verdicts counted by outcome, escaping.
#pragma once

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "kvconf/numerics/number_text.hpp"
#include "kvconf/results/rule_verdict.hpp"

namespace kvconf::reports::detail {

// JSON has no inf/nan: written as the strings "inf", "-inf", "nan" (as results/src/records.cpp does).
inline nlohmann::json num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}
// Reads back what num() wrote (and plain numbers); NaN for anything else.
inline double as_num(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  return NAN;
}
inline double num_at(const nlohmann::json& j, const char* key) { return j.contains(key) ? as_num(j.at(key)) : NAN; }

// Table numbers: num_short and num_percent (numerics/number_text.hpp), 4 digits by default as the reports print.
inline std::string fmt(double x, int digits = 4) { return num_short(x, digits); }
inline std::string pct(double x, int decimals = 1) { return num_percent(x, decimals); }

// A statistic that could not be computed: {"na": reason}.
inline nlohmann::json na(const std::string& reason) { return {{"na", reason}}; }
inline bool is_na(const nlohmann::json& j) { return j.is_object() && j.contains("na"); }

// Rule verdicts counted by outcome: not applied (skipped), else passed or failed.
struct VerdictCounts {
  std::size_t passed = 0, failed = 0, skipped = 0;
  void add(const results::RuleVerdict& x) {
    if (!x.skipped.empty())
      ++skipped;
    else if (x.pass)
      ++passed;
    else
      ++failed;
  }
};

// XML/HTML text and attribute escaping (& < > " ').
std::string xml_escape(const std::string& s);

}  // namespace kvconf::reports::detail
