// The experiments' summary helpers (summary_util.hpp).
#include "summary_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kvconf/results/records.hpp"
#include "kvconf/numerics/number_text.hpp"
#include "kvconf/protocol/experiments.hpp"

namespace kvconf::protocol::experiments {
using nlohmann::json;

Groups group_by(const Records& records, const std::vector<std::string>& fields) {
  Groups g;
  for (const json* r : records) {
    std::string k;
    for (const std::string& f : fields) k += (k.empty() ? "" : "  ") + r->at(f).get<std::string>();
    if (!g.by_key.count(k)) g.keys.push_back(k);
    g.by_key[k].push_back(r);
  }
  return g;
}

void add_verdicts(const std::string& experiment, const Records& records, results::ExperimentSummary& s) {
  const Groups g = group_by(records, {"model", "profile"});
  for (const std::string& k : g.keys) {
    std::vector<std::string> rules;
    std::map<std::string, results::ExperimentVerdict> by_rule;
    for (const json* r : g.by_key.at(k)) {
      for (const json& j : r->at("rules")) {
        const results::CheckResult c = results::check_result_from_json(j);
        auto it = by_rule.find(c.rule);
        if (it == by_rule.end()) {
          rules.push_back(c.rule);
          results::ExperimentVerdict v;
          v.suite = "experiment." + experiment + "." + r->at("model").get<std::string>() + "." +
                    r->at("profile").get<std::string>();
          v.result = c;
          v.result.detail = experiment_record_key(*r) + ": " + c.detail;
          it = by_rule.emplace(c.rule, v).first;
        } else {
          results::CheckResult& w = it->second.result;
          const bool worse = (!c.pass && w.pass) || (c.pass == w.pass && c.headroom < w.headroom);
          const bool pass = w.pass && c.pass;
          if (worse) {
            w = c;
            w.detail = experiment_record_key(*r) + ": " + c.detail;
          }
          w.pass = pass;
        }
        ++it->second.records;
      }
    }
    for (const std::string& rule : rules) s.verdicts.push_back(by_rule.at(rule));
  }
}

std::string num(double x, int digits) { return std::isnan(x) ? "n/a" : num_short(x, digits); }

std::string pct(double x) { return std::isnan(x) ? "n/a" : num_percent(x); }

double median(std::vector<double> x) {
  std::erase_if(x, [](double v) { return std::isnan(v); });
  if (x.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(x.begin(), x.end());
  const std::size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double mean(const std::vector<double>& x) {
  double s = 0.0;
  std::size_t n = 0;
  for (double v : x)
    if (!std::isnan(v)) s += v, ++n;
  return n ? s / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> doubles(const json& a) {
  std::vector<double> out;
  for (const json& v : a) out.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
  return out;
}

}  // namespace kvconf::protocol::experiments
