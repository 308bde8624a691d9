// The mutant catalogue (DESIGN.md "What passes", rule 5): small kernels, each a simple correct base plus
// exactly one planted bug, that the conformance checks must catch; and the correct bases themselves
// (mutant.base.*), which must pass every rule. Never part of the default registry.
#pragma once

#include <string>
#include <vector>

#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {

// One planted bug.
struct MutantInfo {
  std::string name;                    // registry name, "mutant.attn.causal_off_by_one"
  std::string kind;                    // "gemm" or "attention": which registry list holds it
  std::string bug;                     // the planted bug, in one sentence
  std::vector<std::string> caught_by;  // results::CheckResult::rule names; at least one must FAIL
};

// Adds the correct bases (mutant.base.gemm.seq32, mutant.base.attn.online, mutant.base.attn.splitkv)
// and every mutant of mutant_catalogue(), all with KernelInfo::backend = "mutant".
void register_mutant_kernels(Registry& r);

// The planted bugs, in registration order (the bases are not in it).
std::vector<MutantInfo> mutant_catalogue();

// Names of the correct bases registered by register_mutant_kernels.
std::vector<std::string> mutant_base_names();

}  // namespace kvconf::kernels
