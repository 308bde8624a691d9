// The scenarios' one list (engine/scenarios.json) and its consumers agree: the engine's table (generated from the JSON
// at configure time, and the enum it checks at compile time), and the trace schema's scenario.name enum
// (docs/schemas/kvconf.trace-1.schema.json), the one copy that cannot read the JSON. The Python adapters and the trace
// reader read the JSON itself (adapters/hf/scenario_list.py). Also the schema's kv_format enum (kv_dtype's option) and
// the engine's cache formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvconf/engine/scenario.hpp"

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  return json::parse(in);
}

std::vector<std::string> names_of(const json& list) {
  std::vector<std::string> v;
  for (const json& x : list) v.push_back(x.is_string() ? x.get<std::string>() : x.at("name").get<std::string>());
  return v;
}

TEST(ScenarioList, EngineTableIsTheJson) {
  const json doc = read_json(KVCONF_SOURCE_DIR "/engine/scenarios.json");
  const json& rows = doc.at("scenarios");
  ASSERT_EQ(rows.size(), kvconf::engine::all_scenarios().size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const kvconf::engine::ScenarioInfo& info = kvconf::engine::scenario_info(kvconf::engine::all_scenarios()[i]);
    SCOPED_TRACE(rows[i].dump());
    EXPECT_EQ(rows[i].at("name"), info.name);
    EXPECT_EQ(rows[i].at("side_a"), info.side_a);
    EXPECT_EQ(rows[i].at("side_b"), info.side_b);
    EXPECT_EQ(rows[i].at("option"), info.option);
    EXPECT_EQ(rows[i].at("option_in_profile"), info.option_in_profile);
    EXPECT_EQ(rows[i].at("bitwise_before_event"), info.bitwise_before_event);
    EXPECT_EQ(rows[i].at("bitwise"), info.bitwise);
    EXPECT_EQ(rows[i].at("prefill_bitwise"), info.prefill_bitwise);
    EXPECT_EQ(kvconf::engine::parse_scenario(info.name), info.id);
  }
  EXPECT_EQ(kvconf::engine::parse_scenario("swap"), std::nullopt);
}

TEST(ScenarioList, TraceSchemaNamesTheSameScenarios) {
  const json scenarios = read_json(KVCONF_SOURCE_DIR "/engine/scenarios.json").at("scenarios");
  const json schema = read_json(KVCONF_SOURCE_DIR "/docs/schemas/kvconf.trace-1.schema.json");
  const json& scenario = schema.at("properties").at("scenario").at("properties");
  EXPECT_EQ(names_of(scenario.at("name").at("enum")), names_of(scenarios))
      << "docs/schemas/kvconf.trace-1.schema.json's scenario.name enum must list engine/scenarios.json's names";
  std::vector<std::string> sides;  // the scenario.side values: every side_a / side_b that is not a path
  for (const json& s : scenarios)
    for (const char* k : {"side_a", "side_b"}) {
      const std::string side = s.at(k);
      if (side != "cache_on" && side != "cache_off" && std::find(sides.begin(), sides.end(), side) == sides.end())
        sides.push_back(side);
    }
  EXPECT_EQ(names_of(scenario.at("side").at("enum")), sides);
}

// kv_dtype's kv_format: the schema's enum is the engine's (kv_format.hpp), which the trace reader accepts.
TEST(ScenarioList, TraceSchemaNamesTheEnginesKvFormats) {
  const json schema = read_json(KVCONF_SOURCE_DIR "/docs/schemas/kvconf.trace-1.schema.json");
  const std::vector<std::string> names =
      names_of(schema.at("properties").at("scenario").at("properties").at("kv_format").at("enum"));
  ASSERT_FALSE(names.empty());
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    EXPECT_TRUE(kvconf::engine::parse_kv_format(names[i])) << names[i];
  }
  EXPECT_EQ(text, kvconf::engine::kv_format_names_text());
}

}  // namespace
