// default_run_plan: the built-in default of `kvconf run` (run_plan.hpp).
#include "kvconf/protocol/run_plan.hpp"

#include "kvconf/engine/profile.hpp"

namespace kvconf::protocol {

namespace {

// Per fixture: every CPU profile × the three strategies × kPrompts prompts × one sample seed × kSteps new tokens.
// Enough steps for fp16 flips to appear on stories260K (docs/MODELS.md: first flips at steps 4–13) while the whole
// job stays well inside its 3-minute budget.
constexpr std::size_t kPrompts = 2;
constexpr std::size_t kSteps = 24;

}  // namespace

RunPlan default_run_plan(const std::filesystem::path& out, const std::filesystem::path& fixtures_dir,
                         const std::filesystem::path& shared_dir, bool resume) {
  RunPlan plan;
  plan.kernels.quick = true;
  std::vector<std::string> profiles;
  for (const auto& p : engine::builtin_profiles()) profiles.push_back(p.name);
  // Slowest first, so that `kvconf run`'s two workers finish together.
  std::vector<std::string> fixtures = {"gemma2-tiny", "mistral-tiny", "llama2-tiny"};
  if (std::filesystem::exists(shared_dir / "models" / "stories260K" / "stories260K.bin"))
    fixtures.push_back("stories260K");
  for (const auto& f : fixtures) {
    ProtocolOptions o;
    o.model = "fixture:" + f;
    o.profiles = profiles;
    o.strategies = {"greedy", "topk", "topp"};
    o.n = kPrompts;
    o.seeds = {0};
    o.max_new_tokens = kSteps;
    o.out = out / "models" / f;
    o.resume = resume;
    o.fixtures_dir = fixtures_dir;
    o.shared_dir = shared_dir;
    plan.models.push_back(o);
  }
  return plan;
}

}  // namespace kvconf::protocol
