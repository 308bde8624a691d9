// Isolation of plugin kernels (tests/plugin/misbehaving_kernels.c, misbehaving from k >= 512 on): a kernel
// killed by SIGSEGV, one that never returns (short time limit), one returning an error code, and one changing its
// output tensor fail that call with a one-line message naming the kernel; the worker restarts and later calls work;
// NaN output fails the oracle bound; the kernel sweep records a crash as a failed rule and goes on.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "kvconf/conformance/checks.hpp"
#include "kvconf/conformance/sweep.hpp"
#include "kvconf/kernels/plugin.hpp"

namespace kvconf::kernels {
namespace {

const std::string kLib = KVCONF_TEST_MISBEHAVING;

// A registry of the misbehaving kernels with a short time limit (its own worker per test).
Registry misbehaving(double timeout_s = 10.0) {
  PluginOptions o = plugin_options();
  o.timeout_s = timeout_s;
  Registry r;
  register_plugin_kernels(r, kLib, o);
  return r;
}

const GemmKernel& gemm(const Registry& r, const std::string& name) {
  const GemmKernel* k = r.find_gemm("plugin.test_misbehaving." + name);
  if (k == nullptr) throw std::runtime_error("no kernel " + name);
  return *k;
}

// Runs kernel `name` on x = 1, w = 1 with shape (m, n, k); returns y.
std::vector<float> run(const Registry& r, const std::string& name, GemmShape s) {
  const std::vector<float> x(s.m * s.k, 1.0f), w(s.n * s.k, 1.0f);  // x: (m, k), w: (n, k)
  std::vector<float> y(s.m * s.n, -1.0f);                           // y: (m, n)
  gemm(r, name).run(s, x, w, y);
  return y;
}

// The message of the exception type E thrown by f (fails the test when none is thrown).
template <class E, class F>
std::string thrown(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return {};
}

TEST(PluginIsolation, SmallCallsComputeCorrectly) {
  const Registry r = misbehaving();
  for (const char* k : {"ok", "segv", "hang", "nan", "error", "shape"})
    EXPECT_EQ(run(r, k, {2, 3, 64}), std::vector<float>(6, 64.0f)) << k;
}

TEST(PluginIsolation, ASegfaultFailsTheCallAndTheWorkerRestarts) {
  const Registry r = misbehaving();
  EXPECT_EQ(thrown<KernelFailure>([&] {
              run(r, "segv", {2, 4, 512});
            }),
            "plugin kernel plugin.test_misbehaving.segv: killed by SIGSEGV (in plugin " + kLib +
                "; worker restarted for the next call)");
  EXPECT_EQ(run(r, "ok", {2, 4, 512}), std::vector<float>(8, 512.0f));  // a fresh worker
  EXPECT_EQ(run(r, "segv", {1, 2, 8}), std::vector<float>(2, 8.0f));
}

TEST(PluginIsolation, AHangIsKilledAtTheTimeLimit) {
  const Registry r = misbehaving(0.5);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(thrown<KernelFailure>([&] {
              run(r, "hang", {1, 1, 512});
            }),
            "plugin kernel plugin.test_misbehaving.hang: no answer within 0.5 s (KVCONF_PLUGIN_TIMEOUT_S); worker "
            "killed and restarted for the next call");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.5);
  EXPECT_LT(s, 5.0);
  EXPECT_EQ(run(r, "ok", {1, 1, 512}), std::vector<float>(1, 512.0f));
}

TEST(PluginIsolation, AnErrorCodeFailsTheCallWithThePluginsMessage) {
  const Registry r = misbehaving();
  EXPECT_EQ(thrown<KernelFailure>([&] {
              run(r, "error", {1, 2, 512});
            }),
            "plugin kernel plugin.test_misbehaving.error: returned 5: k too large for this kernel");
}

TEST(PluginIsolation, ChangingTheOutputDescriptorIsAnAbiViolation) {
  const Registry r = misbehaving();
  EXPECT_EQ(thrown<PluginAbiViolation>([&] {
              run(r, "shape", {2, 64, 2048});
            }),
            "plugin kernel plugin.test_misbehaving.shape: run changed the descriptor of y.shape[1] (64 -> 32)");
}

TEST(PluginIsolation, NanOutputFailsTheOracleBound) {
  const Registry r = misbehaving();
  conformance::GemmCase c;
  c.shape = {4, 16, 1024};
  const auto res = conformance::check_gemm_matches_oracle(gemm(r, "nan"), c, 1);
  EXPECT_FALSE(results::all_pass(res)) << results::describe(res);
  ASSERT_FALSE(res.empty());
  EXPECT_EQ(res[0].rule, "oracle_bound");
  EXPECT_FALSE(res[0].pass) << results::describe(res);
  // The same kernel on the same case without the NaN (k < 512) passes: the failure is the NaN's.
  c.shape.k = 256;
  const auto ok = conformance::check_gemm_matches_oracle(gemm(r, "nan"), c, 1);
  EXPECT_TRUE(results::all_pass(ok)) << results::describe(ok);
}

TEST(PluginIsolation, TheSweepRecordsACrashAndGoesOn) {
  const Registry r = misbehaving();
  conformance::SweepOptions o;
  o.quick = true;
  o.filter = "plugin.test_misbehaving.segv|m1_n64_k1024";
  const auto plan = conformance::sweep_plan(r, o);
  ASSERT_EQ(plan.size(), 1u);
  const auto rec = conformance::run_sweep_item(r, plan[0], o);
  ASSERT_EQ(rec.rules.size(), 1u);
  EXPECT_EQ(rec.rules[0].rule, "kernel_ran");
  EXPECT_FALSE(rec.rules[0].pass);
  EXPECT_EQ(rec.rules[0].detail.rfind("plugin kernel plugin.test_misbehaving.segv: killed by SIGSEGV", 0), 0u)
      << rec.rules[0].detail;
  // The next item runs on a fresh worker.
  o.filter = "plugin.test_misbehaving.ok|m1_n64_k1024";
  const auto next = conformance::run_sweep_item(r, conformance::sweep_plan(r, o).at(0), o);
  EXPECT_TRUE(results::all_pass(next.rules)) << results::describe(next.rules);
}

}  // namespace
}  // namespace kvconf::kernels
