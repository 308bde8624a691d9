// kvconf check (docs/TRACES.md): kvconf model's rules applied to the cache-ON / cache-OFF trace pairs of any engine,
// each pair becoming the same RunPairRecord `kvconf model` writes (free-running regime), appended to OUT/pairs.jsonl
// as it is checked (resumable). With the checkpoint, kvconf's own fp32 engine replays each prompt and its cache-OFF
// tokens (one prefill, then one decode per token over an fp32 cache) as FlipsAreNearTies' reference.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kvconf/results/records.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/protocol/trace.hpp"

namespace kvconf::protocol {

struct TraceCheckOptions {
  std::filesystem::path model;  // checkpoint folder (or config.json / llama2.c .bin) for the fp32 replay; empty: none
  std::filesystem::path out;    // OUT/pairs.jsonl, OUT/manifest.json
  bool resume = false;
  std::vector<std::string> inputs;  // the trace files or folder, for the manifest
  // --expect-bitwise: for engines that claim determinism (vLLM's batch-invariant mode, SGLang's deterministic mode):
  // every pair's logits and tokens must be equal bit for bit (rule scenario_bitwise), whatever its scenario.
  bool expect_bitwise = false;
};

struct TraceCheckResult {
  std::vector<results::RunPairRecord> records;  // every pair's record, in pair order
  std::size_t ran = 0, resumed = 0;
  double replay_max_diff = -1.0;  // with --model: max over pairs and steps of |z_off - z_fp32| (-1: no replay)
};

// One pair's record. `fp32` (may be null): the model in fp32 storage for the replay; its vocabulary must be the
// traces'. The record's rules (docs/TRACES.md, docs/SCENARIOS.md): scenario_path when both traces carry their calls;
// prefill_logits_bitwise (cache); scenario_shared_steps_bitwise (refill, restore, preempt); scenario_bitwise (restore,
// and every pair with expect_bitwise); then flip_rules (conformance/model_cases.hpp).
results::RunPairRecord check_trace_pair(const TracePair& p, const engine::Model* fp32, double* replay_diff = nullptr,
                                        bool expect_bitwise = false);

// Checks every pair (BadInput for a model that does not fit the traces, an --out that cannot be written, a resume
// that does not match), appending records to OUT/pairs.jsonl; pairs already there with --resume are not redone.
TraceCheckResult run_trace_check(const std::vector<TracePair>& pairs, const TraceCheckOptions& o,
                                 const std::function<void(std::size_t done, std::size_t total)>& progress = {});

}  // namespace kvconf::protocol
