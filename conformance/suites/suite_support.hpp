// Shared by the conformance suites: the registry they instantiate over (the CPU registry, prefix Cpu; built with
// KVCONF_SUITE_GPU, the GPU registry, prefix Cuda: the same sources make the `gpu` executables), (kernel, case)
// parameters and their test names (`<kernel>__<case_id>`, non-alphanumerics as `_`, `__Slow` appended for slow
// cases so that kvconf_add_test gives them the `slow` label), recording CheckResults as test properties, and the
// seed sweep.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/numerics/number_text.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/registry.hpp"
#if defined(KVCONF_SUITE_GPU)
#include "kvconf/kernels/gpu.hpp"
#endif
#if defined(KVCONF_SUITE_TORCH) || defined(KVCONF_SUITE_TORCH_CUDA)
#include "kvconf/kernels/torch.hpp"
#endif
#if defined(KVCONF_SUITE_PLUGIN)
#include "kvconf/kernels/plugin.hpp"
#endif

// KVCONF_INSTANTIATE_SUITE_P(Suite, generator, name): INSTANTIATE_TEST_SUITE_P with the backend prefix, Cpu or
// Cuda (an indirection, so the prefix macro expands before gtest pastes it into its identifiers).
#if defined(KVCONF_SUITE_GPU)
#define KVCONF_SUITE_PREFIX Cuda
#elif defined(KVCONF_SUITE_TORCH)
#define KVCONF_SUITE_PREFIX Torch
#elif defined(KVCONF_SUITE_TORCH_CUDA)
#define KVCONF_SUITE_PREFIX TorchCuda
#elif defined(KVCONF_SUITE_PLUGIN)
#define KVCONF_SUITE_PREFIX Plugin
#else
#define KVCONF_SUITE_PREFIX Cpu
#endif
// KVCONF_REGISTRY_TEST(Suite): the registry test, Suite.HasCpuKernels or Suite.HasCudaKernels.
#if defined(KVCONF_SUITE_GPU)
#define KVCONF_REGISTRY_TEST_NAME HasCudaKernels
#elif defined(KVCONF_SUITE_TORCH)
#define KVCONF_REGISTRY_TEST_NAME HasTorchKernels
#elif defined(KVCONF_SUITE_TORCH_CUDA)
#define KVCONF_REGISTRY_TEST_NAME HasTorchCudaKernels
#elif defined(KVCONF_SUITE_PLUGIN)
#define KVCONF_REGISTRY_TEST_NAME HasPluginKernels
#else
#define KVCONF_REGISTRY_TEST_NAME HasCpuKernels
#endif
#define KVCONF_REGISTRY_TEST_(suite, name) TEST(suite, name)
#define KVCONF_REGISTRY_TEST(suite) KVCONF_REGISTRY_TEST_(suite, KVCONF_REGISTRY_TEST_NAME)
#define KVCONF_INSTANTIATE_SUITE_P_(prefix, ...) INSTANTIATE_TEST_SUITE_P(prefix, __VA_ARGS__)
#define KVCONF_INSTANTIATE_SUITE_P(...) KVCONF_INSTANTIATE_SUITE_P_(KVCONF_SUITE_PREFIX, __VA_ARGS__)

namespace kvconf::conformance::suite {

#if defined(KVCONF_SUITE_GPU)
inline constexpr bool kGpuSuite = true;
inline const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::gpu_registry();
  return r;
}
#elif defined(KVCONF_SUITE_TORCH)
// The libtorch kernels: registered whatever the build; without libtorch every case skips with the reason.
inline constexpr bool kGpuSuite = false;
inline const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::torch_registry();
  return r;
}
#elif defined(KVCONF_SUITE_TORCH_CUDA)
// The libtorch kernels on CUDA: registered whatever the build; without a CUDA libtorch or a device every case skips.
inline constexpr bool kGpuSuite = false;  // the kernel kinds are all registered (the GPU-registry allowance is moot)
inline const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::torch_cuda_registry();
  return r;
}
#elif defined(KVCONF_SUITE_PLUGIN)
// The kernels of the plugins in KVCONF_PLUGINS (colon-separated .so paths), else of the example plugin built in this
// tree (KVCONF_SUITE_DEFAULT_PLUGIN). A refused plugin ends the program with its one-line reason (exit 2).
inline constexpr bool kGpuSuite = false;
inline const kernels::Registry& registry() {
  static const kernels::Registry r = [] {
    try {
      return kernels::plugin_registry(kernels::plugins_from_env(KVCONF_SUITE_DEFAULT_PLUGIN));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kvconf Plugin suites: %s\n", e.what());
      std::exit(2);
    }
  }();
  return r;
}
#else
inline constexpr bool kGpuSuite = false;
inline const kernels::Registry& registry() {
  static const kernels::Registry r = kernels::cpu_registry();
  return r;
}
#endif

// The <Thing>ConformanceRegistry test: a suite over an empty registry would pass vacuously. The CPU registry must
// hold kernels of the suite's kind; the GPU registry may lack a kind no GPU backend provides (there are no CUDA
// RMSNorm kernels), and then the test skips saying so.
template <class V>
void expect_registered(const V& kernels, const char* kind) {
#if defined(KVCONF_SUITE_PLUGIN)
  // A plugin may provide some kinds only.
  if (kernels.empty()) GTEST_SKIP() << "the plugins loaded (KVCONF_PLUGINS) register no " << kind << " kernels";
#endif
  if (kGpuSuite && kernels.empty()) GTEST_SKIP() << "no GPU " << kind << " kernels are registered in gpu_registry()";
  EXPECT_FALSE(kernels.empty()) << "no " << (kGpuSuite ? "GPU " : "CPU ") << kind << " kernels registered";
}

inline std::string sanitize(const std::string& s) {
  std::string out = s;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return out;
}

// One (kernel, case) pair; K is GemmKernel, NormKernel or AttentionKernel, C the matching case.
template <class K, class C>
struct Param {
  const K* kernel = nullptr;
  C c;
};

template <class K, class C>
void PrintTo(const Param<K, C>& p, std::ostream* os) {
  *os << p.kernel->info.name << " on " << p.c.id() << (p.c.slow ? " (slow)" : "");
}

// Every kernel × every case.
template <class K, class C>
std::vector<Param<K, C>> all_pairs(const std::vector<K>& kernels, const std::vector<C>& cases) {
  std::vector<Param<K, C>> v;
  for (const K& k : kernels)
    for (const C& c : cases) v.push_back({&k, c});
  return v;
}

// Every kernel × the cases whose ids are listed (a listed id missing from the table is a test-table bug).
template <class K, class C>
std::vector<Param<K, C>> pairs_for_ids(const std::vector<K>& kernels, const std::vector<C>& cases,
                                       const std::vector<std::string>& ids) {
  std::vector<C> picked;
  for (const auto& id : ids) {
    bool found = false;
    for (const C& c : cases)
      if (c.id() == id) {
        picked.push_back(c);
        found = true;
      }
    if (!found) {
      std::fprintf(stderr, "kvconf conformance: representative case '%s' is not in the case table\n", id.c_str());
      std::abort();
    }
  }
  return all_pairs(kernels, picked);
}

struct ParamName {
  template <class P>
  std::string operator()(const ::testing::TestParamInfo<P>& info) const {
    return sanitize(info.param.kernel->info.name) + "__" + sanitize(info.param.c.id()) +
           (info.param.c.slow ? "__Slow" : "");
  }
};

inline std::string num17(double x) { return num_exact(x); }

// "<rule>[.<qualifier>].error|bound|headroom|seed" properties for every result, and the results on stdout.
inline void record(const CheckResults& results, const std::vector<std::string>& qualifiers = {}) {
  for (std::size_t i = 0; i < results.size(); ++i) {
    const CheckResult& r = results[i];
    const std::string key = r.rule + (i < qualifiers.size() && !qualifiers[i].empty() ? "." + qualifiers[i] : "");
    ::testing::Test::RecordProperty(key + ".error", num17(r.error));
    ::testing::Test::RecordProperty(key + ".bound", num17(r.bound));
    ::testing::Test::RecordProperty(key + ".headroom", num17(r.headroom));
    ::testing::Test::RecordProperty(key + ".seed", std::to_string(r.seed));
  }
  std::printf("%s", describe(results).c_str());
}

inline void expect_pass(const CheckResults& results) {
  EXPECT_FALSE(results.empty()) << "no check ran";
  EXPECT_TRUE(all_pass(results)) << describe(results);
}

// The seed sweep of DESIGN.md rule 5 ("correct kernels pass across many seeds"): seed i of a (rule, case) is
// seed_for(rule, id) for i = 0 and a splitmix64 step of it for i > 0 (KVCONF_SEED moves the whole sweep).
inline constexpr int kSweepSeeds = 20;
inline std::uint64_t sweep_seed(std::uint64_t base, int i) {
  if (i == 0) return base;
  std::uint64_t z = base + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Runs check(seed) for kSweepSeeds seeds; records, per rule, the result with the least headroom over the sweep
// (plus "<rule>.seeds_failed"), and expects every result of every seed to pass.
template <class Check>
void sweep(const std::string& rule_key, const std::string& case_id, Check check) {
  const std::uint64_t base = seed_for(rule_key, case_id);
  CheckResults worst;       // per rule, the result with the least headroom
  std::vector<int> failed;  // per rule, the seeds it failed for
  std::string failures;
  for (int i = 0; i < kSweepSeeds; ++i) {
    for (const CheckResult& r : check(sweep_seed(base, i))) {
      std::size_t j = 0;
      while (j < worst.size() && worst[j].rule != r.rule) ++j;
      if (j == worst.size()) {
        worst.push_back(r);
        failed.push_back(0);
      } else if (!(r.headroom >= worst[j].headroom)) {
        worst[j] = r;
      }
      if (!r.pass) {
        ++failed[j];
        failures += describe({r});
      }
    }
  }
  record(worst, std::vector<std::string>(worst.size(), "min_over_" + std::to_string(kSweepSeeds) + "_seeds"));
  for (std::size_t j = 0; j < worst.size(); ++j)
    ::testing::Test::RecordProperty(worst[j].rule + ".seeds_failed", std::to_string(failed[j]));
  EXPECT_FALSE(worst.empty()) << "no check ran";
  EXPECT_TRUE(failures.empty()) << rule_key << " on " << case_id << " failed for some of " << kSweepSeeds << " seeds:\n"
                                << failures;
}

}  // namespace kvconf::conformance::suite
