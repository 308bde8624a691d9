// `kvconf golden check|update`: the fixed run behind the golden baselines (token sequences of the deterministic CPU
// profiles on the tiny fixtures, and the quick kernel sweep's error statistics), compared with or written to
// golden/baselines/<device>/ (docs/GOLDEN.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/results/records.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/golden/golden.hpp"

namespace kvconf::tools {

struct GoldenCliOptions {
  std::string action;         // "check" | "update"
  std::filesystem::path dir;  // empty: the source tree's golden/baselines/<device>
  std::string device = "cpu";
  std::string part = "all";  // "all" | "kernels" | "tokens"
};

// The fixed configuration of the token baselines: each fixture × profile × strategy, `prompts` prompts of the fixture's
// prompt set, one sample seed, `tokens` new tokens.
struct GoldenConfig {
  std::vector<std::string> fixtures = {"llama2-tiny", "mistral-tiny", "gemma2-tiny"};
  std::vector<std::string> profiles = {"fp32", "fp16-eager", "fp16-flash2", "fp16-invariant", "bf16-eager"};
  std::vector<std::string> strategies = {"greedy", "topk"};
  std::size_t prompts = 2;
  std::uint64_t sample_seed = 0;
  std::size_t tokens = 16;
  std::string file_prefix;  // token files are tokens-<file_prefix><profile>.json
  std::string token_file(const std::string& profile) const;
};

// The real trained model's token baselines (tokens-smollm2-135m-<profile>.json): SmolLM2-135M-Instruct, every CPU
// profile, greedy and top-k, one GSM8K chat prompt, 8 new tokens (a cache-OFF step of this model costs about 1 s).
GoldenConfig real_model_golden_config();
// The token configurations of a device's baselines: the tiny fixtures, and on the CPU the real model too.
std::vector<GoldenConfig> golden_token_configs(bool gpu);
// Why a configuration cannot run here (its fixture missing: the real model not fetched), or nullopt.
std::optional<std::string> golden_config_missing(const GoldenConfig& g);

std::filesystem::path default_golden_dir(const std::string& device);  // KVCONF_SOURCE_DIR/golden/baselines/<device>

// The configuration of a GPU device's baselines (golden/baselines/<device>/): the GPU profiles, same fixtures.
GoldenConfig gpu_golden_config();

// The kernels the golden kernel file covers: the GPU registry, or the CPU registry plus the black-box probes
// (kernels::black_box_probe_registry: the black-box bounds pinned on the CPU's deterministic arithmetic).
kernels::Registry golden_registry(bool gpu = false);
// The quick kernel sweep over golden_registry(gpu) (what kernels.json holds).
std::vector<results::KernelCaseRecord> golden_kernel_records(bool gpu = false);
// The run pairs of one profile over every fixture (what tokens-<profile>.json holds); work files go to a temporary
// folder that is removed afterwards.
std::vector<results::RunPairRecord> golden_token_records(const GoldenConfig& g, const std::string& profile);

CLI::App* add_golden_command(CLI::App& app, GoldenCliOptions& o);
// 0 no change (check) / written (update), 1 a change, 2 a bad or missing golden file or bad input.
int golden_command(const GoldenCliOptions& o);

}  // namespace kvconf::tools
