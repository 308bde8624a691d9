// The conformance rules of DESIGN.md "What passes", as check functions over one kernel and one case.
// The GoogleTest suites (conformance/suites/) call them and record every result as test properties;
// the mutant unit tests (tests/conformance/) call the same functions and require that some check fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/kernels/kernel.hpp"
#include "kvconf/results/check_result.hpp"

namespace kvconf::conformance {

// The results vocabulary (results/: CheckResult, records, verdicts, experiment summaries) under conformance's names
// too, so the checks and suites say CheckResult, RunPairRecord as before.
using namespace kvconf::results;

// Rule 1 (oracle accuracy, two-sided): every element within its a-priori bound, and the max error within
// k × the max error of a naive same-precision implementation (sequential, accumulating in
// KernelInfo::partial) plus a one-rounding floor (one ulp of the output format at max|oracle|).
// k = 2, or 3 with a softcap (FlashAttention's test convention, notes/peers.md).
CheckResults check_gemm_matches_oracle(const kernels::GemmKernel& k, const GemmCase& c, std::uint64_t seed);
CheckResults check_norm_matches_oracle(const kernels::NormKernel& k, const NormCase& c, std::uint64_t seed);
CheckResults check_attention_matches_oracle(const kernels::AttentionKernel& k, const AttentionCase& c,
                                            std::uint64_t seed);

// Rule 2 for projections (the paper's Experiment 3): the K/V row of the last token computed alone
// (M = 1, decode), inside the full-prefix GEMM (M = n, cache-OFF) and inside the prompt prefill that
// filled the cache (M = prompt length, when the token is in the prompt) differ by no more than the sum
// of their bounds; bitwise equal when the kernel claims cache_invariant.
CheckResults check_projection_cache_on_off(const kernels::GemmKernel& k, const ProjectionCase& c, std::uint64_t seed);

// Batch invariance for GEMMs (docs/SCENARIOS.md "batch"): every row of an M-row call (M = the case's m) against the
// same row computed alone (M = 1), as a sequence decoded inside a batch vs alone: bitwise when the kernel claims
// cache_invariant (its result does not depend on M), else within the sum of both paths' bounds (batch_bound).
CheckResults check_gemm_batch_invariance(const kernels::GemmKernel& k, const GemmCase& c, std::uint64_t seed);

// Rule 2 for attention: decode (n_q = 1 over the cache) vs the last row of a full prefill; within the sum
// of bounds, bitwise when cache_invariant.
CheckResults check_attention_cache_on_off(const kernels::AttentionKernel& k, const AttentionCase& c,
                                          std::uint64_t seed);
// Chunked prefill (chunks of `chunk` query rows, each over the cache filled so far) vs one shot.
CheckResults check_attention_chunked(const kernels::AttentionKernel& k, const AttentionCase& c, std::size_t chunk,
                                     std::uint64_t seed);
// The same for several chunk sizes at once (one oracle evaluation): one result per chunk size, in order.
CheckResults check_attention_chunked(const kernels::AttentionKernel& k, const AttentionCase& c,
                                     std::span<const std::size_t> chunks, std::uint64_t seed);
// Unused cache rows [n_kv, capacity) filled with NaN never reach the output (every kernel).
CheckResults check_attention_unused_slots(const kernels::AttentionKernel& k, const AttentionCase& c,
                                          std::uint64_t seed);
// Cache-invariant kernels: the output does not change with the cache's allocated capacity (capacity_bitwise).
// Other kernels: outputs at different capacities differ by no more than the sum of their bounds (capacity_bound).
CheckResults check_attention_capacity(const kernels::AttentionKernel& k, const AttentionCase& c, std::uint64_t seed);

// Batch invariance for attention (docs/SCENARIOS.md "batch"): the case's last row decoded alone against the same row
// inside batched decode launches of 4 and 64 sequences of other cache lengths with their own data
// (kernels::run_attention_batch: the kernel's run_batch, else one run per sequence with AttentionCall::batch set):
// bitwise when the kernel claims cache_invariant, else within the sum of both launches' bounds (batch_bound).
CheckResults check_attention_batch_invariance(const kernels::AttentionKernel& k, const AttentionCase& c,
                                              std::uint64_t seed);
// Why the batch check has nothing to run for this kernel and case (the suites skip with it), or nullopt: the decode
// call is unsupported, the kernel declines a launch the check makes (a sequence of it, or, through supports_batch,
// the launch itself), or it launches one sequence per call (no run_batch) with a plan that does not read the batch
// size, so that no batch can change its arithmetic.
std::optional<std::string> attention_batch_unchecked(const kernels::AttentionKernel& k, const AttentionCase& c);

// Measured cache-ON vs cache-OFF difference (OnOffDiff), no bound (the table in docs/KERNELS.md): the same runs as
// check_projection_cache_on_off (all T rows) and check_attention_cache_on_off (the decode row).
OnOffDiff measure_projection_on_off(const kernels::GemmKernel& k, const ProjectionCase& c, std::uint64_t seed);
OnOffDiff measure_attention_on_off(const kernels::AttentionKernel& k, const AttentionCase& c, std::uint64_t seed);

}  // namespace kvconf::conformance
