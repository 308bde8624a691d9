// Helpers the experiments' summaries share: grouping records by condition, one verdict per (group, rule) from the
// records' rule results (worst headroom wins), number formatting, medians.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvconf/results/experiment_summary.hpp"

namespace kvconf::protocol::experiments {

using Records = std::vector<const nlohmann::json*>;

// "model  profile" -> records, in first-seen order (keys) — the unit of a verdict.
struct Groups {
  std::vector<std::string> keys;
  std::map<std::string, Records> by_key;
};
Groups group_by(const Records& records, const std::vector<std::string>& fields);  // e.g. {"profile", "strategy"}

// One verdict per rule found in the records of each (model, profile) group: pass when every record's result passes;
// error/bound/headroom/detail of the worst (smallest headroom) record, detail prefixed with its key.
void add_verdicts(const std::string& experiment, const Records& records, results::ExperimentSummary& s);

std::string num(double x, int digits = 3);             // "%.3g", "n/a" for NaN
std::string pct(double x);                             // "12.3%", "n/a" for NaN
double median(std::vector<double> x);                  // NaN when empty
double mean(const std::vector<double>& x);             // NaN when empty
std::vector<double> doubles(const nlohmann::json& a);  // a JSON array of numbers (null -> NaN)

}  // namespace kvconf::protocol::experiments
