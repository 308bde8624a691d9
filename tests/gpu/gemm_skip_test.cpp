// Unit tests of the GPU GEMM entries that run on any machine (label unit): all five cuda.gemm.* kernels are
// registered with their claims and paths; where no device can run them (or without CUDA) every supports() gives
// gpu_unavailable()'s reason — so the gpu suites skip with it — and run() throws instead of returning nothing.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "kvconf/kernels/cublas.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf {
namespace {

kernels::Registry gemms() {
  kernels::Registry r;
  kernels::register_cublas_kernels(r);
  return r;
}

const std::vector<std::string> kNames = {"cuda.gemm.cublas.f16.acc32", "cuda.gemm.cublas.f16.acc16",
                                         "cuda.gemm.cublas.f32", "cuda.gemm.fixed.f16", "cuda.gemm.rowdot.f32acc"};

TEST(GpuGemmEntries, AllRegisteredWithTheirClaims) {
  const kernels::Registry r = gemms();
  ASSERT_EQ(r.gemm().size(), kNames.size());
  for (const auto& n : kNames) {
    const kernels::GemmKernel* k = r.find_gemm(n);
    ASSERT_NE(k, nullptr) << n;
    EXPECT_TRUE(k->info.deterministic) << n;
    EXPECT_EQ(k->info.in == Format::fp32, n == "cuda.gemm.cublas.f32") << n;
  }
  EXPECT_TRUE(r.find_gemm("cuda.gemm.fixed.f16")->info.cache_invariant);
  EXPECT_TRUE(r.find_gemm("cuda.gemm.rowdot.f32acc")->info.cache_invariant);
  EXPECT_FALSE(r.find_gemm("cuda.gemm.cublas.f16.acc32")->info.cache_invariant);
}

// The paths are defined without a device: the bitwise kernels' orders, cuBLAS's tensor-core model with the
// device's (or the H100 preset's) parameters; and they do not depend on M for these kernels.
TEST(GpuGemmEntries, PathsAreTheDocumentedOrders) {
  const kernels::Registry r = gemms();
  for (const kernels::GemmShape s : {kernels::GemmShape{1, 64, 4096}, kernels::GemmShape{17, 64, 4096}}) {
    const auto fixed = r.find_gemm("cuda.gemm.fixed.f16")->path(s);
    EXPECT_TRUE(std::holds_alternative<Sequential>(fixed.order));
    EXPECT_TRUE(fixed.spec.fma);
    EXPECT_EQ(fixed.spec.acc, Format::fp32);
    const auto rowdot = r.find_gemm("cuda.gemm.rowdot.f32acc")->path(s);
    ASSERT_TRUE(std::holds_alternative<ThreadStrided>(rowdot.order));
    const auto& ts = std::get<ThreadStrided>(rowdot.order);
    EXPECT_EQ(ts.threads, 32u);
    EXPECT_EQ(ts.vec, 1u);
    EXPECT_EQ(ts.tree, ThreadTree::warp_first);
    const auto tc = r.find_gemm("cuda.gemm.cublas.f16.acc32")->path(s);
    ASSERT_TRUE(std::holds_alternative<TensorCore>(tc.order));
    EXPECT_EQ(std::get<TensorCore>(tc.order).params.k, kernels::gpu_tensor_core_params().k);
    EXPECT_EQ(std::get<TensorCore>(tc.order).params.neab, kernels::gpu_tensor_core_params().neab);
  }
  ::testing::Test::RecordProperty("tensor_core_model", kernels::gpu_tensor_core_model());
}

// The skip reason is given: without a usable device, each entry says why (the gpu label's GTEST_SKIP message).
TEST(GpuGemmEntries, SupportsGivesTheSkipReason) {
  const kernels::Registry r = gemms();
  const auto why = kernels::gpu_unavailable();
  for (const auto& k : r.gemm()) {
    const auto s = k.supports({1, 64, 256});
    if (why) {
      ASSERT_TRUE(s.has_value()) << k.info.name << " claims support although: " << *why;
      EXPECT_FALSE(s->empty()) << k.info.name;
      EXPECT_EQ(*s, *why) << k.info.name;
      std::vector<float> x(256), w(64 * 256), y(64);
      EXPECT_THROW(k.run({1, 64, 256}, x, w, y), std::runtime_error) << k.info.name << " ran without a device";
    } else {
      EXPECT_FALSE(s.has_value()) << k.info.name << ": " << *s;
    }
  }
  if (why) {
    ::testing::Test::RecordProperty("skip_reason", *why);
    std::printf("[   info   ] GPU GEMMs skip here: %s\n", why->c_str());
  }
}

// The weight-cache API is callable anywhere (no-ops without CUDA or device).
TEST(GpuGemmEntries, WeightCacheApiIsSafeWithoutUse) {
  kernels::drop_gpu_weight_cache();
  const auto s = kernels::gpu_weight_cache_stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(s.uploads, 0u);
}

}  // namespace
}  // namespace kvconf
