// Loading plugins: a good plugin registers plugin.<lib>.<kernel> entries with its declared formats and claims; a bad
// one (missing file, not a library, missing symbol, wrong ABI version, bad descriptor) is refused with one line
// naming the plugin and what is wrong, and leaves the registry untouched.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kvconf/kernels/black_box.hpp"
#include "kvconf/kernels/plugin.hpp"

namespace kvconf::kernels {
namespace {

// The refusal message of loading `lib` (fails the test when the plugin is accepted).
std::string refusal(const std::string& lib) {
  Registry r;
  try {
    register_plugin_kernels(r, lib);
  } catch (const PluginError& e) {
    EXPECT_TRUE(r.names().empty()) << "a refused plugin registered kernels";
    return e.what();
  }
  ADD_FAILURE() << lib << " was accepted";
  return {};
}

TEST(PluginLoad, RegistersTheExampleKernels) {
  Registry r;
  register_plugin_kernels(r, KVCONF_KVCONF_EXAMPLE_PLUGIN);
  ASSERT_EQ(r.gemm().size(), 3u);
  ASSERT_EQ(r.norm().size(), 2u);
  ASSERT_EQ(r.attention().size(), 2u);
  const GemmKernel* g = r.find_gemm("plugin.kvconf_example_plugin.gemm.f16");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->info.backend, "plugin");
  EXPECT_EQ(g->info.in, Format::fp16);
  EXPECT_EQ(g->info.acc, Format::fp32);
  EXPECT_EQ(g->info.out, Format::fp16);
  EXPECT_FALSE(g->info.cache_invariant);
  EXPECT_TRUE(g->info.deterministic);
  EXPECT_EQ(g->info.mirrors, "example: fp16 in/out, fp32 accumulation");
  EXPECT_EQ(g->path({1, 8, 64}).name, "black-box");
  const NormKernel* n = r.find_norm("plugin.kvconf_example_plugin.norm.bf16");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->info.in, Format::bf16);
  const AttentionKernel* a = r.find_attention("plugin.kvconf_example_plugin.attn.two_pass.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->info.in, Format::fp32);
  // Version 2: a GEMM that declares an fp16 accumulator is judged by it.
  const GemmKernel* g16 = r.find_gemm("plugin.kvconf_example_plugin.gemm.acc16.f16");
  ASSERT_NE(g16, nullptr);
  EXPECT_EQ(g16->info.acc, Format::fp16);
  EXPECT_EQ(g16->info.partial, Format::fp16);
  EXPECT_EQ(g16->path({1, 8, 64}).spec.acc, Format::fp16);
}

// A version-1 plugin (its table in struct kvconf_kernel_desc_v1's layout) is still read, at version 1: its kernel
// registers with fp32 accumulation and runs; version 1 cannot declare another accumulator.
TEST(PluginLoad, ReadsAVersionOnePlugin) {
  Registry r;
  register_plugin_kernels(r, KVCONF_TEST_ABI_V1);
  ASSERT_EQ(r.gemm().size(), 1u);
  const GemmKernel& g = r.gemm().front();
  EXPECT_EQ(g.info.name, "plugin.test_abi_v1.ok");
  EXPECT_EQ(g.info.acc, Format::fp32);
  // x (2, 3), w (4, 3): rows (1, 0, 1), (0, 1, 0), (1, 0, 0), (1, 1, 1); y (2, 4) worked out by hand.
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, w = {1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1, 1}, y(8);
  g.run({2, 4, 3}, x, w, y);
  EXPECT_EQ(y, (std::vector<float>{4, 2, 1, 6, 10, 5, 4, 15}));
  EXPECT_EQ(refusal(KVCONF_TEST_ABI_V1_ACC16),
            std::string("plugin ") + KVCONF_TEST_ABI_V1_ACC16 +
                ": kernel[1] 'acc16': field acc = 2, expected KVCONF_FP32 (1): ABI version 1 describes "
                "fp32-accumulating kernels only (version 2 reads KVCONF_FP16 and KVCONF_BF16)");
}

TEST(PluginLoad, RefusesBadVersionTwoFields) {
  EXPECT_EQ(refusal(KVCONF_TEST_NARROW_ACC),
            std::string("plugin ") + KVCONF_TEST_NARROW_ACC +
                ": kernel[1] 'gemm': field acc = 2, expected a format with at least the significand bits of in = 1");
  EXPECT_EQ(refusal(KVCONF_TEST_GEMM_PV_ACC),
            std::string("plugin ") + KVCONF_TEST_GEMM_PV_ACC +
                ": kernel[1] 'gemm': field pv_acc = 2, expected 0 (only attention kernels have a P·V)");
  EXPECT_EQ(refusal(KVCONF_TEST_BAD_PV_ACC),
            std::string("plugin ") + KVCONF_TEST_BAD_PV_ACC +
                ": kernel[1] 'attn': field pv_acc = 9, expected 0 (= acc), KVCONF_FP32 (1), KVCONF_FP16 (2) or "
                "KVCONF_BF16 (3)");
  EXPECT_EQ(refusal(KVCONF_TEST_BAD_FLAGS),
            std::string("plugin ") + KVCONF_TEST_BAD_FLAGS +
                ": kernel[1] 'attn': field flags = 2, expected 0 or KVCONF_FLAG_EXP2_SCALE (1)");
  EXPECT_EQ(refusal(KVCONF_TEST_FLAG_ON_GEMM),
            std::string("plugin ") + KVCONF_TEST_FLAG_ON_GEMM +
                ": kernel[1] 'gemm': field flags = 1, expected 0 (KVCONF_FLAG_EXP2_SCALE describes attention kernels)");
}

// KVCONF_FLAG_EXP2_SCALE reaches the bound: the flagged kernel's pipeline charges the scale folded with log2 e
// (black_box.hpp's kCudaScaleLog2RelError, as kvconf charges PyTorch's CUDA SDPA), the same kernel unflagged the
// black-box pipeline's own 2u + 2u².
TEST(PluginLoad, ExpTwoScaleFlagChargesTheFoldedScale) {
  Registry r;
  register_plugin_kernels(r, KVCONF_TEST_EXP2_SCALE);
  const AttentionKernel* plain = r.find_attention("plugin.test_exp2_scale.attn");
  const AttentionKernel* folded = r.find_attention("plugin.test_exp2_scale.attn_exp2");
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(folded, nullptr);
  AttentionCall c;
  c.shape = {1, 8, 2, 2, 64, 64};
  c.params.scale = 0.125;
  const double u = 0x1p-24;
  EXPECT_EQ(plain->pipeline(c).scale_rel_error, 2 * u * (1 + u));
  EXPECT_EQ(folded->pipeline(c).scale_rel_error, kCudaScaleLog2RelError);
  EXPECT_GT(kCudaScaleLog2RelError, 2 * u * (1 + u));
}

TEST(PluginLoad, PrefixIsTheFileNameWithoutLibAndExtension) {
  EXPECT_EQ(plugin_prefix("/x/libmine.so"), "plugin.mine.");
  EXPECT_EQ(plugin_prefix("engine_kernels.so.1"), "plugin.engine_kernels.");
}

TEST(PluginLoad, SupportsDeclinesWithThePluginsReason) {
  Registry r;
  register_plugin_kernels(r, KVCONF_KVCONF_EXAMPLE_PLUGIN);
  const AttentionKernel* a = r.find_attention("plugin.kvconf_example_plugin.attn.two_pass.f16");
  ASSERT_NE(a, nullptr);
  AttentionCall c;
  c.shape = {1, 8, 2, 2, 64, 32};
  c.params.scale = 0.125;
  EXPECT_EQ(a->supports(c).value_or("supported"), "plugin: the example attention needs d_v == d (got 32, 64)");
  c.shape.d_v = 64;
  EXPECT_EQ(a->supports(c), std::nullopt);
  c.params.scale = 0.1;  // not a float value
  EXPECT_EQ(a->supports(c).value_or("supported"),
            "the ABI passes scale and softcap as floats: these are not float values");
}

TEST(PluginLoad, RefusesAMissingFile) {
  EXPECT_EQ(refusal("/nonexistent/libnope.so"), "plugin /nonexistent/libnope.so: no such file");
}

TEST(PluginLoad, RefusesAFileThatIsNotALibrary) {
  const auto f = std::filesystem::temp_directory_path() / "kvconf_not_a_plugin.so";
  std::ofstream(f) << "not an ELF file\n";
  const std::string m = refusal(f.string());
  EXPECT_EQ(m.rfind("plugin " + f.string() + ": dlopen failed: ", 0), 0u) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  std::filesystem::remove(f);
}

TEST(PluginLoad, RefusesAMissingSymbol) {
  EXPECT_EQ(refusal(KVCONF_TEST_MISSING_REGISTER),
            std::string("plugin ") + KVCONF_TEST_MISSING_REGISTER +
                ": missing symbol kvconf_plugin_register (a plugin exports kvconf_plugin_abi_version and "
                "kvconf_plugin_register, include/kvconf/plugin.h)");
}

TEST(PluginLoad, RefusesAnotherAbiVersion) {
  EXPECT_EQ(refusal(KVCONF_TEST_BAD_ABI), std::string("plugin ") + KVCONF_TEST_BAD_ABI +
                                              ": ABI version 3, expected 1 to 2 (the versions this kvconf reads)");
}

TEST(PluginLoad, RefusesAnUnknownFormat) {
  EXPECT_EQ(refusal(KVCONF_TEST_BAD_FORMAT),
            std::string("plugin ") + KVCONF_TEST_BAD_FORMAT +
                ": kernel[1] 'gemm': field in = 7, expected KVCONF_FP32 (1), KVCONF_FP16 (2) or KVCONF_BF16 (3)");
}

TEST(PluginLoad, RefusesAnEmptyName) {
  EXPECT_EQ(refusal(KVCONF_TEST_EMPTY_NAME),
            std::string("plugin ") + KVCONF_TEST_EMPTY_NAME +
                ": kernel[1]: field name is empty, expected 1 to 64 characters of [A-Za-z0-9_.-]");
}

TEST(PluginLoad, RefusesADuplicateName) {
  EXPECT_EQ(refusal(KVCONF_TEST_DUPLICATE_NAME), std::string("plugin ") + KVCONF_TEST_DUPLICATE_NAME +
                                                     ": kernel[1] 'ok': duplicate name (an earlier descriptor has it)");
}

TEST(PluginLoad, RefusesANullRunFunction) {
  EXPECT_EQ(refusal(KVCONF_TEST_NULL_RUN),
            std::string("plugin ") + KVCONF_TEST_NULL_RUN + ": kernel[1] 'gemm': field gemm_run is NULL");
}

TEST(PluginLoad, RefusesTheSameLibraryTwice) {
  Registry r;
  register_plugin_kernels(r, KVCONF_KVCONF_EXAMPLE_PLUGIN);
  const std::size_t before = r.names().size();
  try {
    register_plugin_kernels(r, KVCONF_KVCONF_EXAMPLE_PLUGIN);
    ADD_FAILURE() << "loaded twice";
  } catch (const PluginError& e) {
    EXPECT_EQ(std::string(e.what()), std::string("plugin ") + KVCONF_KVCONF_EXAMPLE_PLUGIN +
                                         ": kernel 'gemm.f32' would register as plugin.kvconf_example_plugin.gemm.f32, "
                                         "which is already registered (two plugins with the same file name?)");
  }
  EXPECT_EQ(r.names().size(), before);
}

TEST(PluginLoad, PluginsFromTheEnvironment) {
  ::setenv("KVCONF_PLUGINS", "/a/liba.so::/b/libb.so:", 1);
  EXPECT_EQ(plugins_from_env("/fallback.so"), (std::vector<std::string>{"/a/liba.so", "/b/libb.so"}));
  ::setenv("KVCONF_PLUGINS", "", 1);
  EXPECT_EQ(plugins_from_env("/fallback.so"), (std::vector<std::string>{"/fallback.so"}));
  ::unsetenv("KVCONF_PLUGINS");
  EXPECT_EQ(plugins_from_env(), (std::vector<std::string>{}));
}

TEST(PluginLoad, TimeoutFromTheEnvironment) {
  ::setenv("KVCONF_PLUGIN_TIMEOUT_S", "0.25", 1);
  EXPECT_EQ(plugin_options().timeout_s, 0.25);
  ::setenv("KVCONF_PLUGIN_TIMEOUT_S", "soon", 1);
  try {
    plugin_options();
    ADD_FAILURE() << "accepted KVCONF_PLUGIN_TIMEOUT_S=soon";
  } catch (const PluginError& e) {
    EXPECT_STREQ(e.what(), "KVCONF_PLUGIN_TIMEOUT_S='soon': expected a positive number of seconds");
  }
  ::unsetenv("KVCONF_PLUGIN_TIMEOUT_S");
  EXPECT_EQ(plugin_options().timeout_s, 10.0);
}

}  // namespace
}  // namespace kvconf::kernels
