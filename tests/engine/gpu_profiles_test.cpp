// The GPU profiles (engine/profile.hpp gpu_profiles: cuda-fp16, cuda-fp32, cuda-fp16-invariant): kept out of
// builtin_profiles (what `kvconf run` sweeps), found by name, and resolved only where a CUDA device can run them —
// elsewhere resolve() throws DeviceUnavailable with gpu_unavailable()'s reason, and nothing crashes.
#include <gtest/gtest.h>

#include <string>

#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/gpu.hpp"
#include "kvconf/kernels/registry.hpp"

using namespace kvconf;

TEST(GpuProfiles, NotAmongTheCpuProfiles) {
  for (const engine::Profile& p : engine::builtin_profiles()) {
    EXPECT_FALSE(p.requires_gpu) << p.name;
    EXPECT_EQ(p.name.rfind("cuda", 0), std::string::npos) << p.name;
    EXPECT_FALSE(engine::profile_unavailable(p).has_value()) << p.name;
  }
  ASSERT_EQ(engine::gpu_profiles().size(), 3u);
  for (const engine::Profile& p : engine::gpu_profiles()) {
    EXPECT_TRUE(p.requires_gpu) << p.name;
    EXPECT_EQ(&engine::find_profile(p.name), &p);
  }
  EXPECT_EQ(engine::find_profile("cuda-fp16").storage, Format::fp16);
  EXPECT_EQ(engine::find_profile("cuda-fp32").storage, Format::fp32);
  EXPECT_TRUE(engine::find_profile("cuda-fp16-invariant").cache_invariant);
}

TEST(GpuProfiles, UnavailableWhereTheGpuIs) {
  const auto why = kernels::gpu_unavailable();
  for (const engine::Profile& p : engine::gpu_profiles()) {
    const auto mine = engine::profile_unavailable(p);
    EXPECT_EQ(mine.has_value(), why.has_value()) << p.name;
    if (why) {
      EXPECT_EQ(*mine, *why) << p.name;
    }
  }
}

// With a device: every GPU profile resolves against the CPU registry alone (its CUDA kernels from the engine's
// fallback registry) to kernels of the names it lists. Without one: DeviceUnavailable naming the profile and the
// reason.
TEST(GpuProfiles, ResolveFromTheCpuRegistry) {
  const kernels::Registry cpu = kernels::cpu_registry();
  for (const engine::Profile& p : engine::gpu_profiles()) {
    SCOPED_TRACE(p.name);
    if (const auto why = kernels::gpu_unavailable()) {
      try {
        (void)engine::resolve(p, cpu);
        ADD_FAILURE() << "resolve succeeded without a device";
      } catch (const engine::DeviceUnavailable& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("'" + p.name + "'"), std::string::npos) << what;
        EXPECT_NE(what.find(*why), std::string::npos) << what;
      }
      continue;
    }
    const engine::ProfileKernels k = engine::resolve(p, cpu);
    EXPECT_EQ(k.gemm->info.name, p.gemm);
    EXPECT_EQ(k.attn_prefill->info.name, p.attn_prefill);
    EXPECT_EQ(k.attn_decode->info.name, p.attn_decode);
    EXPECT_EQ(k.norm->info.name, p.norm);
    EXPECT_NE(k.gemm->info.backend, "cpu");
    EXPECT_NE(k.attn_decode->info.backend, "cpu");
    if (p.cache_invariant) {
      EXPECT_TRUE(k.gemm->info.cache_invariant);
      EXPECT_TRUE(k.attn_prefill->info.cache_invariant);
    }
  }
}
