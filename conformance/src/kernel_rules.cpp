// The rules of each kind of kernel (kernel_rules.hpp): the one table, and running a rule from it with its seed.
#include "kvconf/conformance/kernel_rules.hpp"

#include <stdexcept>

#include "kvconf/conformance/checks.hpp"

namespace kvconf::conformance {

namespace {

using results::CheckResults;

const KernelRule& find(const std::vector<KernelRule>& table, std::string_view rule, const char* kind) {
  for (const KernelRule& r : table)
    if (rule == r.name) return r;
  throw std::invalid_argument("rules: unknown " + std::string(kind) + " rule '" + std::string(rule) + "', expected " +
                              rule_names_text(table));
}

std::uint64_t seed_of(const KernelRule& r, const std::string& case_id, std::optional<std::uint64_t> seed) {
  return seed ? *seed : seed_for(r.seed_name, case_id);
}

template <class Run>
CheckResults run_all(const std::vector<KernelRule>& table, const std::vector<std::string>& rules, const char* kind,
                     Run run) {
  for (const std::string& r : rules) (void)find(table, r, kind);  // every name known before anything runs
  CheckResults all;
  for (const KernelRule& r : table) {
    bool wanted = rules.empty();
    for (const std::string& x : rules) wanted = wanted || x == r.name;
    if (!wanted) continue;
    RuleRun one = run(r.name);
    for (auto& x : one.results) all.push_back(std::move(x));
  }
  return all;
}

}  // namespace

std::string rule_names_text(const std::vector<KernelRule>& rules) {
  std::string s;
  for (std::size_t i = 0; i < rules.size(); ++i)
    s += (i == 0 ? "" : i + 1 == rules.size() ? " or " : ", ") + std::string("'") + rules[i].name + "'";
  return s;
}

const std::vector<KernelRule>& attention_rules() {
  static const std::vector<KernelRule> t = {
      {"oracle", "attention_oracle", "AttentionConformance.MatchesOracle"},
      {"on_off", "attention_on_off", "AttentionConformance.CacheOnMatchesCacheOff"},
      {"chunked", "attention_chunked", "AttentionConformance.ChunkedMatchesOneShot"},
      {"unused_slots", "attention_unused_slots", "AttentionConformance.UnusedSlotsNeverRead"},
      {"capacity", "attention_capacity", "AttentionConformance.CapacityInvariant"},
      {"batch", "attention_batch", "AttentionBatchInvariance.DecodeAloneMatchesInBatch"},
  };
  return t;
}

const std::vector<KernelRule>& gemm_rules() {
  static const std::vector<KernelRule> t = {
      {"oracle", "gemm_oracle", "GemmConformance.MatchesOracle"},
      {"batch", "gemm_batch", "GemmConformance.BatchInvariant"},
  };
  return t;
}

const std::vector<KernelRule>& projection_rules() {
  static const std::vector<KernelRule> t = {
      {"on_off", "projection_on_off", "ProjectionConformance.CacheOnMatchesCacheOff"},
  };
  return t;
}

const std::vector<KernelRule>& norm_rules() {
  static const std::vector<KernelRule> t = {
      {"oracle", "norm_oracle", "NormConformance.MatchesOracle"},
  };
  return t;
}

std::optional<std::string> attention_rule_skipped(std::string_view rule, const kernels::AttentionKernel& k,
                                                  const AttentionCase& c) {
  const std::string_view name = find(attention_rules(), rule, "attention").name;
  if (name == "capacity" && !k.info.cache_invariant) return k.info.name + " does not claim cache_invariant";
  if (name == "batch")
    if (auto why = attention_batch_unchecked(k, c)) return k.info.name + " " + *why;
  return std::nullopt;
}

std::optional<std::string> gemm_rule_skipped(std::string_view rule, const kernels::GemmKernel&, const GemmCase& c) {
  const std::string_view name = find(gemm_rules(), rule, "GEMM").name;
  if (name == "batch" && c.shape.m < 2) return "M = 1: no batch to compare with";
  return std::nullopt;
}

RuleRun run_attention_rule(std::string_view rule, const kernels::AttentionKernel& k, const AttentionCase& c,
                           std::optional<std::uint64_t> seed) {
  const KernelRule& r = find(attention_rules(), rule, "attention");
  RuleRun out;
  if ((out.skipped = attention_rule_skipped(rule, k, c))) return out;
  const std::uint64_t s = seed_of(r, c.id(), seed);
  const std::string_view name = r.name;
  if (name == "oracle") {
    out.results = check_attention_matches_oracle(k, c, s);
  } else if (name == "on_off") {
    out.results = check_attention_cache_on_off(k, c, s);
  } else if (name == "chunked") {
    out.results = check_attention_chunked(k, c, kChunkSizes, s);
    for (std::size_t i = 0; i < out.results.size() && i < kChunkSizes.size(); ++i)
      out.results[i].rule += ".chunk" + std::to_string(kChunkSizes[i]);
  } else if (name == "unused_slots") {
    out.results = check_attention_unused_slots(k, c, s);
  } else if (name == "capacity") {
    out.results = check_attention_capacity(k, c, s);
  } else {  // batch
    out.results = check_attention_batch_invariance(k, c, s);
  }
  return out;
}

RuleRun run_gemm_rule(std::string_view rule, const kernels::GemmKernel& k, const GemmCase& c,
                      std::optional<std::uint64_t> seed) {
  const KernelRule& r = find(gemm_rules(), rule, "GEMM");
  RuleRun out;
  if ((out.skipped = gemm_rule_skipped(rule, k, c))) return out;
  const std::uint64_t s = seed_of(r, c.id(), seed);
  if (std::string_view(r.name) == "oracle")
    out.results = check_gemm_matches_oracle(k, c, s);
  else  // batch
    out.results = check_gemm_batch_invariance(k, c, s);
  return out;
}

RuleRun run_projection_rule(std::string_view rule, const kernels::GemmKernel& k, const ProjectionCase& c,
                            std::optional<std::uint64_t> seed) {
  const KernelRule& r = find(projection_rules(), rule, "projection");
  return {check_projection_cache_on_off(k, c, seed_of(r, c.id(), seed)), std::nullopt};
}

RuleRun run_norm_rule(std::string_view rule, const kernels::NormKernel& k, const NormCase& c,
                      std::optional<std::uint64_t> seed) {
  const KernelRule& r = find(norm_rules(), rule, "norm");
  return {check_norm_matches_oracle(k, c, seed_of(r, c.id(), seed)), std::nullopt};
}

CheckResults run_attention_rules(const kernels::AttentionKernel& k, const AttentionCase& c,
                                 const std::vector<std::string>& rules, std::optional<std::uint64_t> seed) {
  return run_all(attention_rules(), rules, "attention",
                 [&](std::string_view r) { return run_attention_rule(r, k, c, seed); });
}

CheckResults run_gemm_rules(const kernels::GemmKernel& k, const GemmCase& c, const std::vector<std::string>& rules,
                            std::optional<std::uint64_t> seed) {
  return run_all(gemm_rules(), rules, "GEMM", [&](std::string_view r) { return run_gemm_rule(r, k, c, seed); });
}

CheckResults run_projection_rules(const kernels::GemmKernel& k, const ProjectionCase& c,
                                  const std::vector<std::string>& rules, std::optional<std::uint64_t> seed) {
  return run_all(projection_rules(), rules, "projection",
                 [&](std::string_view r) { return run_projection_rule(r, k, c, seed); });
}

CheckResults run_norm_rules(const kernels::NormKernel& k, const NormCase& c, const std::vector<std::string>& rules,
                            std::optional<std::uint64_t> seed) {
  return run_all(norm_rules(), rules, "norm", [&](std::string_view r) { return run_norm_rule(r, k, c, seed); });
}

}  // namespace kvconf::conformance
