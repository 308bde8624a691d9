// Shared by the model suites: where the fixtures are (KVCONF_FIXTURES_DIR, KVCONF_SHARED_DIR), skipping with the reason
// when a fixture is absent (failing instead under CI=true, where ../shared must be present) or a profile cannot run
// here (ModelSuiteTest), contexts under a profile, and the (case) parameters with their test names.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/conformance/model_rules.hpp"
#include "kvconf/engine/profile.hpp"
#include "suite_support.hpp"

namespace kvconf::conformance::suite {

inline const std::vector<ModelFixture>& fixtures() {
  static const std::vector<ModelFixture> f = model_fixtures(KVCONF_FIXTURES_DIR, KVCONF_SHARED_DIR);
  return f;
}

// The fixtures the model suites run: the tiny ones and stories260K. The real model (smollm2-135m) has tests of its own
// (its golden token files, KvconfCli.ModelSmolLM2, the engines' cross-checks): a suite case of it costs ~30 s.
inline std::vector<std::string> fixture_names() {
  std::vector<std::string> v;
  for (const ModelFixture& f : fixtures())
    if (!f.real) v.push_back(f.name);
  return v;
}

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// In a test body: GTEST_SKIP with the reason when the fixture's files are missing (FAIL under CI=true).
#define KVCONF_SKIP_IF_MISSING(f)                                                                                     \
  do {                                                                                                                \
    if (const auto why_ = ::kvconf::conformance::fixture_missing(f)) {                                                \
      if (::kvconf::conformance::suite::under_ci()) FAIL() << *why_ << " (CI=true: the shared data must be present)"; \
      GTEST_SKIP() << *why_;                                                                                          \
    }                                                                                                                 \
  } while (0)

// In a test body: GTEST_SKIP with the reason when the profile cannot run here (a GPU profile without a usable CUDA
// device, or a build without CUDA: engine::profile_unavailable). Comes before KVCONF_SKIP_IF_MISSING.
#define KVCONF_SKIP_IF_UNAVAILABLE(profile_name)                                                               \
  do {                                                                                                         \
    if (const auto why_ = ::kvconf::engine::profile_unavailable(::kvconf::engine::find_profile(profile_name))) \
      GTEST_SKIP() << "profile " << (profile_name) << ": " << *why_;                                           \
  } while (0)

// A profile's kernels, resolved against the CPU registry (a GPU profile's CUDA kernels come from the engine's GPU
// fallback registry: engine::resolve), whichever registry() this build's kernel suites use.
inline engine::ProfileKernels profile_kernels(const std::string& name) {
  static const kernels::Registry cpu = kernels::cpu_registry();
  return engine::resolve(engine::find_profile(name), cpu);
}

// The model suites' profiles: the CPU ones, or (KVCONF_SUITE_GPU builds: the Cuda/ model suites) the GPU ones.
inline std::vector<std::string> suite_profiles(const std::vector<std::string>& cpu,
                                               const std::vector<std::string>& gpu) {
  return kGpuSuite ? gpu : cpu;
}

// Every profile of this build's model suites: the built-in CPU profiles, or (KVCONF_SUITE_GPU) the GPU profiles.
inline std::vector<std::string> all_suite_profiles() {
  std::vector<std::string> v;
  for (const engine::Profile& p : kGpuSuite ? engine::gpu_profiles() : engine::builtin_profiles()) v.push_back(p.name);
  return v;
}

struct ModelParam {
  ModelCase c;
};
inline void PrintTo(const ModelParam& p, std::ostream* os) { *os << p.c.id() << (p.c.slow ? " (slow)" : ""); }

inline std::vector<ModelParam> model_params(const std::vector<std::string>& profiles, bool with_slow = true) {
  std::vector<ModelParam> v;
  for (const ModelCase& c : model_cases(fixture_names(), profiles, false)) v.push_back({c});
  if (with_slow)
    for (const ModelCase& c : model_cases(fixture_names(), profiles, true)) v.push_back({c});
  return v;
}

// A model suite's test: SetUp() skips with the reason when the case's profile cannot run here
// (KVCONF_SKIP_IF_UNAVAILABLE), then when its fixture's files are missing (KVCONF_SKIP_IF_MISSING).
class ModelSuiteTest : public ::testing::TestWithParam<ModelParam> {
 protected:
  void SetUp() override {
    const ModelCase& c = GetParam().c;
    KVCONF_SKIP_IF_UNAVAILABLE(c.profile);
    KVCONF_SKIP_IF_MISSING(model_fixture(fixtures(), c.fixture));
  }
};

struct ModelParamName {
  std::string operator()(const ::testing::TestParamInfo<ModelParam>& i) const {
    return sanitize(i.param.c.id()) + (i.param.c.slow ? "__Slow" : "");
  }
};

// One prompt's free-running pair as the protocol records it (model "fixture:<name>"): what the model rules read.
inline RunPairRecord pair_record(const ModelCase& c, const std::string& profile, const std::string& prompt_id,
                                 std::uint64_t sample_seed, const analysis::PairedRun& run) {
  RunPairRecord r;
  r.model = "fixture:" + c.fixture;
  r.profile = profile;
  r.strategy = engine::strategy_key(c.strategy);
  r.prompt_id = prompt_id;
  r.seed = sample_seed;
  r.free = regime_record(run);
  return r;
}

// Pointers to the records, as the model rules take them.
inline std::vector<const RunPairRecord*> record_ptrs(const std::vector<RunPairRecord>& records) {
  std::vector<const RunPairRecord*> out;
  for (const auto& r : records) out.push_back(&r);
  return out;
}

// A model rule's verdict (model_rules.hpp, the reports' implementation) as "<Rule>.error|bound|headroom" properties
// (measured and threshold as the report states them), "<Rule>.skipped" when not applied, and one line on stdout.
inline void record_verdict(const RuleVerdict& v) {
  if (!v.skipped.empty()) {
    ::testing::Test::RecordProperty(v.name + ".skipped", v.skipped);
    std::printf("%s not applied: %s\n", v.name.c_str(), v.skipped.c_str());
    return;
  }
  ::testing::Test::RecordProperty(v.name + ".error", num17(v.measured));
  ::testing::Test::RecordProperty(v.name + ".bound", num17(v.threshold));
  ::testing::Test::RecordProperty(v.name + ".headroom", num17(v.headroom));
  std::printf("%s %s measured=%.9g threshold=%.9g headroom=%.9g %s\n", v.name.c_str(), v.pass ? "pass" : "FAIL",
              v.measured, v.threshold, v.headroom, v.detail.c_str());
}

inline analysis::PairOptions pair_options(const ModelCase& c, const std::string& prompt_id) {
  analysis::PairOptions o;
  o.steps = c.steps;
  o.sampler = case_sampler(c, prompt_id);
  return o;
}

}  // namespace kvconf::conformance::suite
