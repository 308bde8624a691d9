// Unit tests of the libtorch backend (kernels/torch): the registry's names and claims, the SDPA backend each call
// takes (recorded in the pipeline's name), exact conversions in and out of torch (small-integer products are exact,
// so every torch kernel must return them exactly), and the black-box descriptions the bounds use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kvconf/kernels/black_box.hpp"
#include "kvconf/kernels/torch.hpp"
#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/reference/bounds.hpp"

namespace kvconf::kernels {
namespace {

AttentionCall call(std::size_t n_q, std::size_t n_kv, bool causal, std::int64_t window = 0) {
  AttentionCall c;
  c.shape = {n_q, n_kv, 4, 2, 32, 32};
  c.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.params.causal = causal;
  c.params.window = window;
  c.params.scale = 0.125;
  return c;
}

TEST(TorchRegistry, NamesFormatsAndClaims) {
  const Registry r = torch_registry();
  EXPECT_EQ(r.attention().size(), 6u);
  EXPECT_EQ(r.gemm().size(), 3u);
  EXPECT_EQ(r.norm().size(), 3u);
  for (const auto& k : r.attention()) {
    EXPECT_EQ(k.info.backend, "torch") << k.info.name;
    EXPECT_FALSE(k.info.cache_invariant) << k.info.name << ": a black box claims nothing about decode vs prefill";
    EXPECT_EQ(k.info.in, k.info.out) << k.info.name;
  }
  EXPECT_NE(r.find_attention("torch.attn.sdpa_flash.f16"), nullptr);
  EXPECT_NE(r.find_attention("torch.attn.sdpa_math.bf16"), nullptr);
  EXPECT_NE(r.find_gemm("torch.gemm.linear.f32"), nullptr);
  EXPECT_NE(r.find_norm("torch.norm.hf_rms.f16"), nullptr);
}

// The CTest batches of the Torch/ and TorchCuda/ suites (one per kernel, read from each suite's own case list when
// ctest lists the tests: cmake/KvconfBatchDiscovery.cmake) cover exactly the registry, in its order: a kernel
// registered without a batch would have its conformance cases never run, and a batch without a kernel would name
// cases nobody registers. The lists exist once ctest has listed the tests (as it does before running this one).
std::string test_id(std::string name) {
  for (char& ch : name)
    if (ch == '.') ch = '_';
  return name;
}

std::vector<std::string> ids_of(const auto& kernels) {
  std::vector<std::string> ids;
  for (const auto& k : kernels) ids.push_back(test_id(k.info.name));
  return ids;
}

// The kernel ids of one batched suite, from `set(_ids [==[a;b;...]==])` in <suites>/<exe>_batches.cmake.
std::vector<std::string> batch_ids(const std::string& exe) {
  const std::string path = std::string(KVCONF_SUITES_BINARY_DIR) + "/" + exe + "_batches.cmake";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) {
    ADD_FAILURE() << path << " is missing: run this test through ctest, which lists the suites' kernels first";
    return {};
  }
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  const auto lo = text.find("[==["), hi = text.find("]==]");
  if (lo == std::string::npos || hi == std::string::npos || hi < lo) {
    ADD_FAILURE() << path << ": expected set(_ids [==[...]==]), read: " << text;
    return {};
  }
  std::vector<std::string> ids;
  std::string cur;
  for (char ch : text.substr(lo + 4, hi - lo - 4)) {
    if (ch == ';') {
      ids.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) ids.push_back(cur);
  return ids;
}

TEST(TorchRegistry, EveryKernelHasItsCTestBatch) {
  for (const auto& [target, r] : {std::pair{std::string("torch"), torch_registry()},
                                  std::pair{std::string("torch_cuda"), torch_cuda_registry()}}) {
    const auto attn = ids_of(r.attention()), gemm = ids_of(r.gemm()), norm = ids_of(r.norm());
    EXPECT_EQ(batch_ids("conformance_" + target + "_attention_oracle_test"), attn) << target;
    EXPECT_EQ(batch_ids("conformance_" + target + "_attention_cache_test"), attn) << target;
    EXPECT_EQ(batch_ids("conformance_" + target + "_gemm_test"), gemm) << target;
    EXPECT_EQ(batch_ids("conformance_" + target + "_projection_test"), gemm) << target;
    EXPECT_EQ(batch_ids("conformance_" + target + "_norm_test"), norm) << target;
  }
  EXPECT_EQ(batch_ids("conformance_torch_propagation_test"), ids_of(torch_registry().attention()));
}

// Without a CUDA device, every torch.cuda kernel refuses every call with the reason (the TorchCuda suites skip).
TEST(TorchCudaRegistry, WithoutADeviceEveryKernelSaysWhy) {
  const auto why = torch_cuda_unavailable();
  if (!why) GTEST_SKIP() << "a CUDA device is present: the TorchCuda/ suites (label gpu) run the kernels";
  EXPECT_FALSE(why->empty());
  const Registry c = torch_cuda_registry();
  for (const auto& k : c.attention()) {
    const auto r = k.supports(call(1, 8, true));
    ASSERT_TRUE(r.has_value()) << k.info.name;
    EXPECT_EQ(*r, *why) << k.info.name;
  }
  for (const auto& k : c.gemm()) EXPECT_EQ(k.supports(GemmShape{1, 8, 8}).value_or(""), *why) << k.info.name;
  for (const auto& k : c.norm()) EXPECT_EQ(k.supports(NormShape{1, 8}).value_or(""), *why) << k.info.name;
  std::printf("torch.cuda kernels here: %s\n", why->c_str());
}

// The backend a call takes is what was forced, for decode (q_len = 1, no mask) and prefill (causal over a longer
// cache: an explicit bottom-right mask) alike; a softcap is refused (SDPA has none).
TEST(TorchSdpa, ForcedBackendIsTheOneTaken) {
  if (auto why = torch_unavailable()) GTEST_SKIP() << *why;
  const Registry r = torch_registry();
  for (const auto& k : r.attention()) {
    const bool flash = k.info.name.find("flash") != std::string::npos;
    for (const AttentionCall& c : {call(1, 40, true), call(8, 40, true), call(8, 8, true), call(8, 40, true, 8)}) {
      ASSERT_FALSE(k.supports(c).has_value()) << k.info.name << ": " << *k.supports(c);
      const std::string p = torch_sdpa_choice(k, c);
      EXPECT_NE(p.find(flash ? "sdpa:flash_attention" : "sdpa:math"), std::string::npos) << k.info.name << ": " << p;
    }
    AttentionCall sc = call(8, 40, true);
    sc.params.softcap = 50.0;
    ASSERT_TRUE(k.supports(sc).has_value());
    EXPECT_NE(k.supports(sc)->find("softcap"), std::string::npos);
  }
}

// Small integers: products and sums are exact in every format here, so the kernels must return them exactly
// (a conversion or layout bug — transposed weight, wrong head mapping — would not).
TEST(TorchLinear, ExactOnSmallIntegers) {
  if (auto why = torch_unavailable()) GTEST_SKIP() << *why;
  const Registry r = torch_registry();
  const GemmShape s{3, 5, 7};
  std::vector<float> x(s.m * s.k), w(s.n * s.k), expect(s.m * s.n, 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  for (std::size_t m = 0; m < s.m; ++m)
    for (std::size_t n = 0; n < s.n; ++n)
      for (std::size_t k = 0; k < s.k; ++k) expect[m * s.n + n] += x[m * s.k + k] * w[n * s.k + k];
  for (const auto& k : r.gemm()) {
    std::vector<float> y(s.m * s.n, -1.0f);
    k.run(s, x, w, y);
    EXPECT_EQ(y, expect) << k.info.name;
  }
}

// One key per query row: attention returns that key's value row exactly (weight 1); decode over a one-row cache,
// GQA heads mapped as h / (H / Hkv).
TEST(TorchSdpa, SingleKeyReturnsItsValueRow) {
  if (auto why = torch_unavailable()) GTEST_SKIP() << *why;
  const Registry r = torch_registry();
  AttentionCall c = call(1, 1, true);
  std::vector<float> q(1 * 4 * 32, 0.5f), k(2 * 2 * 32, 0.25f), v(2 * 2 * 32), out(1 * 4 * 32);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 9) - 4);
  c.capacity = 2;
  for (const auto& kern : r.attention()) {
    kern.run(c, q, k, v, out);
    for (std::size_t h = 0; h < 4; ++h)
      for (std::size_t j = 0; j < 32; ++j)
        EXPECT_EQ(out[h * 32 + j], v[(h / 2) * 32 + j]) << kern.info.name << " head " << h << " col " << j;
  }
}

// AnyOrder's bound covers every concrete order: no fixed order rounds a term more often than n (leaf + n − 1), and
// an unknown order cannot be replayed.
TEST(BlackBox, AnyOrderBoundDominatesEveryOrder) {
  const AccumSpec bf{Format::bf16, Format::fp32, Format::fp32, false};
  const AccumSpec f32{Format::fp32, Format::fp32, Format::fp32, false};
  for (const std::size_t n : {1u, 2u, 7u, 128u, 4096u, 11008u})
    for (const AccumSpec& s : {bf, f32}) {
      const double any = ref::dot_error_terms(s, AnyOrder{}, n).rel;
      for (const Order& o : std::vector<Order>{Sequential{}, Pairwise{}, Blocked{64}, Blocked{1024, true}, SplitK{4}})
        EXPECT_GE(any, ref::dot_error_terms(s, o, n).rel) << order_name(o) << " n=" << n;
    }
  const std::vector<double> x = {1.0, 2.0};
  EXPECT_THROW(dot(bf, AnyOrder{}, x, x), std::invalid_argument);
  EXPECT_EQ(order_name(AnyOrder{}), "any");
  EXPECT_EQ(order_name(AnyOrder{2}), "any_op2");
  // Operand pre-scaling costs roundings: more error than the plain unknown order.
  EXPECT_GT(ref::dot_error_terms(bf, AnyOrder{2}, 128).rel, ref::dot_error_terms(bf, AnyOrder{}, 128).rel);
}

}  // namespace
}  // namespace kvconf::kernels
