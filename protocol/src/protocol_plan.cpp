// The protocol's work plan and per-pair seeds (protocol_plan.hpp).
#include "kvconf/protocol/protocol_plan.hpp"

namespace kvconf::protocol {

std::vector<WorkItem> plan_work(const std::vector<std::string>& profiles, const std::vector<std::string>& strategies,
                                const std::vector<std::uint64_t>& seeds, std::size_t n_prompts, const Shard& shard,
                                const std::vector<std::string>& scenarios) {
  std::vector<WorkItem> plan;
  std::size_t index = 0;
  for (const std::string& profile : profiles)
    for (const std::string& strategy : strategies)
      for (const std::uint64_t seed : seeds)
        for (std::size_t prompt = 0; prompt < n_prompts; ++prompt)
          for (const std::string& scenario : scenarios) {
            if (shard.owns(index)) plan.push_back({index, profile, strategy, seed, prompt, scenario});
            ++index;
          }
  return plan;
}

std::uint64_t pair_sampler_seed(std::uint64_t sample_seed, const std::string& prompt_id) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64 offset basis; prime 1099511628211 (Fowler, Noll, Vo)
  for (unsigned char ch : prompt_id) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  // SplitMix64's output function (Steele, Lea, Flood 2014) over the sample seed's increment step, mixed with h.
  std::uint64_t z = h ^ (sample_seed * 0x9e3779b97f4a7c15ull + 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace kvconf::protocol
