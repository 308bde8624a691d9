// Cpu/EngineConformance.MatchesOracle/<fixture>__<profile>: one decoder layer (attention + MLP) of each fixture
// architecture, stage by stage against the MPFR oracle evaluated on the engine's own inputs to each stage, within each
// stage's a-priori bound (docs/TOLERANCES.md "EngineMatchesOracle"). Both call kinds are checked: the cache-OFF
// recompute of the sequence (prefill-shaped kernels) and the cache-ON decode of its last token (M = 1 kernels).
// Llama-2 and Mistral: layer 0; Gemma-2: layers 0 (sliding window) and 1 (global).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kvconf/analysis/prompts.hpp"
#include "kvconf/conformance/engine_checks.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "suite_support.hpp"

namespace kvconf::conformance::suite {
namespace {

namespace fs = std::filesystem;

// The first GSM8K prompt truncated to 24 tokens (BOS included), then its 25th token decoded. A model with a sliding
// window gets window + 8 prompt tokens instead, so that the last rows of the recompute and the decode row attend over
// a truncated window (gemma2-tiny: window 32, 40 tokens).
constexpr std::size_t kPromptTokens = 24;
std::size_t prompt_tokens(const engine::ModelConfig& c) {
  bool windowed = false;
  for (std::size_t l = 0; l < c.n_layers; ++l) windowed = windowed || c.layer_is_sliding(l);
  return windowed && c.sliding_window > 0 ? std::max(kPromptTokens, c.sliding_window + 8) : kPromptTokens;
}

struct EngineCase {
  std::string fixture;              // folder under KVCONF_FIXTURES_DIR/models
  std::string profile;              // engine profile
  std::vector<std::size_t> layers;  // layers checked
  std::string id() const { return sanitize(fixture) + "__" + sanitize(profile); }
};

void PrintTo(const EngineCase& c, std::ostream* os) { *os << c.fixture << " under " << c.profile; }

std::vector<EngineCase> engine_cases() {
  const std::vector<std::pair<std::string, std::vector<std::size_t>>> fixtures = {
      {"llama2-tiny", {0}}, {"mistral-tiny", {0}}, {"gemma2-tiny", {0, 1}}};
  std::vector<EngineCase> v;
  for (const auto& [f, layers] : fixtures)
    for (const char* p : {"fp32", "fp16-eager", "fp16-flash2"}) v.push_back({f, p, layers});
  return v;
}

bool ci() {
  const char* e = std::getenv("CI");
  return e != nullptr && std::string(e) == "true";
}

class EngineConformance : public ::testing::TestWithParam<EngineCase> {};

TEST_P(EngineConformance, MatchesOracle) {
  const EngineCase& c = GetParam();
  const fs::path root = KVCONF_FIXTURES_DIR;
  const fs::path dir = root / "models" / c.fixture;
  const fs::path prompts_file = root / "prompts" / "gsm8k.json";
  if (!fs::exists(dir / "config.json") || !fs::exists(prompts_file)) {
    const std::string why = "fixture " + dir.string() + " or " + prompts_file.string() +
                            " not generated (build the kvconf_fixture_files target)";
    if (ci()) FAIL() << why << " (CI=true: fixtures must be present)";
    GTEST_SKIP() << why;
  }
  const engine::Profile& p = engine::find_profile(c.profile);
  const engine::Model model = engine::load_model(dir, p.storage);
  const engine::ProfileKernels kernels = engine::resolve(p, registry());
  const auto prompts = analysis::read_prompts(prompts_file);
  ASSERT_FALSE(prompts.empty()) << prompts_file;
  const std::vector<int>& ids = prompts.front().ids;
  const std::size_t n = prompt_tokens(model.config) + 1;
  ASSERT_GE(ids.size(), n) << "prompt " << prompts.front().id << " has fewer than " << n << " tokens";
  const std::vector<int> tokens(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
  for (int t : tokens)
    ASSERT_TRUE(t >= 0 && static_cast<std::size_t>(t) < model.config.vocab)
        << "token " << t << " of prompt " << prompts.front().id << " outside the vocabulary of " << c.fixture;

  EngineOracleOptions o;
  o.layers = c.layers;
  const std::uint64_t seed = seed_for("engine_oracle", c.id());
  ::testing::Test::RecordProperty("model", model.config.describe());
  ::testing::Test::RecordProperty("tokens", std::to_string(tokens.size()));
  const CheckResults r = check_engine_matches_oracle(model, kernels, tokens, o, seed);
  record(r);
  expect_pass(r);
}

INSTANTIATE_TEST_SUITE_P(Cpu, EngineConformance, ::testing::ValuesIn(engine_cases()),
                         [](const ::testing::TestParamInfo<EngineCase>& pinfo) { return pinfo.param.id(); });

}  // namespace
}  // namespace kvconf::conformance::suite
