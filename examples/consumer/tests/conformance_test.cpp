// The consumer's conformance tests: its GEMM registered in a kvconf kernel registry as a black box (fp32 in and out,
// reductions in any order), and kvconf's quick kernel sweep run on it: every rule of every case must pass.
#include <gtest/gtest.h>

#include <string>

#include "blocked_gemm.hpp"
#include "kvconf/conformance/sweep.hpp"
#include "kvconf/kernels/black_box.hpp"
#include "kvconf/kernels/registry.hpp"

namespace {

using namespace kvconf;

kernels::GemmKernel engine_gemm(const std::string& name, bool bug) {
  kernels::GemmKernel g;
  g.info.name = name;
  g.info.backend = "engine";
  g.info.in = g.info.acc = g.info.out = g.info.partial = Format::fp32;
  g.info.mirrors = "the consumer engine's blocked CPU GEMM (examples/consumer)";
  g.supports = [](const kernels::GemmShape&) -> kernels::Reason { return std::nullopt; };
  g.path = [](const kernels::GemmShape&) { return kernels::black_box_gemm_path(Format::fp32, Format::fp32); };
  g.run = [bug](const kernels::GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    engine::blocked_gemm(s.m, s.n, s.k, x, w, y, bug);
  };
  return g;
}

// kvconf's quick sweep over one kernel: the records of every (kernel, case) item.
std::vector<results::KernelCaseRecord> sweep(bool bug) {
  kernels::Registry reg;
  reg.add(engine_gemm(bug ? "engine.gemm.blocked_gemv_bug" : "engine.gemm.blocked", bug));
  conformance::SweepOptions o;
  o.quick = true;  // kvconf run's shapes: decode (m = 1) and prefill GEMMs, projections ON vs OFF (well under 1 s)
  std::vector<results::KernelCaseRecord> out;
  for (const conformance::SweepItem& item : conformance::sweep_plan(reg, o))
    out.push_back(conformance::run_sweep_item(reg, item, o));
  return out;
}

void expect_all_pass(bool bug) {
  const auto records = sweep(bug);
  ASSERT_FALSE(records.empty()) << "the sweep planned no case for the kernel";
  for (const auto& r : records) {
    EXPECT_TRUE(r.skipped.empty()) << r.key() << " skipped: " << r.skipped;
    for (const auto& rule : r.rules)
      EXPECT_TRUE(rule.pass) << r.key() << " " << rule.rule << ": error " << rule.error << " > bound " << rule.bound
                             << " (" << rule.detail << ")";
  }
}

TEST(KvconfSweep, BlockedGemm) { expect_all_pass(false); }
TEST(KvconfSweep, BlockedGemmGemvBug) { expect_all_pass(true); }  // ctest expects this one to fail (WILL_FAIL)

// The planted bug is caught where it bites: decode-shaped GEMMs (case ids m1_...) and the projections (cache ON
// decodes row by row, cache OFF recomputes the prefix) fail; a prefill GEMM (m > 1) computes its rows right, so its
// oracle rules pass, and only its batch rule fails (each row alone is an M = 1 call: the GEMV path).
TEST(KvconfSweep, GemvBugIsCaught) {
  std::size_t failed = 0, prefill_oracle_passed = 0;
  for (const auto& r : sweep(true)) {
    const bool decode = r.kind == "projection" || r.case_id.rfind("m1_", 0) == 0;
    bool pass = true, oracle_pass = true, batch_failed = false;
    for (const auto& rule : r.rules) {
      pass = pass && rule.pass;
      if (rule.rule.rfind("batch_", 0) == 0)
        batch_failed = batch_failed || !rule.pass;
      else
        oracle_pass = oracle_pass && rule.pass;
    }
    EXPECT_FALSE(pass) << r.key() << " passed although it takes the GEMV path (alone or in its batch rule)";
    failed += pass ? 0 : 1;
    if (!decode) {
      EXPECT_TRUE(oracle_pass) << r.key() << ": a prefill GEMM never takes the GEMV path in its own call";
      EXPECT_TRUE(batch_failed) << r.key() << ": its rows alone take the GEMV path; the batch rule must catch it";
      prefill_oracle_passed += oracle_pass ? 1 : 0;
    }
  }
  EXPECT_GT(failed, 0u) << "kvconf's sweep did not catch the GEMV path's missing block";
  EXPECT_GT(prefill_oracle_passed, 0u) << "no prefill-shaped case was planned";
  std::printf("GEMV bug: %zu cases failed (decode GEMMs, projections, and the prefill GEMMs' batch rule); the prefill "
              "GEMMs' oracle rules passed on %zu\n",
              failed, prefill_oracle_passed);
}

}  // namespace
