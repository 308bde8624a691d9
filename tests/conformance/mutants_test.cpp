// Rule 5 of DESIGN.md ("the suite catches bugs"), tested: every planted-bug kernel of the mutant catalogue
// (kernels/mutants) fails at least one of the conformance rules its catalogue entry names, and each correct base
// the mutants are built from passes every applicable rule over 20 seeds. Each catch is printed with its case,
// error and bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/mutants.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/accumulate.hpp"

namespace kvconf::conformance {
namespace {

using kernels::AttentionKernel;
using kernels::GemmKernel;

const kernels::Registry& mutant_registry() {
  static const kernels::Registry r = [] {
    kernels::Registry reg;
    kernels::register_mutant_kernels(reg);
    return reg;
  }();
  return r;
}

constexpr int kSeeds = 20;
constexpr std::array<std::size_t, 2> kChunks = {1, 4};

// A full-prefill attention case: n_q query rows ending at key n_kv (q_offset = n_kv − n_q).
AttentionCase attn_case(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t heads, std::size_t kv_heads,
                        bool causal, std::int64_t window, double softcap, double scale) {
  AttentionCase c;
  c.call.shape = {n_q, n_kv, heads, kv_heads, d, d};
  c.call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.call.params.causal = causal;
  c.call.params.window = window;
  c.call.params.softcap = softcap;
  c.call.params.scale = scale;
  c.data = Data::normal;
  return c;
}

// 1/√d as the float a kernel multiplies by.
double inv_sqrt(std::size_t d) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))); }

// The attention cases every attention kernel here runs: GQA, a window shorter than the cache, a binding softcap
// (c = 4 with logits ~ N(0, 1)), large logits (scale 1 with d = 64: sd 8, far past fp16's exp overflow at 11.09),
// non-causal, and a decode case (n_q = 1).
std::vector<AttentionCase> attention_battery() {
  return {
      attn_case(8, 40, 32, 4, 2, true, 0, 0.0, inv_sqrt(32)), attn_case(8, 40, 32, 2, 1, true, 8, 0.0, inv_sqrt(32)),
      attn_case(8, 40, 32, 2, 2, true, 0, 4.0, inv_sqrt(32)), attn_case(8, 40, 64, 2, 2, true, 0, 0.0, 1.0),
      attn_case(6, 24, 16, 2, 2, false, 0, 0.0, 0.25),        attn_case(1, 40, 32, 4, 2, true, 0, 0.0, inv_sqrt(32)),
  };
}

// Decode (m = 1) and prefill GEMMs, zero-mean and same-sign data (fp16 accumulation shows on the latter), and one
// projection sequence (prompt prefill M = 4, decode steps, recompute M = 8).
std::vector<GemmCase> gemm_battery() {
  return {gemm_case(1, 32, 256, Data::normal), gemm_case(4, 32, 512, Data::same_sign),
          gemm_case(1, 16, 1024, Data::same_sign)};
}
std::vector<ProjectionCase> projection_battery() {
  ProjectionCase p;
  p.prompt = 4;
  p.total = 8;
  p.n = 32;
  p.k = 256;
  p.data = Data::normal;
  return {p};
}

// One check result with the case it ran on.
struct Outcome {
  std::string case_id;
  CheckResult r;
};

void add(std::vector<Outcome>& out, const std::string& id, const CheckResults& rs) {
  for (const CheckResult& r : rs) out.push_back({id, r});
}

// Seed i of a (rule, case) pair of this test.
std::uint64_t seed(const std::string& rule, const std::string& id, int i) {
  return seed_for("mutants/" + rule, id) + static_cast<std::uint64_t>(i);
}

std::vector<Outcome> run_battery(const AttentionKernel& k, int i) {
  std::vector<Outcome> out;
  for (const AttentionCase& c : attention_battery()) {
    const std::string id = c.id();
    add(out, id, check_attention_matches_oracle(k, c, seed("oracle", id, i)));
    add(out, id, check_attention_cache_on_off(k, c, seed("on_off", id, i)));
    add(out, id, check_attention_chunked(k, c, kChunks, seed("chunked", id, i)));
    add(out, id, check_attention_unused_slots(k, c, seed("unused_slots", id, i)));
    add(out, id, check_attention_capacity(k, c, seed("capacity", id, i)));
  }
  return out;
}

std::vector<Outcome> run_battery(const GemmKernel& k, int i) {
  std::vector<Outcome> out;
  for (const GemmCase& c : gemm_battery()) add(out, c.id(), check_gemm_matches_oracle(k, c, seed("gemm", c.id(), i)));
  for (const ProjectionCase& c : projection_battery())
    add(out, c.id(), check_projection_cache_on_off(k, c, seed("projection", c.id(), i)));
  return out;
}

std::vector<Outcome> run_battery(const std::string& name, const std::string& kind, int i) {
  const kernels::Registry& reg = mutant_registry();
  if (kind == "gemm") {
    const GemmKernel* k = reg.find_gemm(name);
    EXPECT_NE(k, nullptr) << name << " is not registered";
    return k ? run_battery(*k, i) : std::vector<Outcome>{};
  }
  const AttentionKernel* k = reg.find_attention(name);
  EXPECT_NE(k, nullptr) << name << " is not registered";
  return k ? run_battery(*k, i) : std::vector<Outcome>{};
}

std::string line(const Outcome& o) {
  char buf[96];
  std::snprintf(buf, sizeof buf, " error=%.6g bound=%.6g", o.r.error, o.r.bound);
  return o.r.rule + (o.r.pass ? " pass" : " FAIL") + " on " + o.case_id + buf + " seed=" + std::to_string(o.r.seed);
}

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// ---------------------------------------------------------------------------------------------------------------

const std::set<std::string>& known_rules() {
  static const std::set<std::string> r = {"oracle_bound",   "two_sided",        "on_off_bound",
                                          "on_off_bitwise", "chunked_bound",    "chunked_bitwise",
                                          "unused_slots",   "capacity_bitwise", "capacity_bound"};
  return r;
}

TEST(MutantCatalogue, EveryEntryRegisteredAndDescribed) {
  const auto cat = kernels::mutant_catalogue();
  ASSERT_GE(cat.size(), 12u);
  std::set<std::string> names;
  for (const auto& m : cat) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate catalogue entry " << m.name;
    EXPECT_EQ(m.name.rfind("mutant.", 0), 0u) << m.name;
    EXPECT_FALSE(m.bug.empty()) << m.name;
    EXPECT_FALSE(m.caught_by.empty()) << m.name;
    for (const auto& rule : m.caught_by) EXPECT_TRUE(known_rules().count(rule)) << m.name << ": unknown rule " << rule;
    const kernels::KernelInfo* info = nullptr;
    if (m.kind == "gemm") {
      if (const auto* k = mutant_registry().find_gemm(m.name)) info = &k->info;
    } else if (m.kind == "attention") {
      if (const auto* k = mutant_registry().find_attention(m.name)) info = &k->info;
    }
    ASSERT_NE(info, nullptr) << m.name << " (" << m.kind << ") not registered";
    EXPECT_EQ(info->backend, "mutant") << m.name;
  }
  for (const auto& b : kernels::mutant_base_names()) {
    EXPECT_EQ(names.count(b), 0u) << "a correct base is listed as a bug: " << b;
    const bool found = mutant_registry().find_gemm(b) || mutant_registry().find_attention(b);
    EXPECT_TRUE(found) << b << " not registered";
  }
}

TEST(MutantCatalogue, NotInTheDefaultRegistry) {
  const kernels::Registry cpu = kernels::cpu_registry();
  for (const auto& n : cpu.names()) EXPECT_NE(n.rfind("mutant.", 0), 0u) << n;
  for (const auto& k : cpu.gemm()) EXPECT_NE(k.info.backend, "mutant") << k.info.name;
  for (const auto& k : cpu.attention()) EXPECT_NE(k.info.backend, "mutant") << k.info.name;
}

// The GEMM base is what its path() says, bit for bit: numerics::dot with that spec and order.
TEST(MutantBases, GemmBaseMatchesItsReportedPath) {
  const GemmKernel* k = mutant_registry().find_gemm("mutant.base.gemm.seq32");
  ASSERT_NE(k, nullptr);
  for (const kernels::GemmShape s : {kernels::GemmShape{1, 8, 300}, kernels::GemmShape{5, 4, 77}}) {
    const auto x = make_values(s.m * s.k, Format::fp16, Data::normal, 11);
    const auto w = make_values(s.n * s.k, Format::fp16, Data::normal, 12);
    std::vector<float> y(s.m * s.n);
    k->run(s, x, w, y);
    const kernels::GemmPath p = k->path(s);
    for (std::size_t r = 0; r < s.m; ++r)
      for (std::size_t o = 0; o < s.n; ++o) {
        std::vector<double> xr(x.begin() + static_cast<std::ptrdiff_t>(r * s.k),
                               x.begin() + static_cast<std::ptrdiff_t>((r + 1) * s.k));
        std::vector<double> wr(w.begin() + static_cast<std::ptrdiff_t>(o * s.k),
                               w.begin() + static_cast<std::ptrdiff_t>((o + 1) * s.k));
        EXPECT_EQ(static_cast<double>(y[r * s.n + o]), dot(p.spec, p.order, xr, wr)) << "row " << r << " col " << o;
      }
  }
}

// ---------------------------------------------------------------------------------------------------------------

kernels::MutantInfo catalogue_entry(const std::string& name) {
  for (const auto& m : kernels::mutant_catalogue())
    if (m.name == name) return m;
  ADD_FAILURE() << name << " not in the catalogue";
  return {};
}

std::vector<std::string> catalogue_names() {
  std::vector<std::string> v;
  for (const auto& m : kernels::mutant_catalogue()) v.push_back(m.name);
  return v;
}

class MutantIsCaught : public ::testing::TestWithParam<std::string> {};

TEST_P(MutantIsCaught, ByANamedRule) {
  const kernels::MutantInfo m = catalogue_entry(GetParam());
  const auto outcomes = run_battery(m.name, m.kind, 0);
  ASSERT_FALSE(outcomes.empty());
  std::vector<const Outcome*> caught, other;
  for (const Outcome& o : outcomes) {
    if (o.r.pass) continue;
    const bool named = std::find(m.caught_by.begin(), m.caught_by.end(), o.r.rule) != m.caught_by.end();
    (named ? caught : other).push_back(&o);
  }
  std::printf("[ mutant   ] %s: %s\n", m.name.c_str(), m.bug.c_str());
  for (const Outcome* o : caught) std::printf("[  caught  ]   %s\n", line(*o).c_str());
  for (const Outcome* o : other) std::printf("[  also    ]   %s\n", line(*o).c_str());
  std::string rules;
  for (const Outcome* o : caught)
    if (rules.find(o->r.rule) == std::string::npos) rules += (rules.empty() ? "" : ",") + o->r.rule;
  ::testing::Test::RecordProperty("caught_by", rules);
  if (!caught.empty()) {
    ::testing::Test::RecordProperty("first_catch", line(*caught.front()));
  }
  std::string expected;
  for (const auto& r : m.caught_by) expected += r + " ";
  EXPECT_FALSE(caught.empty()) << m.name << " (" << m.bug << ") passed every rule it should fail: " << expected << "("
                               << other.size() << " other rules failed)";
}

INSTANTIATE_TEST_SUITE_P(Mutant, MutantIsCaught, ::testing::ValuesIn(catalogue_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return sanitize(i.param); });

class MutantBasePasses : public ::testing::TestWithParam<std::string> {};

// The bases pass every rule on every case of the battery for 20 seeds (no flakiness), so the catches above are
// the planted bugs and nothing else.
TEST_P(MutantBasePasses, EveryRuleOver20Seeds) {
  const std::string& name = GetParam();
  const std::string kind = mutant_registry().find_gemm(name) ? "gemm" : "attention";
  std::size_t checked = 0;
  std::vector<Outcome> worst;  // per rule: least headroom over seeds and cases
  std::string failures;
  for (int i = 0; i < kSeeds; ++i) {
    for (const Outcome& o : run_battery(name, kind, i)) {
      ++checked;
      if (!o.r.pass) failures += "  " + line(o) + " " + o.r.detail + "\n";
      auto it = std::find_if(worst.begin(), worst.end(), [&](const Outcome& w) { return w.r.rule == o.r.rule; });
      if (it == worst.end())
        worst.push_back(o);
      else if (!(o.r.headroom >= it->r.headroom))
        *it = o;
    }
  }
  for (const Outcome& w : worst) {
    std::printf("[  worst   ] %s: %s headroom=%.4g\n", name.c_str(), line(w).c_str(), w.r.headroom);
    ::testing::Test::RecordProperty(w.r.rule + ".min_headroom", std::to_string(w.r.headroom));
  }
  EXPECT_GT(checked, 0u);
  EXPECT_TRUE(failures.empty()) << name << " failed some rules over " << kSeeds << " seeds:\n" << failures;
}

INSTANTIATE_TEST_SUITE_P(Base, MutantBasePasses, ::testing::ValuesIn(kernels::mutant_base_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return sanitize(i.param); });

}  // namespace
}  // namespace kvconf::conformance

namespace kvconf::conformance {
namespace {

// Batch invariance (GemmConformance.BatchInvariant): the mutant whose M = 1 path splits K while it claims invariance
// changes a row's bits between an 8-row call and the row alone, and batch_bitwise says so; its base (one sequential
// order for every M) passes batch_bitwise when it makes the same claim, and batch_bound when it does not.
TEST(MutantBatchInvariance, M1SplitKClaimingInvarianceIsCaught) {
  const GemmCase c = gemm_case(8, 64, 4096, Data::normal);
  const GemmKernel* bad = mutant_registry().find_gemm("mutant.gemm.m1_splitk_claims_invariant");
  ASSERT_NE(bad, nullptr);
  const CheckResults r = check_gemm_batch_invariance(*bad, c, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].rule, "batch_bitwise");
  EXPECT_FALSE(r[0].pass) << describe(r);
  GemmKernel base = *mutant_registry().find_gemm("mutant.base.gemm.seq32");
  EXPECT_TRUE(all_pass(check_gemm_batch_invariance(base, c, 1))) << base.info.name;
  base.info.cache_invariant = true;  // the same order for every M: the claim holds bit for bit
  const CheckResults ok = check_gemm_batch_invariance(base, c, 1);
  EXPECT_EQ(ok[0].rule, "batch_bitwise");
  EXPECT_TRUE(all_pass(ok)) << describe(ok);
}

// Attention: FA2's split-KV decode (A2) splits by batch · heads tiles, so a sequence's row changes with the launch's
// batch; planted as a claim of invariance, check_attention_batch_invariance's batch_bitwise catches it, while the
// kernel as registered (no claim) passes batch_bound and A7 (fixed splits, claiming invariance) passes bitwise.
TEST(MutantBatchInvariance, SplitKvDecodeClaimingInvarianceIsCaught) {
  const AttentionCase c = attn_case(4, 2048, 64, 4, 4, true, 0, 0.0, inv_sqrt(64));
  const kernels::Registry cpu = kernels::cpu_registry();
  AttentionKernel a2 = *cpu.find_attention("cpu.attn.a2_splitkv.f16");
  const CheckResults honest = check_attention_batch_invariance(a2, c, 1);
  EXPECT_EQ(honest[0].rule, "batch_bound");
  EXPECT_TRUE(all_pass(honest)) << describe(honest);
  EXPECT_NE(honest[0].detail.find("batch 64: splitkv"), std::string::npos) << honest[0].detail;
  a2.info.cache_invariant = true;  // the planted claim
  const CheckResults r = check_attention_batch_invariance(a2, c, 1);
  EXPECT_EQ(r[0].rule, "batch_bitwise");
  EXPECT_FALSE(all_pass(r)) << "A2's split count does not depend on the batch here: " << describe(r);
  // A7 (fixed splits) launches one sequence per call with a plan that ignores the batch: nothing to check, said so.
  const AttentionKernel* a7 = cpu.find_attention("cpu.attn.a7_fixedsplit.f16");
  ASSERT_NE(a7, nullptr);
  const auto why = attention_batch_unchecked(*a7, c);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("does not read the batch size"), std::string::npos) << *why;
  EXPECT_FALSE(all_pass(check_attention_batch_invariance(*a7, c, 1)));  // called anyway: unsupported, not a pass
}

// A batched launch that pads each sequence's cache on the left to the longest (as HF pads for SDPA) and forgets to
// mask the padding: every shorter sequence attends over zero key rows too. With an honest batched entry (the same
// padding, masked, i.e. each sequence over its own rows) A1 (claiming invariance) passes batch_bitwise; the leak
// fails it. The batch check reaches it only because the kernel now has a batched entry (A1 alone has none: skipped).
TEST(MutantBatchInvariance, PaddedBatchLeakingPaddingIsCaught) {
  const AttentionCase c = attn_case(4, 96, 64, 4, 2, true, 0, 0.0, inv_sqrt(64));
  const kernels::Registry cpu = kernels::cpu_registry();
  const AttentionKernel* a1 = cpu.find_attention("cpu.attn.a1_flash2.f32");
  ASSERT_NE(a1, nullptr);
  ASSERT_TRUE(a1->info.cache_invariant);
  EXPECT_TRUE(attention_batch_unchecked(*a1, c).has_value());
  auto with_batch = [&](bool leak) {
    AttentionKernel k = *a1;
    k.run_batch = [base = *a1, leak](std::span<const kernels::AttentionSeq> seqs) {
      std::size_t longest = 0;
      for (const auto& x : seqs) longest = std::max(longest, x.call.shape.n_kv);
      for (const auto& x : seqs) {
        const auto& sh = x.call.shape;
        const std::size_t pad = leak ? longest - sh.n_kv : 0, krow = sh.n_kv_heads * sh.d,
                          vrow = sh.n_kv_heads * sh.d_v;
        std::vector<float> kc(pad * krow, 0.0f), vc(pad * vrow, 0.0f);  // (pad + n_kv, Hkv, d): zeros, then the rows
        kc.insert(kc.end(), x.k_cache.begin(), x.k_cache.begin() + static_cast<std::ptrdiff_t>(sh.n_kv * krow));
        vc.insert(vc.end(), x.v_cache.begin(), x.v_cache.begin() + static_cast<std::ptrdiff_t>(sh.n_kv * vrow));
        kernels::AttentionCall call = x.call;
        call.shape.n_kv += pad;
        call.params.q_offset += static_cast<std::int64_t>(pad);
        call.capacity = 0;
        base.run(call, x.q, kc, vc, x.out);
      }
    };
    return k;
  };
  const AttentionKernel honest = with_batch(false), leaky = with_batch(true);
  EXPECT_FALSE(attention_batch_unchecked(honest, c).has_value());
  // A batched launch the kernel declines (as SDPA's CUDA flash backend declines the padded batch's mask) is skipped
  // with its reason, not reported as a failure of the rule.
  AttentionKernel declining = honest;
  declining.supports_batch = [](std::span<const kernels::AttentionCall> calls) -> kernels::Reason {
    return "no mask for " + std::to_string(calls.size()) + " sequences";
  };
  EXPECT_EQ(attention_batch_unchecked(declining, c).value_or("checked"),
            "its batched launch of 4 sequences: no mask for 4 sequences");
  const CheckResults ok = check_attention_batch_invariance(honest, c, 1);
  EXPECT_EQ(ok[0].rule, "batch_bitwise");
  EXPECT_TRUE(all_pass(ok)) << describe(ok);
  const CheckResults r = check_attention_batch_invariance(leaky, c, 1);
  EXPECT_FALSE(all_pass(r)) << "zero padding attended over went unnoticed: " << describe(r);
}

}  // namespace
}  // namespace kvconf::conformance
