// Building a golden baseline from run records, and comparing a fresh run with it (what changed, per key and field).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "kvconf/numerics/number_text.hpp"
#include "kvconf/golden/golden.hpp"

namespace kvconf::golden {

using results::KernelCaseRecord;
using results::RunPairRecord;

namespace {

// Inside the band: equal (non-finite values included), or within error_rel relative to the larger magnitude.
bool within(double old_v, double new_v, double rel) {
  if (old_v == new_v) return true;
  if (std::isnan(old_v) && std::isnan(new_v)) return true;
  if (!std::isfinite(old_v) || !std::isfinite(new_v)) return false;
  return std::abs(new_v - old_v) <= rel * std::max(std::abs(old_v), std::abs(new_v));
}

std::string tokens_str(const std::vector<int>& t) {
  std::string s = "[";  // built by appending (GCC 12 warns falsely, -Wrestrict, on "literal" + std::string chains)
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(t[i]);
  }
  s += ']';
  return s;
}

void compare_tokens(const std::string& key, const std::string& field, const std::vector<int>& old_t,
                    const std::vector<int>& new_t, std::vector<Change>& out) {
  if (old_t.size() != new_t.size()) {
    out.push_back({key, field + ".length", std::to_string(old_t.size()), std::to_string(new_t.size())});
    return;
  }
  for (std::size_t i = 0; i < old_t.size(); ++i)
    if (old_t[i] != new_t[i]) {
      // The first differing step names the change; the whole sequences follow so it can be read in one line.
      out.push_back({key, field + "[" + std::to_string(i) + "]", std::to_string(old_t[i]) + " of " + tokens_str(old_t),
                     std::to_string(new_t[i]) + " of " + tokens_str(new_t)});
      return;
    }
}

void compare_num(const std::string& key, const std::string& field, double old_v, double new_v, double rel,
                 std::vector<Change>& out) {
  if (!within(old_v, new_v, rel)) out.push_back({key, field, num_exact(old_v), num_exact(new_v)});
}

}  // namespace

std::string token_file_name(const std::string& profile) { return "tokens-" + profile + ".json"; }

std::string describe(const Change& c) { return c.key + ": " + c.field + ": " + c.old_value + " -> " + c.new_value; }

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

TokenRun token_run_of(const RunPairRecord& r) {
  return {r.key(), r.free.tokens_on, r.free.tokens_off, r.teacher.tokens_on, r.teacher.tokens_off};
}

KernelStat kernel_stat_of(const KernelCaseRecord& r) {
  KernelStat s;
  s.key = r.key();
  s.skipped = r.skipped;
  for (const auto& c : r.rules) s.rules.push_back({c.rule, c.pass, c.error, c.bound, c.seed});
  if (r.on_off) {
    s.on_off_differing = r.on_off->differing;
    s.on_off_max_ulp = r.on_off->max_ulp;
  }
  return s;
}

Baseline make_baseline(Provenance p, const std::vector<RunPairRecord>& pairs,
                       const std::vector<KernelCaseRecord>& kernels, Band band) {
  Baseline b;
  b.provenance = std::move(p);
  b.band = band;
  for (const auto& r : pairs) b.tokens.push_back(token_run_of(r));
  for (const auto& r : kernels) b.kernels.push_back(kernel_stat_of(r));
  return b;
}

std::vector<Change> compare(const TokenRun& g, const RunPairRecord& now, const Band& band) {
  std::vector<Change> out;
  const TokenRun n = token_run_of(now);
  if (!band.deterministic) return out;
  compare_tokens(g.key, "free.tokens_on", g.free_on, n.free_on, out);
  compare_tokens(g.key, "free.tokens_off", g.free_off, n.free_off, out);
  compare_tokens(g.key, "teacher.tokens_on", g.teacher_on, n.teacher_on, out);
  compare_tokens(g.key, "teacher.tokens_off", g.teacher_off, n.teacher_off, out);
  return out;
}

std::vector<Change> compare(const KernelStat& g, const KernelCaseRecord& now, const Band& band) {
  std::vector<Change> out;
  const KernelStat n = kernel_stat_of(now);
  const double rel = band.error_rel;
  if (g.skipped != n.skipped) {
    out.push_back({g.key, "skipped", g.skipped.empty() ? "(ran)" : g.skipped, n.skipped.empty() ? "(ran)" : n.skipped});
    return out;
  }
  for (const RuleStat& o : g.rules) {
    auto it = std::find_if(n.rules.begin(), n.rules.end(), [&](const RuleStat& r) { return r.rule == o.rule; });
    const std::string f = "rule " + o.rule;
    if (it == n.rules.end()) {
      out.push_back({g.key, f + ".present", "yes", "no"});
      continue;
    }
    if (o.pass != it->pass) out.push_back({g.key, f + ".pass", o.pass ? "pass" : "FAIL", it->pass ? "pass" : "FAIL"});
    if (o.seed != it->seed) out.push_back({g.key, f + ".seed", std::to_string(o.seed), std::to_string(it->seed)});
    compare_num(g.key, f + ".error", o.error, it->error, rel, out);
    compare_num(g.key, f + ".bound", o.bound, it->bound, rel, out);
  }
  for (const RuleStat& r : n.rules)
    if (std::none_of(g.rules.begin(), g.rules.end(), [&](const RuleStat& o) { return o.rule == r.rule; }))
      out.push_back({g.key, "rule " + r.rule + ".present", "no", "yes"});
  if (g.on_off_differing.has_value() != n.on_off_differing.has_value()) {
    out.push_back({g.key, "on_off.present", g.on_off_differing ? "yes" : "no", n.on_off_differing ? "yes" : "no"});
  } else if (g.on_off_differing) {
    // How many elements differ between the paths is deterministic on CPU; a GPU band lets it move.
    if (band.deterministic && *g.on_off_differing != *n.on_off_differing)
      out.push_back(
          {g.key, "on_off.differing", std::to_string(*g.on_off_differing), std::to_string(*n.on_off_differing)});
    compare_num(g.key, "on_off.max_ulp", *g.on_off_max_ulp, *n.on_off_max_ulp, rel, out);
  }
  return out;
}

std::vector<Change> check(const Baseline& b, const std::vector<RunPairRecord>& pairs,
                          const std::vector<KernelCaseRecord>& kernels) {
  std::vector<Change> out;
  std::map<std::string, const RunPairRecord*> pair_by_key;
  for (const auto& r : pairs) pair_by_key[r.key()] = &r;
  std::map<std::string, const KernelCaseRecord*> kernel_by_key;
  for (const auto& r : kernels) kernel_by_key[r.key()] = &r;

  std::map<std::string, bool> seen;
  for (const TokenRun& g : b.tokens) {
    seen[g.key] = true;
    auto it = pair_by_key.find(g.key);
    if (it == pair_by_key.end()) {
      out.push_back({g.key, "present", "yes", "no"});
      continue;
    }
    for (auto& c : compare(g, *it->second, b.band)) out.push_back(std::move(c));
  }
  for (const auto& r : pairs)
    if (!seen.count(r.key())) out.push_back({r.key(), "present", "no", "yes"});

  seen.clear();
  for (const KernelStat& g : b.kernels) {
    seen[g.key] = true;
    auto it = kernel_by_key.find(g.key);
    if (it == kernel_by_key.end()) {
      out.push_back({g.key, "present", "yes", "no"});
      continue;
    }
    for (auto& c : compare(g, *it->second, b.band)) out.push_back(std::move(c));
  }
  for (const auto& r : kernels)
    if (!seen.count(r.key())) out.push_back({r.key(), "present", "no", "yes"});
  return out;
}

}  // namespace kvconf::golden
