// The protocol (kvconf/protocol/protocol.hpp) on the llama2-tiny fixture with tiny settings: the plan and its shards,
// records and rules per pair, resume after an interruption (and a torn last line) equal to an uninterrupted run without
// redoing finished pairs, the manifest check on --resume, and bad input before any pair runs.
#include "kvconf/protocol/protocol.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "bad_input_message.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/protocol_plan.hpp"
#include "temp_dir.hpp"

namespace kvconf::protocol {
namespace {

namespace fs = std::filesystem;

ProtocolOptions tiny(const fs::path& out) {
  ProtocolOptions o;
  o.model = "fixture:llama2-tiny";
  o.profiles = {"fp16-eager"};
  o.strategies = {"greedy", "topk"};
  o.n = 2;
  o.seeds = {0, 1};
  o.max_new_tokens = 4;
  o.out = out;
  o.fixtures_dir = KVCONF_FIXTURES_DIR;
  o.shared_dir = KVCONF_SHARED_DIR;
  return o;
}

bool have_fixture() { return fs::exists(fs::path(KVCONF_FIXTURES_DIR) / "models" / "llama2-tiny" / "config.json"); }
#define NEED_FIXTURE() \
  if (!have_fixture()) \
  GTEST_SKIP() << "llama2-tiny fixture missing under " << KVCONF_FIXTURES_DIR << " (build kvconf_fixture_files)"

// A record's JSON without its wall time (the one field that differs between identical runs).
nlohmann::json timeless(const results::RunPairRecord& r) {
  nlohmann::json j = results::to_json(r);
  j.erase("seconds");
  return j;
}

std::vector<nlohmann::json> timeless(const std::vector<results::RunPairRecord>& v) {
  std::vector<nlohmann::json> out;
  for (const auto& r : v) out.push_back(timeless(r));
  return out;
}

TEST(ProtocolPlan, ShardsPartitionThePlan) {
  const std::vector<std::string> profiles = {"fp16-eager", "fp32"}, strategies = {"greedy", "topk", "topp"};
  const std::vector<std::uint64_t> seeds = {0, 1, 2, 3, 4};
  const auto whole = plan_work(profiles, strategies, seeds, 7, Shard{});
  ASSERT_EQ(whole.size(), 2u * 3 * 5 * 7);
  for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(whole[i].index, i);
  // The fixed order: profile, strategy, seed, prompt (prompt fastest).
  EXPECT_EQ(whole[1].prompt, 1u);
  EXPECT_EQ(whole[7].seed, 1u);
  EXPECT_EQ(whole[35].strategy, "topk");
  EXPECT_EQ(whole[105].profile, "fp32");
  for (std::size_t N : {1u, 2u, 3u, 4u, 16u, 300u}) {
    std::multiset<std::size_t> seen;
    for (std::size_t I = 0; I < N; ++I)
      for (const WorkItem& w : plan_work(profiles, strategies, seeds, 7, Shard{I, N})) {
        EXPECT_EQ(w.index % N, I);
        const WorkItem& same = whole[w.index];
        EXPECT_EQ(w.profile + w.strategy, same.profile + same.strategy);
        EXPECT_EQ(w.seed, same.seed);
        EXPECT_EQ(w.prompt, same.prompt);
        seen.insert(w.index);
      }
    ASSERT_EQ(seen.size(), whole.size()) << N << " shards";
    for (std::size_t i = 0; i < whole.size(); ++i)
      EXPECT_EQ(seen.count(i), 1u) << "item " << i << ", " << N << " shards";
  }
}

TEST(ProtocolPlan, PairSeedDependsOnSeedAndPrompt) {
  EXPECT_EQ(pair_sampler_seed(3, "gsm8k:0001"), pair_sampler_seed(3, "gsm8k:0001"));
  EXPECT_NE(pair_sampler_seed(3, "gsm8k:0001"), pair_sampler_seed(4, "gsm8k:0001"));
  EXPECT_NE(pair_sampler_seed(3, "gsm8k:0001"), pair_sampler_seed(3, "gsm8k:0002"));
}

TEST(Protocol, RunsPairsWithRecordsAndRules) {
  NEED_FIXTURE();
  const fs::path out = test::temp_dir("kvconf_protocol");
  const ProtocolOptions o = tiny(out / "run");
  std::vector<std::size_t> dones;
  const ProtocolResult r = run_protocol(o, [&](const Progress& p) { dones.push_back(p.done); });
  ASSERT_EQ(r.records.size(), 8u);  // 2 strategies x 2 seeds x 2 prompts
  EXPECT_EQ(r.ran, 8u);
  EXPECT_EQ(dones, (std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  std::set<std::string> keys;
  for (const auto& rec : r.records) {
    keys.insert(rec.key());
    EXPECT_EQ(rec.free.tokens_on.size(), 4u);
    EXPECT_EQ(rec.free.kl.size(), 4u);
    EXPECT_EQ(rec.teacher.tokens_on, rec.free.tokens_on);  // teacher-forced on the cache-ON tokens: same choices
    EXPECT_EQ(rec.layer_drift_l2.size(), 3u);              // 2 layers + embeddings
    EXPECT_EQ(rec.layer_drift_l2[0], 0.0);                 // the embeddings are looked up, not computed
    EXPECT_FALSE(rec.rules.empty());
    EXPECT_EQ(rec.prompt_id.rfind("ids:", 0), 0u) << rec.prompt_id;
  }
  EXPECT_EQ(keys.size(), 8u);
  // The same (seed, prompt) gives the same draws in every strategy, and both paths of a pair share them; the two
  // seeds of a prompt under topk draw differently (with a random-weight model, different tokens are all but certain).
  const auto& a = r.records;
  EXPECT_EQ(a[0].prompt_id, a[2].prompt_id);
  EXPECT_NE(a[4].free.tokens_on, a[6].free.tokens_on);
  // What pairs.jsonl holds is what the result says.
  const auto lines = read_jsonl(o.out / "pairs.jsonl");
  ASSERT_EQ(lines.size(), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(timeless(results::run_pair_from_json(lines[i])), timeless(a[i]));
}

TEST(Protocol, FreeRunWithoutFlipIsTheTeacherForcedRun) {
  NEED_FIXTURE();
  // The shortcut (a pair without a flip takes its teacher-forced regime and layer drift from the free run) gives the
  // records a separate teacher-forced run gives.
  const fs::path out = test::temp_dir("kvconf_protocol");
  ProtocolOptions o = tiny(out / "shortcut");
  o.seeds = {0};
  const ProtocolResult a = run_protocol(o);
  o.out = out / "separate";
  o.reuse_free_as_teacher = false;
  const ProtocolResult b = run_protocol(o);
  ASSERT_EQ(a.records.size(), 4u);
  std::size_t without_flip = 0;
  for (const auto& r : a.records) without_flip += !r.free.flip.has_value();
  EXPECT_GT(without_flip, 0u);  // the shortcut was taken at least once
  EXPECT_EQ(timeless(a.records), timeless(b.records));
}

TEST(Protocol, ResumeAfterInterruptionEqualsUninterruptedRun) {
  NEED_FIXTURE();
  const fs::path out = test::temp_dir("kvconf_protocol");
  const ProtocolResult whole = run_protocol(tiny(out / "whole"));

  ProtocolOptions o = tiny(out / "cut");
  struct Killed {};
  EXPECT_THROW(run_protocol(o,
                            [](const Progress& p) {
                              if (p.done == 3) throw Killed{};
                            }),
               Killed);
  ASSERT_EQ(read_jsonl(o.out / "pairs.jsonl").size(), 3u);
  // The kill also tore the line of the fourth pair.
  {
    const std::string line = results::to_json(whole.records[3]).dump();
    std::ofstream(o.out / "pairs.jsonl", std::ios::app | std::ios::binary) << line.substr(0, line.size() / 2);
  }
  // Without --resume the existing results are protected.
  EXPECT_NE(bad_input([&] { run_protocol(o); }).find("--resume"), std::string::npos);
  o.resume = true;
  std::size_t first_done = 0;
  const ProtocolResult resumed = run_protocol(o, [&](const Progress& p) {
    if (!first_done) first_done = p.done;
  });
  EXPECT_EQ(resumed.resumed, 3u);
  EXPECT_EQ(resumed.ran, 5u);  // the three finished pairs are not redone
  EXPECT_EQ(first_done, 4u);
  EXPECT_EQ(timeless(resumed.records), timeless(whole.records));
  EXPECT_EQ(read_jsonl(o.out / "pairs.jsonl").size(), 8u);
  // Resuming a finished run runs nothing.
  const ProtocolResult again = run_protocol(o);
  EXPECT_EQ(again.ran, 0u);
  EXPECT_EQ(again.resumed, 8u);
  EXPECT_EQ(timeless(again.records), timeless(whole.records));
}

TEST(Protocol, ShardsTogetherEqualTheUnshardedRun) {
  NEED_FIXTURE();
  const fs::path out = test::temp_dir("kvconf_protocol");
  ProtocolOptions o = tiny(out / "whole");
  o.strategies = {"greedy"};
  const ProtocolResult whole = run_protocol(o);
  ASSERT_EQ(whole.records.size(), 4u);
  std::map<std::string, nlohmann::json> merged;
  for (std::size_t I = 0; I < 3; ++I) {
    ProtocolOptions s = o;
    s.out = out / ("shard" + std::to_string(I));
    s.shard = Shard{I, 3};
    for (const auto& rec : run_protocol(s).records) EXPECT_TRUE(merged.emplace(rec.key(), timeless(rec)).second);
  }
  ASSERT_EQ(merged.size(), whole.records.size());
  for (const auto& rec : whole.records) EXPECT_EQ(merged.at(rec.key()), timeless(rec)) << rec.key();
}

TEST(Protocol, ResumeWithOtherOptionsIsBadInput) {
  NEED_FIXTURE();
  const fs::path out = test::temp_dir("kvconf_protocol");
  ProtocolOptions o = tiny(out / "run");
  o.strategies = {"greedy"};
  o.seeds = {0};
  o.n = 1;
  run_protocol(o);
  o.resume = true;
  ProtocolOptions more = o;
  more.max_new_tokens = 5;
  EXPECT_NE(bad_input([&] { run_protocol(more); }).find("--max-new-tokens differs"), std::string::npos);
  more = o;
  more.seeds = {0, 1};
  const std::string msg = bad_input([&] { run_protocol(more); });
  EXPECT_NE(msg.find("--seeds differs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("there: [0], now: [0,1]"), std::string::npos) << msg;
  more = o;
  more.shard = Shard{0, 2};
  EXPECT_NE(bad_input([&] { run_protocol(more); }).find("--shard differs"), std::string::npos);
  // A refused run without --resume leaves the manifest of the run in OUT alone.
  more = o;
  more.resume = false;
  more.max_new_tokens = 5;
  EXPECT_NE(bad_input([&] { run_protocol(more); }).find("exists"), std::string::npos);
  EXPECT_EQ(run_protocol(o).ran, 0u);  // the same options still resume
}

TEST(Protocol, BadInputBeforeAnyPairRuns) {
  NEED_FIXTURE();
  const fs::path out = test::temp_dir("kvconf_protocol");
  struct Case {
    std::function<void(ProtocolOptions&)> edit;
    std::string expect;
  } cases[] = {
      {[](ProtocolOptions& o) { o.profiles = {"fp17-eager"}; }, "fp17-eager"},
      {[](ProtocolOptions& o) { o.strategies = {"beam"}; }, "beam"},
      {[](ProtocolOptions& o) { o.model = "fixture:gpt5-tiny"; }, "unknown fixture 'gpt5-tiny'"},
      {[](ProtocolOptions& o) { o.model = "/no/such/model"; }, "/no/such/model"},
      {[](ProtocolOptions& o) { o.n = 0; }, "--n must be >= 1"},
      {[](ProtocolOptions& o) { o.n = 100000; }, "--n 100000 is larger than the 64 prompts"},
      {[](ProtocolOptions& o) { o.seeds = {}; }, "--seeds"},
      {[](ProtocolOptions& o) { o.max_new_tokens = 0; }, "--max-new-tokens"},
      {[](ProtocolOptions& o) { o.max_new_tokens = 5000; }, "max_position_embeddings 4096"},
      {[](ProtocolOptions& o) { o.prompts = "csv:x"; }, "expected gsm8k:FILE"},
      {[](ProtocolOptions& o) { o.prompts = "ids:/no/such.json"; }, "/no/such.json"},
      {[](ProtocolOptions& o) { o.tokenizer = "/no/tokenizer.model"; }, "/no/tokenizer.model"},
      {[&](ProtocolOptions& o) {
         std::ofstream(out / "blocker") << "a file";
         o.out = out / "blocker" / "x";
       },
       "cannot create"},
  };
  for (const Case& c : cases) {
    ProtocolOptions o = tiny(out / "bad");
    c.edit(o);
    std::size_t ran = 0;
    const std::string msg = bad_input([&] { run_protocol(o, [&](const Progress&) { ++ran; }); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << msg;
    EXPECT_EQ(ran, 0u) << c.expect;
  }
  // n larger than the prompts is taken as all of them when asked (the CLI without --n).
  ProtocolOptions o = tiny(out / "clamp");
  o.n = 100000;
  o.clamp_n = true;
  o.max_new_tokens = 1;
  o.strategies = {"greedy"};
  o.seeds = {0};
  EXPECT_EQ(run_protocol(o).records.size(), 64u);
}

TEST(Protocol, Gsm8kPromptsNeedAMatchingTokenizer) {
  const fs::path shared = KVCONF_SHARED_DIR;
  const fs::path gsm8k = shared / "data" / "gsm8k" / "test.jsonl";
  const fs::path stories = shared / "models" / "stories260K" / "stories260K.bin";
  if (!fs::exists(gsm8k) || !fs::exists(stories) || !fs::exists(shared / "tokenizers" / "llama2" / "tokenizer.model"))
    GTEST_SKIP() << "the shared GSM8K data, stories260K or the LLaMA-2 tokenizer is missing under " << shared;
  const fs::path out = test::temp_dir("kvconf_protocol");
  ProtocolOptions o = tiny(out / "stories");
  o.model = "fixture:stories260K";
  o.prompts = "gsm8k:" + gsm8k.string();
  const std::string msg = bad_input([&] { run_protocol(o); });
  EXPECT_NE(msg.find("32000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
  // Its own id prompts work (no tokenizer, no answers).
  o.prompts.clear();
  o.strategies = {"greedy"};
  o.seeds = {0};
  o.n = 1;
  const ProtocolResult r = run_protocol(o);
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_FALSE(r.records[0].answer_on.has_value());
  // GSM8K few-shot prompts on llama2-tiny: gold answers and ids named by line.
  ProtocolOptions g = tiny(out / "gsm8k");
  g.prompts = "gsm8k:" + gsm8k.string();
  g.strategies = {"greedy"};
  g.seeds = {0};
  g.shots = 1;
  const ProtocolResult rg = run_protocol(g);
  ASSERT_EQ(rg.records.size(), 2u);
  for (const auto& rec : rg.records) {
    EXPECT_EQ(rec.prompt_id.rfind("gsm8k:", 0), 0u);
    ASSERT_TRUE(rec.gold.has_value());
    EXPECT_GT(rec.prompt_tokens, 60u);  // one exemplar and the question
    EXPECT_EQ(rec.correct_on, rec.answer_on == rec.gold);
  }
}

}  // namespace
}  // namespace kvconf::protocol
