// kvconf check's scenario_path on traces (protocol::check_trace_pair; docs/TRACES.md "The engine's report"): every
// side of every scenario may report its calls as [fed, cached, batch] (a serving engine runs the traced request beside
// others: vLLM's preempt runs both sides beside a competitor), fed and cached are still compared, and only the batch
// scenario's side A must hold more rows than it fed; preempt's side A recomputes the prompt and every token so far in
// step at_step's own call, so refill's calls (a prefill one token short, then a decode) fail it.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "kvconf/conformance/scenario_rules.hpp"
#include "kvconf/engine/scenario.hpp"
#include "kvconf/protocol/trace_check.hpp"

namespace kvconf::protocol {
namespace {

using engine::CallRecord;
using engine::Scenario;

constexpr std::size_t kPrompt = 10, kSteps = 8, kVocab = 5;

engine::ScenarioOptions options() {
  engine::ScenarioOptions so;
  so.chunk = 4;
  so.at_step = 3;
  so.shared = 5;
  so.batch_with = {{1, 2, 3}, {4}};  // the batch scenario's side A: two other requests in every call
  return so;
}

// For each step, the call whose logits chose its token: every call but the prompt's chunks before the last and
// refill's prefill before step at_step.
std::vector<std::size_t> steps_of(Scenario s, const std::vector<CallRecord>& calls, bool side_a) {
  std::vector<std::size_t> v;
  const std::size_t first = side_a && s == Scenario::chunked ? calls.size() - kSteps : 0;
  for (std::size_t t = 0; t < kSteps; ++t)
    v.push_back(first + t + (side_a && s == Scenario::refill && t >= options().at_step ? 1 : 0));
  return v;
}

// One side of scenario s with these calls (each leaving cached + fed rows), equal logits and tokens on both sides.
Trace side(Scenario s, bool side_a, const std::vector<CallRecord>& calls) {
  Trace t;
  t.file = std::string(engine::scenario_name(s)) + (side_a ? ".scenario" : ".reference");
  t.engine = "an-engine";
  t.engine_version = "1";
  t.attention = "any";
  t.model_name = "m";
  t.vocab = kVocab;
  t.dtype = "float16";
  t.logits_dtype = "F16";
  t.cache_on = side_a || s != Scenario::cache;
  t.side_a = side_a;
  t.prompt_id = "p0";
  for (std::size_t i = 0; i < kPrompt; ++i) t.prompt_ids.push_back(static_cast<int>(i % kVocab));
  for (std::size_t i = 0; i < kSteps; ++i) {
    t.generated_ids.push_back(1);
    t.logits.push_back({0.0f, 2.0f, 0.5f, -1.0f, 0.25f});
  }
  t.scenario = s;
  const engine::ScenarioOptions so = options();
  t.chunk = so.chunk;
  t.at_step = so.at_step;
  t.shared = so.shared;
  t.calls = calls;
  t.call_of_step = steps_of(s, calls, side_a);
  for (const CallRecord& c : calls) t.cache_after.push_back(s == Scenario::cache && !side_a ? 0 : c.cached + c.fed);
  t.calls_reported_by = "this test";
  return t;
}

conformance::ExpectedCalls expected(Scenario s) {
  return conformance::expected_calls(s, options(), kPrompt, options().shared, kSteps);
}

// Every call of a side given `extra` rows of other requests beside its own (the batch scenario's side A keeps its own
// batch counts).
std::vector<CallRecord> beside_others(std::vector<CallRecord> calls, std::size_t extra) {
  for (CallRecord& c : calls) c.batch = c.batch > c.fed ? c.batch + extra : c.fed + extra;
  return calls;
}

results::CheckResult path_of(const std::vector<CallRecord>& a, const std::vector<CallRecord>& b, Scenario s) {
  const results::RunPairRecord rec = check_trace_pair(TracePair{side(s, true, a), side(s, false, b)}, nullptr);
  for (const results::CheckResult& r : rec.rules)
    if (r.rule == "scenario_path") return r;
  ADD_FAILURE() << engine::scenario_name(s) << ": no scenario_path rule";
  return {};
}

TEST(TraceCheckPath, EverySideOfEveryScenarioMayRunBesideOtherRequests) {
  for (Scenario s : engine::all_scenarios()) {
    SCOPED_TRACE(engine::scenario_name(s));
    const conformance::ExpectedCalls want = expected(s);
    // Alone, as the scenario makes it.
    const results::CheckResult alone = path_of(want.a, want.b, s);
    EXPECT_TRUE(alone.pass) << alone.detail;
    // Both sides beside a competitor request (2 more rows in every call).
    const results::CheckResult beside = path_of(beside_others(want.a, 2), beside_others(want.b, 2), s);
    EXPECT_TRUE(beside.pass) << beside.detail;
    // fed and cached are still compared, beside the competitor: one call of side B feeding a token more, one of side A
    // attending over a cached row more.
    std::vector<CallRecord> b = beside_others(want.b, 2);
    b[2].fed += 1;
    const results::CheckResult wrong_b = path_of(beside_others(want.a, 2), b, s);
    EXPECT_FALSE(wrong_b.pass) << wrong_b.detail;
    EXPECT_NE(wrong_b.detail.find("(side B of " + std::string(engine::scenario_name(s)) + ") call 2"),
              std::string::npos)
        << wrong_b.detail;
    EXPECT_NE(wrong_b.detail.find("calls[2] fed"), std::string::npos) << wrong_b.detail;
    std::vector<CallRecord> a = beside_others(want.a, 2);
    a.back().cached += 1;
    const results::CheckResult wrong_a = path_of(a, beside_others(want.b, 2), s);
    EXPECT_FALSE(wrong_a.pass) << wrong_a.detail;
    EXPECT_NE(wrong_a.detail.find("calls[" + std::to_string(a.size() - 1) + "] cached"), std::string::npos)
        << wrong_a.detail;
  }
}

TEST(TraceCheckPath, OnlyTheBatchScenariosSideAMustBeABatch) {
  const conformance::ExpectedCalls want = expected(Scenario::batch);
  std::vector<CallRecord> alone = want.a;
  for (CallRecord& c : alone) c.batch = 0;
  const results::CheckResult r = path_of(alone, want.b, Scenario::batch);
  EXPECT_FALSE(r.pass) << r.detail;
  EXPECT_NE(r.detail.find("calls[0] batch"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("a batch"), std::string::npos) << r.detail;
}

// preempt's side A: step at_step's call is [n + at_step, 0], the token chosen from it; refill's calls ([n + at_step −
// 1, 0] before the step, then the newest token decoded) are another path, beside a competitor or not.
TEST(TraceCheckPath, PreemptIsOneRecomputeNotARefill) {
  const conformance::ExpectedCalls want = expected(Scenario::preempt);
  const std::size_t a = options().at_step;
  ASSERT_EQ(want.a.size(), kSteps);
  EXPECT_EQ(want.a[a].fed, kPrompt + a);
  EXPECT_EQ(want.a[a].cached, 0u);
  EXPECT_EQ(want.a[a + 1].fed, 1u);
  EXPECT_EQ(want.a[a + 1].cached, kPrompt + a);
  for (std::size_t i = 0; i < want.a.size(); ++i) {  // side B: the plain cache-ON run; side A but at step a too
    EXPECT_EQ(want.b[i].fed, i == 0 ? kPrompt : 1u) << i;
    EXPECT_EQ(want.b[i].cached, i == 0 ? 0u : kPrompt + i - 1) << i;
    if (i != a) {
      EXPECT_EQ(want.a[i].fed, want.b[i].fed) << i;
      EXPECT_EQ(want.a[i].cached, want.b[i].cached) << i;
    }
  }
  const std::vector<CallRecord> refill = expected(Scenario::refill).a;
  for (const std::size_t extra : {std::size_t{0}, std::size_t{3}}) {
    const results::CheckResult r = path_of(beside_others(refill, extra), beside_others(want.b, extra), Scenario::preempt);
    EXPECT_FALSE(r.pass) << r.detail;
    EXPECT_NE(r.detail.find("calls[3] fed " + std::to_string(kPrompt + a - 1) + " (expected " +
                            std::to_string(kPrompt + a) + ")"),
              std::string::npos)
        << r.detail;
    EXPECT_NE(r.detail.find("(step 3)"), std::string::npos) << r.detail;
  }
}

}  // namespace
}  // namespace kvconf::protocol
