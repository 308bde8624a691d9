// Unit tests of choose_shard (protocol/slurm_shard.hpp): --shard wins, the Slurm array variables give I/N (MIN and
// STEP respected), and malformed or inconsistent variables are BadInput naming the variable and the expected form.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "bad_input_message.hpp"
#include "kvconf/protocol/slurm_shard.hpp"

namespace kvconf::protocol {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
  return [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

TEST(SlurmShard, NoArrayAndNoFlagIsTheWholeRun) {
  const Env env = {{"SLURM_JOB_ID", "77"}};  // a plain (non-array) Slurm job
  const ShardChoice c = choose_shard("0/1", false, lookup(env));
  EXPECT_EQ(c.shard.str(), "0/1");
  EXPECT_EQ(c.source, "");
}

TEST(SlurmShard, ArrayTaskGivesTheShard) {
  const Env env = {{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"}};
  const ShardChoice c = choose_shard("0/1", false, lookup(env));
  EXPECT_EQ(c.shard.str(), "2/3");
  EXPECT_EQ(c.source, "SLURM_ARRAY_TASK_ID=2 of SLURM_ARRAY_TASK_COUNT=3");
}

TEST(SlurmShard, ArraysNotStartingAtZeroOrWithAStepNumberTheirTasksFromZero) {
  // --array=5-8: ids 5..8 are shards 0..3, each once.
  std::set<std::size_t> seen;
  for (int id = 5; id <= 8; ++id) {
    const Env env = {{"SLURM_ARRAY_TASK_ID", std::to_string(id)},
                     {"SLURM_ARRAY_TASK_COUNT", "4"},
                     {"SLURM_ARRAY_TASK_MIN", "5"},
                     {"SLURM_ARRAY_TASK_MAX", "8"}};
    const ShardChoice c = choose_shard("0/1", false, lookup(env));
    EXPECT_EQ(c.shard.count, 4u);
    EXPECT_TRUE(seen.insert(c.shard.index).second) << id;
    EXPECT_NE(c.source.find("SLURM_ARRAY_TASK_MIN=5"), std::string::npos) << c.source;
  }
  EXPECT_EQ(seen, (std::set<std::size_t>{0, 1, 2, 3}));
  // --array=10-16:3: ids 10, 13, 16 are shards 0, 1, 2.
  const Env step = {{"SLURM_ARRAY_TASK_ID", "16"},
                    {"SLURM_ARRAY_TASK_COUNT", "3"},
                    {"SLURM_ARRAY_TASK_MIN", "10"},
                    {"SLURM_ARRAY_TASK_STEP", "3"}};
  EXPECT_EQ(choose_shard("0/1", false, lookup(step)).shard.str(), "2/3");
}

TEST(SlurmShard, ExplicitShardWins) {
  const Env env = {{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "3"}};
  const ShardChoice c = choose_shard("1/4", true, lookup(env));
  EXPECT_EQ(c.shard.str(), "1/4");
  EXPECT_EQ(c.source, "--shard");
  // ... even when the Slurm variables are malformed: they are not read at all.
  const Env bad = {{"SLURM_ARRAY_TASK_ID", "x"}};
  EXPECT_EQ(choose_shard("0/2", true, lookup(bad)).shard.str(), "0/2");
  EXPECT_NE(bad_input([&] { choose_shard("3/2", true, lookup(env)); }).find("--shard '3/2'"), std::string::npos);
}

TEST(SlurmShard, MalformedVariablesAreBadInputNamingThem) {
  struct Case {
    Env env;
    std::string expect;  // substring of the message
  };
  const std::vector<Case> cases = {
      {{{"SLURM_ARRAY_TASK_ID", "1"}}, "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not"},
      {{{"SLURM_ARRAY_TASK_COUNT", "4"}}, "SLURM_ARRAY_TASK_COUNT is set but SLURM_ARRAY_TASK_ID is not"},
      {{{"SLURM_ARRAY_TASK_ID", "one"}, {"SLURM_ARRAY_TASK_COUNT", "4"}},
       "SLURM_ARRAY_TASK_ID='one': expected a non-negative decimal integer"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "-4"}},
       "SLURM_ARRAY_TASK_COUNT='-4': expected a non-negative decimal integer"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", ""}}, "SLURM_ARRAY_TASK_COUNT='':"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "2x"}},
       "SLURM_ARRAY_TASK_MIN='2x'"},
      {{{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "0"}},
       "SLURM_ARRAY_TASK_COUNT=0: expected at least 1"},
      {{{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}},
       "SLURM_ARRAY_TASK_ID=4 of SLURM_ARRAY_TASK_COUNT=4: expected"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "3"}},
       "SLURM_ARRAY_TASK_ID=1 - SLURM_ARRAY_TASK_MIN=3"},
      {{{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_STEP", "2"}},
       "/ SLURM_ARRAY_TASK_STEP=2 of SLURM_ARRAY_TASK_COUNT=4: expected"},
      {{{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_STEP", "0"}},
       "SLURM_ARRAY_TASK_STEP=0"},
  };
  for (const Case& c : cases) {
    const std::string m = bad_input([&] { choose_shard("0/1", false, lookup(c.env)); });
    EXPECT_NE(m.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: '" << m << "'";
    EXPECT_NE(m.find("--shard I/N"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kvconf::protocol
