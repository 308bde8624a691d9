// Known findings about third-party kernels: a rule a kernel is measured to fail, recorded with the measured value so
// that a nightly gate stays green on an unchanged tree, reports the finding in every run, and fails when the kernel
// changes (the rule starts passing, or the error moves). docs/GPU.md "PyTorch's CUDA kernels as black boxes".
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "kvconf/conformance/checks.hpp"

namespace kvconf::conformance::suite {

struct KnownFinding {
  const char* kernel;    // KernelInfo::name
  const char* case_id;   // the case's id()
  const char* rule;      // the rule it fails
  std::uint64_t seed;    // the seed it was measured at (seed_for(suite, case_id) without KVCONF_SEED)
  double error;          // the measured error (max |kernel − oracle|), as the JUnit XML recorded it
  double rel_tol;        // how far a rerun's error may move: the 9 digits the test output carries (the kernel is
                         // deterministic: the same device and library give the same error to the last bit)
  const char* measured;  // where and when
};

// torch.cuda.attn.sdpa_efficient.f32 (PyTorch's memory-efficient SDPA backend, fp32) is within its a-priori oracle
// bound but more than twice a naive fp32 loop's error plus one ulp: FlashAttention's two-sided convention fails.
// The bounds those runs printed: 1.09218145e-06 and 1.07097402e-06 (headroom -0.052 and -0.194).
inline constexpr KnownFinding kKnownFindings[] = {
    {"torch.cuda.attn.sdpa_efficient.f32", "q16_kv128_d128_h8_gqa1_causal_win0_cap0_sc0_normal", "two_sided",
     8813110258982823561ull, 1.14912319e-06, 1e-8, "H100, torch 2.11.0+cu130, 2026-11-25 and 2026-11-26"},
    {"torch.cuda.attn.sdpa_efficient.f32", "q16_kv200_d128_h4_gqa2_causal_win32_cap256_sc0_normal", "two_sided",
     16522913683611384105ull, 1.27889168e-06, 1e-8, "H100, torch 2.11.0+cu130, 2026-11-25 and 2026-11-26"},
};

// For each result that a known finding names: at the recorded seed, the rule must still fail with the recorded
// error (else the test fails: the kernel changed, update the table and docs/GPU.md); the finding is then recorded
// as the property "<rule>.known_finding" and the result counts as expected. At another seed (KVCONF_SEED) nothing
// was measured, so the rule stays gated as usual.
inline void apply_known_findings(CheckResults& results, const std::string& kernel, const std::string& case_id) {
  for (const KnownFinding& f : kKnownFindings) {
    if (kernel != f.kernel || case_id != f.case_id) continue;
    for (CheckResult& r : results) {
      if (r.rule != f.rule || r.seed != f.seed) continue;
      char note[320];
      std::snprintf(note, sizeof note, "expected to fail: error %.4g recorded (%s), now %.17g > bound %.17g", f.error,
                    f.measured, r.error, r.bound);
      ::testing::Test::RecordProperty(r.rule + ".known_finding", note);
      std::printf("known finding: %s on %s, rule %s: %s\n", f.kernel, f.case_id, f.rule, note);
      EXPECT_FALSE(r.pass) << "known finding no longer reproduces: " << f.kernel << " now passes " << f.rule << " on "
                           << f.case_id << " (error " << r.error << ", bound " << r.bound
                           << "): the kernel changed; update conformance/suites/known_findings.hpp and docs/GPU.md";
      EXPECT_LE(std::fabs(r.error - f.error), f.rel_tol * f.error)
          << "known finding moved: " << f.kernel << " " << f.rule << " on " << f.case_id << " error " << r.error
          << " vs recorded " << f.error << " (" << f.measured << "): the kernel changed";
      r.pass = true;
      r.detail += " [known finding, " + std::string(f.measured) + "]";
    }
  }
}

}  // namespace kvconf::conformance::suite
