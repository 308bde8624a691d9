// The rules each kind of kernel must pass, listed once: each rule's name, the seed it is checked with, the GoogleTest
// case of the suites that runs it, and when it applies. The suites (conformance/suites/), the kernel sweep (`kvconf
// kernels`, `kvconf run`) and Python's check_* (python/src/checks_bindings.cpp, kvconf._checks) all run these lists;
// RuleAgreement (tests/conformance/rule_agreement_test.cpp) holds them to it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/results/check_result.hpp"

namespace kvconf::conformance {

// The chunk sizes of the chunked rule; its results carry one qualified rule name per size ("chunked_bound.chunk4").
inline constexpr std::array<std::size_t, 3> kChunkSizes = {1, 4, 16};

struct KernelRule {
  const char* name;  // as Python's rules= says it: "oracle", "on_off", "chunked", "unused_slots", "capacity", "batch"
  const char* seed_name;   // its seed is seed_for(seed_name, case id) unless one seed is given for every rule
  const char* suite_test;  // the suites' GoogleTest case that runs it ("AttentionConformance.CacheOnMatchesCacheOff")
};

const std::vector<KernelRule>& attention_rules();   // oracle, on_off, chunked, unused_slots, capacity, batch
const std::vector<KernelRule>& gemm_rules();        // oracle, batch
const std::vector<KernelRule>& projection_rules();  // on_off
const std::vector<KernelRule>& norm_rules();        // oracle

// What one rule gave on a kernel and case: its results, or why it does not apply there (a kernel that does not claim
// cache_invariant has no capacity rule; one without a batched path, or an M = 1 GEMM, no batch rule).
struct RuleRun {
  results::CheckResults results;
  std::optional<std::string> skipped;
};

// Why a rule does not apply to a kernel and case (nullopt: it applies), without running it; std::invalid_argument
// for an unknown name. The runners below skip with this reason.
std::optional<std::string> attention_rule_skipped(std::string_view rule, const kernels::AttentionKernel& k,
                                                  const AttentionCase& c);
std::optional<std::string> gemm_rule_skipped(std::string_view rule, const kernels::GemmKernel& k, const GemmCase& c);

// One rule by name (std::invalid_argument naming the known ones otherwise) on a kernel and a case it supports.
RuleRun run_attention_rule(std::string_view rule, const kernels::AttentionKernel& k, const AttentionCase& c,
                           std::optional<std::uint64_t> seed = std::nullopt);
RuleRun run_gemm_rule(std::string_view rule, const kernels::GemmKernel& k, const GemmCase& c,
                      std::optional<std::uint64_t> seed = std::nullopt);
RuleRun run_projection_rule(std::string_view rule, const kernels::GemmKernel& k, const ProjectionCase& c,
                            std::optional<std::uint64_t> seed = std::nullopt);
RuleRun run_norm_rule(std::string_view rule, const kernels::NormKernel& k, const NormCase& c,
                      std::optional<std::uint64_t> seed = std::nullopt);

// The rules named (empty: every rule of the kind), in the table's order, those that apply; std::invalid_argument for
// an unknown name.
results::CheckResults run_attention_rules(const kernels::AttentionKernel& k, const AttentionCase& c,
                                          const std::vector<std::string>& rules = {},
                                          std::optional<std::uint64_t> seed = std::nullopt);
results::CheckResults run_gemm_rules(const kernels::GemmKernel& k, const GemmCase& c,
                                     const std::vector<std::string>& rules = {},
                                     std::optional<std::uint64_t> seed = std::nullopt);
results::CheckResults run_projection_rules(const kernels::GemmKernel& k, const ProjectionCase& c,
                                           const std::vector<std::string>& rules = {},
                                           std::optional<std::uint64_t> seed = std::nullopt);
results::CheckResults run_norm_rules(const kernels::NormKernel& k, const NormCase& c,
                                     const std::vector<std::string>& rules = {},
                                     std::optional<std::uint64_t> seed = std::nullopt);

// "oracle, on_off, ..." of a table, for messages.
std::string rule_names_text(const std::vector<KernelRule>& rules);

}  // namespace kvconf::conformance
