// The model rules over run-pair records, one implementation each: FlipsAreNearTies, Fp32TokensIdentical,
// Fp32KlRatio, InvariantBitwise. The model suites (conformance/suites/model_*_test.cpp) build records from their runs
// and call these; the reports (reports::evaluate_rules) call them on the records a run wrote; so both give one verdict
// on the same records (tests/reports/suite_report_agree_test.cpp). docs/CONFORMANCE.md "Model rules: one verdict".
#pragma once

#include <string>
#include <vector>

#include "kvconf/analysis/paired.hpp"
#include "kvconf/results/records.hpp"
#include "kvconf/results/rule_verdict.hpp"

namespace kvconf::conformance {

using namespace kvconf::results;  // RunPairRecord, RuleVerdict (results/)

// A paired run as a record stores it (per-step KL, JS, margins, largest logit difference; tokens; flip).
RegimeRecord regime_record(const analysis::PairedRun& r);

// "model.<model>.<profile>": the report's suite of a model×profile.
std::string model_rule_suite(const std::string& model, const std::string& profile);

// A profile that is an fp32 reference ("fp32", "cuda-fp32", any "fp32*" or "cuda-fp32*"): the Fp32 rules gate it.
bool is_fp32_reference_profile(const std::string& profile);
// The fp16 profile an fp32 reference is compared with: the same kernels in fp16 ("fp16-eager" for "fp32",
// "cuda-fp16" for "cuda-fp32") when `available` holds it, else the first name in `available` on the same device
// whose format is fp16 ("fp16*" or "cuda-fp16*"); "" when there is none.
std::string fp16_partner(const std::string& fp32_profile, const std::vector<std::string>& available);

// Every pair's rules pass, and every flip's near-tie ratio (|Δa|+|Δb|)/(4·S) is at most 1.
RuleVerdict flips_are_near_ties(const std::string& suite, const std::vector<const RunPairRecord*>& pairs);
// Greedy pairs: cache-ON and cache-OFF tokens identical (top-k/top-p pairs are not gated).
RuleVerdict fp32_tokens_identical(const std::string& suite, const std::vector<const RunPairRecord*>& pairs);
// The fp32 pairs matched with the fp16 profile's by (strategy, seed, prompt); over the matches where fp16 diverged:
// mean KL(fp32, shared context) <= max(kFp32KlRatio × mean KL(fp16), mean fp32 noise floor). A pair without a floor
// (an older record) counts 0 towards the floor's mean: an unknown floor never loosens the bound. measured and
// threshold are stated as ratios to mean KL(fp16) (absolute when that is 0).
RuleVerdict fp32_kl_ratio(const std::string& suite, const std::string& fp16_profile,
                          const std::vector<const RunPairRecord*>& p32, const std::vector<const RunPairRecord*>& p16);
// Cache-invariant profiles: tokens equal, and every step's KL and largest logit difference 0, in both regimes.
RuleVerdict invariant_bitwise(const std::string& suite, const std::vector<const RunPairRecord*>& pairs);

// The model rules of every model×profile of `pairs` (any mix), in model, profile, rule order. A "+kv_dtype" profile
// (a cache kept narrower on purpose) gets FlipsAreNearTies skipped and no InvariantBitwise: its ScenarioRules judge it.
std::vector<RuleVerdict> evaluate_model_rules(const std::vector<RunPairRecord>& pairs);

}  // namespace kvconf::conformance
