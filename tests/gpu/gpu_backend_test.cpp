// Unit tests of the GPU backend's registration (runs without a GPU): the device reason, stable kernel names, every
// CUDA kernel's supports() returning the reason where no device can run it (how the gpu suites skip), and the
// CUDA kernels' pipeline descriptions against the CPU emulations that follow the same orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvconf/kernels/gpu.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {
namespace {

// A well-formed call every CUDA kernel supports on a device: decode over 300 keys (two invariant splits).
AttentionCall decode_call(std::size_t d = 128, std::size_t n_q = 1, std::size_t n_kv = 300) {
  AttentionCall c;
  c.shape = {n_q, n_kv, 8, 2, d, d};
  c.params.causal = true;
  c.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.params.scale = 0.125;
  c.capacity = n_kv + 200;
  return c;
}

const std::vector<std::string> kCudaNames = {
    "cuda.attn.simple.f16",  "cuda.attn.simple.f32",  "cuda.attn.flash2.f16",    "cuda.attn.flash2.f32",
    "cuda.attn.splitkv.f16", "cuda.attn.splitkv.f32", "cuda.attn.invariant.f16", "cuda.attn.invariant.f32"};

TEST(GpuBackend, ReasonOrDeviceName) {
  const auto why = gpu_unavailable();
  if (why) {
    EXPECT_FALSE(why->empty());
    EXPECT_EQ(gpu_device_name(), "") << "a device name while the GPU is unavailable: " << *why;
    std::printf("GPU unavailable here: %s\n", why->c_str());
  } else {
    EXPECT_FALSE(gpu_device_name().empty()) << "a usable GPU without a name";
    std::printf("GPU: %s\n", gpu_device_name().c_str());
  }
  EXPECT_EQ(gpu_unavailable(), why) << "the probe is evaluated once per process";
}

TEST(GpuBackend, CudaKernelNamesAreStable) {
  const Registry r = gpu_registry();
  std::vector<std::string> cuda;
  for (const AttentionKernel& k : r.attention())
    if (k.info.backend == "cuda") cuda.push_back(k.info.name);
  EXPECT_EQ(cuda, kCudaNames) << "the CUDA attention kernels register on every machine, in a fixed order";
  for (const std::string& n : kCudaNames) {
    const AttentionKernel* k = r.find_attention(n);
    ASSERT_NE(k, nullptr) << n;
    const bool f16 = n.ends_with(".f16");
    EXPECT_EQ(k->info.in, f16 ? Format::fp16 : Format::fp32) << n;
    EXPECT_EQ(k->info.out, k->info.in) << n;
    EXPECT_EQ(k->info.acc, Format::fp32) << n;
    EXPECT_EQ(k->info.cache_invariant, n.find(".splitkv.") == std::string::npos) << n;
    EXPECT_NE(k->info.mirrors.find("bounds only"), std::string::npos) << n << ": GPU exp is not bit-specified";
  }
}

TEST(GpuBackend, EveryCudaKernelSkipsWithTheDeviceReason) {
  const auto why = gpu_unavailable();
  const Registry r = gpu_registry();
  std::size_t seen = 0;
  for (const AttentionKernel& k : r.attention()) {
    if (k.info.backend != "cuda") continue;
    ++seen;
    for (const AttentionCall& c : {decode_call(), decode_call(256, 16, 600), decode_call(96)}) {
      const Reason got = k.supports(c);
      if (why) {
        ASSERT_TRUE(got.has_value()) << k.info.name << " supports a call with no GPU to run it";
        EXPECT_EQ(*got, *why) << k.info.name << ": the device reason comes first";
      } else if (c.shape.d == 96) {
        ASSERT_TRUE(got.has_value()) << k.info.name << " accepts head dim 96";
        EXPECT_NE(got->find("64, 128 and 256"), std::string::npos) << *got;
      } else {
        EXPECT_FALSE(got.has_value()) << k.info.name << ": " << *got;
      }
    }
  }
  EXPECT_EQ(seen, kCudaNames.size());
}

// The pipeline fields the bounds read, CUDA kernel vs the CPU emulation that follows the same order.
void expect_same_numerics(const ref::AttentionPipeline& g, const ref::AttentionPipeline& c, const std::string& what) {
  EXPECT_EQ(g.kv_blocks, c.kv_blocks) << what << ": " << g.name << " vs " << c.name;
  EXPECT_EQ(g.splits, c.splits) << what << ": " << g.name << " vs " << c.name;
  EXPECT_EQ(g.split_out, c.split_out) << what;
  EXPECT_EQ(g.normalize_before_pv, c.normalize_before_pv) << what;
  EXPECT_EQ(g.p_cast, c.p_cast) << what;
  EXPECT_EQ(g.pv_terms, c.pv_terms) << what << ": " << g.name << " vs " << c.name;
  EXPECT_EQ(g.exp_rel_error, c.exp_rel_error) << what;
  EXPECT_EQ(g.out, c.out) << what;
}

TEST(GpuBackend, PipelinesMatchTheCpuEmulationsOfTheSameOrder) {
  const Registry gpu = gpu_registry();
  const Registry cpu = cpu_registry();
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"flash2", "a1_flash2"}, {"splitkv", "a2_splitkv"}, {"invariant", "a7_fixedsplit"}};
  std::vector<AttentionCall> calls;
  for (std::size_t d : {64, 128, 256})
    for (std::size_t n_kv : {1, 100, 256, 257, 700, 4096})
      for (std::size_t n_q : {std::size_t{1}, std::min<std::size_t>(n_kv, 16)})
        calls.push_back(decode_call(d, n_q, n_kv));
  AttentionCall windowed = decode_call(128, 1, 2000);
  windowed.params.window = 300;
  calls.push_back(windowed);
  // Inside a batched decode step FA2 counts batch · heads work items: fewer splits (AttentionBatchInvariance).
  for (std::size_t batch : {4, 64})
    for (std::size_t n_kv : {700, 4096}) {
      AttentionCall in_batch = decode_call(128, 1, n_kv);
      in_batch.batch = batch;
      calls.push_back(in_batch);
    }
  for (const auto& [g_id, c_id] : pairs)
    for (const char* f : {"f16", "f32"}) {
      const AttentionKernel* g = gpu.find_attention("cuda.attn." + g_id + "." + f);
      const AttentionKernel* c = cpu.find_attention("cpu.attn." + c_id + "." + f);
      ASSERT_NE(g, nullptr);
      ASSERT_NE(c, nullptr);
      for (const AttentionCall& call : calls)
        expect_same_numerics(g->pipeline(call), c->pipeline(call),
                             g->info.name + " n_q=" + std::to_string(call.shape.n_q) +
                                 " n_kv=" + std::to_string(call.shape.n_kv) + " d=" + std::to_string(call.shape.d) +
                                 " batch=" + std::to_string(call.batch));
    }
}

TEST(GpuBackend, SimpleKernelPipelineNormalisesBeforePv) {
  const Registry gpu = gpu_registry();
  for (const char* n : {"cuda.attn.simple.f16", "cuda.attn.simple.f32"}) {
    const ref::AttentionPipeline p = gpu.find_attention(n)->pipeline(decode_call());
    EXPECT_TRUE(p.normalize_before_pv) << n;
    EXPECT_EQ(p.kv_blocks, 1u) << n;
    EXPECT_EQ(p.splits, 1u) << n;
    EXPECT_EQ(p.p_cast.has_value(), std::string(n).ends_with("f16")) << n;
  }
}

}  // namespace
}  // namespace kvconf::kernels
