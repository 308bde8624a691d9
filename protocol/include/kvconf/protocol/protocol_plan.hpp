// The protocol's fixed work order and per-pair seeds: items in the order (model, profile, strategy, seed, prompt,
// scenario),
// numbered from 0, each kept by the shard that owns its number (Shard::owns), so --shard I/N splits deterministically
// and N shards together run every item exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvconf/protocol/result_store.hpp"

namespace kvconf::protocol {

struct WorkItem {
  std::size_t index = 0;  // position in the whole (unsharded) plan
  std::string profile, strategy;
  std::uint64_t seed = 0;          // the sample seed (the paper's 0-4)
  std::size_t prompt = 0;          // index into the sampled prompts
  std::string scenario = "cache";  // kvconf model --scenario (docs/SCENARIOS.md); "cache": the protocol's own pair
  // The profile its record is filed under: the profile, "+<scenario>" for a scenario other than cache (as kvconf
  // check names a scenario's traces), so the reports group each scenario apart.
  std::string record_profile() const { return scenario == "cache" ? profile : profile + "+" + scenario; }
};

// The plan for one model; items of other shards are left out (their numbers still count). Scenarios vary fastest,
// so a plan of the one scenario "cache" numbers its items as the protocol always has.
std::vector<WorkItem> plan_work(const std::vector<std::string>& profiles, const std::vector<std::string>& strategies,
                                const std::vector<std::uint64_t>& seeds, std::size_t n_prompts, const Shard& shard,
                                const std::vector<std::string>& scenarios = {"cache"});

// The seed of a pair's per-step draws (engine::Sampler::seed, the same for both paths): SplitMix64 finalisation of
// the sample seed mixed with FNV-1a 64 of the prompt id. Not of the model, profile or strategy, so every profile and
// strategy of a (seed, prompt) sees the same draws.
std::uint64_t pair_sampler_seed(std::uint64_t sample_seed, const std::string& prompt_id);

}  // namespace kvconf::protocol
