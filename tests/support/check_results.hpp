// Finding one rule's result among a check's results in a test (a check returns several: oracle_bound and two_sided,
// a trace pair's scenario_path, cached_kv, ...).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>

#include "kvconf/results/check_result.hpp"

namespace kvconf::testing {

// The result named `rule` in r, or nullptr, failing the test, when r has none.
inline const results::CheckResult* find_rule(const results::CheckResults& r, const std::string& rule) {
  for (const results::CheckResult& c : r)
    if (c.rule == rule) return &c;
  ADD_FAILURE() << "no result for rule " << rule << " in\n" << results::describe(r);
  return nullptr;
}

// The same as a value: a default (failing) result when r has none.
inline results::CheckResult rule_of(const results::CheckResults& r, const std::string& rule) {
  const results::CheckResult* c = find_rule(r, rule);
  return c ? *c : results::CheckResult{};
}

// A result from its core numbers (a synthetic record's rule; the checks also fill the structured fields).
inline results::CheckResult make_result(std::string rule, bool pass, double error, double bound, double headroom,
                                        std::uint64_t seed, std::string detail) {
  results::CheckResult r;
  r.rule = std::move(rule);
  r.pass = pass;
  r.error = error;
  r.bound = bound;
  r.headroom = headroom;
  r.seed = seed;
  r.detail = std::move(detail);
  return r;
}

}  // namespace kvconf::testing
