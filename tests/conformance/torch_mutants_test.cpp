// The torch part of the mutant catalogue (kernels/torch): real PyTorch SDPA called the way a buggy engine calls it.
// Each planted bug fails at least one rule its entry names; the same kernel called correctly (the fp16 flash kernel
// torch.attn.sdpa_flash.f16, the mutants' base) passes every rule over 20 seeds on the same battery.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/torch.hpp"

namespace kvconf::conformance {
namespace {

const kernels::Registry& torch_mutant_registry() {
  static const kernels::Registry r = [] {
    kernels::Registry reg;
    kernels::register_torch_kernels(reg);
    kernels::register_torch_mutant_kernels(reg);
    return reg;
  }();
  return r;
}

AttentionCase attn_case(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t heads, std::size_t kv_heads,
                        bool causal, std::int64_t window) {
  AttentionCase c;
  c.call.shape = {n_q, n_kv, heads, kv_heads, d, d};
  c.call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.call.params.causal = causal;
  c.call.params.window = window;
  c.call.params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  return c;
}

// GQA prefill over a longer cache, a window, non-causal, and decode (n_q = 1) calls, MHA and GQA.
std::vector<AttentionCase> battery() {
  return {attn_case(8, 40, 32, 4, 2, true, 0), attn_case(8, 40, 32, 2, 1, true, 8),
          attn_case(6, 24, 16, 2, 2, false, 0), attn_case(1, 40, 32, 4, 2, true, 0),
          attn_case(1, 64, 64, 4, 4, true, 0)};
}

CheckResults run_all(const kernels::AttentionKernel& k, const AttentionCase& c, int i) {
  const std::string id = c.id();
  const auto s = [&](const char* rule) { return seed_for(std::string("torch_mutants/") + rule, id) + i; };
  CheckResults out;
  for (auto rs : {check_attention_matches_oracle(k, c, s("oracle")), check_attention_cache_on_off(k, c, s("on_off")),
                  check_attention_unused_slots(k, c, s("unused"))})
    out.insert(out.end(), rs.begin(), rs.end());
  return out;
}

TEST(TorchMutantCatalogue, EveryEntryRegisteredAsMutant) {
  if (auto why = kernels::torch_unavailable()) GTEST_SKIP() << *why;
  const auto cat = kernels::torch_mutant_catalogue();
  ASSERT_EQ(cat.size(), 3u);
  for (const auto& m : cat) {
    const auto* k = torch_mutant_registry().find_attention(m.name);
    ASSERT_NE(k, nullptr) << m.name;
    EXPECT_EQ(k->info.backend, "mutant") << m.name;
    EXPECT_FALSE(m.caught_by.empty()) << m.name;
  }
  for (const auto& n : kernels::torch_registry().names()) EXPECT_EQ(n.find("mutant"), std::string::npos) << n;
}

class TorchMutantCaught : public ::testing::TestWithParam<kernels::MutantInfo> {};

TEST_P(TorchMutantCaught, ByARuleItNames) {
  if (auto why = kernels::torch_unavailable()) GTEST_SKIP() << *why;
  const kernels::MutantInfo& m = GetParam();
  const auto* k = torch_mutant_registry().find_attention(m.name);
  ASSERT_NE(k, nullptr);
  const std::set<std::string> named(m.caught_by.begin(), m.caught_by.end());
  std::string caught;
  for (const AttentionCase& c : battery()) {
    if (k->supports(c.call)) continue;
    for (const CheckResult& r : run_all(*k, c, 0))
      if (!r.pass && named.count(r.rule)) caught += r.rule + " on " + c.id() + ": " + r.detail.substr(0, 160) + "\n";
  }
  EXPECT_FALSE(caught.empty()) << m.name << " (" << m.bug << ") passed every rule it names";
  std::printf("%s caught:\n%s", m.name.c_str(), caught.c_str());
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchMutantCaught, ::testing::ValuesIn(kernels::torch_mutant_catalogue()),
                         [](const auto& test_info) {
                           std::string s = test_info.param.name;
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

// The base every torch mutant is built from passes the same battery for 20 seeds.
TEST(TorchMutantBase, CorrectCallPassesTwentySeeds) {
  if (auto why = kernels::torch_unavailable()) GTEST_SKIP() << *why;
  const auto* k = torch_mutant_registry().find_attention("torch.attn.sdpa_flash.f16");
  ASSERT_NE(k, nullptr);
  std::size_t checked = 0;
  for (const AttentionCase& c : battery()) {
    ASSERT_FALSE(k->supports(c.call).has_value()) << c.id();
    for (int i = 0; i < 20; ++i)
      for (const CheckResult& r : run_all(*k, c, i)) {
        ++checked;
        EXPECT_TRUE(r.pass) << c.id() << " seed " << i << ": " << describe({r});
      }
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace
}  // namespace kvconf::conformance
