// The kernel sweep of `kvconf kernels` (and the kernel part of `kvconf run` and the golden baselines): every kernel of
// a registry on standard shapes, each (kernel, case) item running the conformance rules of checks.hpp and the measured
// cache-ON vs cache-OFF difference, as one KernelCaseRecord. The plan has a fixed order, so shards and resume are
// deterministic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/results/records.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::conformance {

using namespace kvconf::results;  // KernelCaseRecord, CheckResults (results/)

struct SweepOptions {
  std::string filter;                 // keep items whose "kernel|case_id" contains this text (empty: all)
  bool quick = false;                 // the standard shapes of kvconf run only (seconds); else also the full tables
  std::optional<std::uint64_t> seed;  // every rule of every item uses this seed; default seed_for(rule, case_id)
                                      // (which KVCONF_SEED overrides)
};

// One kernel on one case. Exactly one of the case members is set, the one matching `kind`.
struct SweepItem {
  std::string kernel, kind, case_id;  // kind: "gemm" | "projection" | "norm" | "attention"
  std::optional<GemmCase> gemm;
  std::optional<ProjectionCase> projection;
  std::optional<NormCase> norm;
  std::optional<AttentionCase> attention;
  std::string key() const { return kernel + "|" + case_id; }  // = KernelCaseRecord::key()
};

// The shapes of the sweep per kind. Quick: small reductions and caches (n_kv 16 … 512, head dims 64/128/256, GQA 1
// and 4, a window and a softcap case). Full: the quick shapes, then the suites' standard tables (cases.hpp), slow
// cases included, then longer caches.
std::vector<GemmCase> sweep_gemm_cases(bool quick);
std::vector<ProjectionCase> sweep_projection_cases(bool quick);
std::vector<NormCase> sweep_norm_cases(bool quick);
std::vector<AttentionCase> sweep_attention_cases(bool quick);

// Every kernel × the cases of its kind, filtered; order: gemm, projection (GEMM kernels), norm, attention; within a
// kind, case-major, kernels in registration order.
std::vector<SweepItem> sweep_plan(const kernels::Registry& reg, const SweepOptions& o);

// Runs one item: rules (gemm/norm: oracle; projection: cache ON vs OFF; attention: oracle, ON vs OFF, chunked
// prefill 1/4/16, unused cache slots, capacity for cache-invariant kernels) and the measured ON vs OFF difference
// (projection, attention). An unsupported case gives a record with `skipped` = the kernel's reason and no rules.
// Throws std::invalid_argument when the item's kernel is not in `reg`.
KernelCaseRecord run_sweep_item(const kernels::Registry& reg, const SweepItem& item, const SweepOptions& o);

}  // namespace kvconf::conformance
