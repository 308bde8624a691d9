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

// The planted bug is caught, and only where it bites: decode-shaped GEMMs (case ids m1_...) and the projections
// (cache ON decodes row by row, cache OFF recomputes the prefix), while the prefill GEMMs (m > 1) still pass.
TEST(KvconfSweep, GemvBugIsCaught) {
  std::size_t failed = 0, prefill_passed = 0;
  for (const auto& r : sweep(true)) {
    bool pass = true;
    for (const auto& rule : r.rules) pass = pass && rule.pass;
    const bool decode = r.kind == "projection" || r.case_id.rfind("m1_", 0) == 0;
    if (!pass) {
      ++failed;
      EXPECT_TRUE(decode) << r.key() << " failed although it never takes the GEMV path";
    } else {
      EXPECT_FALSE(decode) << r.key() << " passed although its decode rows drop 64 terms";
      ++prefill_passed;
    }
  }
  EXPECT_GT(failed, 0u) << "kvconf's sweep did not catch the GEMV path's missing block";
  EXPECT_GT(prefill_passed, 0u) << "no prefill-shaped case passed";
  std::printf("GEMV bug: %zu cases failed (decode GEMMs, projections), %zu prefill GEMMs passed\n", failed,
              prefill_passed);
}

}  // namespace
