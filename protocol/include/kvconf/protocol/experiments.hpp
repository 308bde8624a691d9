// The paper's open questions as experiments of `kvconf model --experiment NAME|all` (docs/EXPERIMENTS.md): each runs
// on every planned pair (profile × strategy × seed × prompt, the protocol's plan, sharded and resumable like it),
// appends one record per (experiment, pair) to OUT/experiments.jsonl, and is summarised over the records into a
// results::ExperimentSummary: findings, a table, plots and the verdicts of its gating rules.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvconf/results/experiment_summary.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/faults.hpp"
#include "kvconf/protocol/protocol.hpp"

namespace kvconf::protocol {

inline constexpr const char* kExperimentSchema = "kvconf.experiment/1";

// Every experiment's name, in run order.
std::vector<std::string> experiment_names();
// "all" or a comma-separated list of names; BadInput naming an unknown name and listing the known ones.
std::vector<std::string> parse_experiments(const std::string& text);

struct ExperimentPlants {  // planted faults for the rules' tests (tests/protocol/experiments_test.cpp); never set by
                           // kvconf
  engine::Fault fault = engine::Fault::none;  // the engine fault of every context under test
  double injection_scale = 1.0;               // kv_injection: every noise amplitude times this
  bool quantize_truncate = false;             // kv_injection: quantizers truncate instead of rounding to nearest
};

struct ExperimentsResult {
  std::vector<nlohmann::json> records;                // this shard's records (resumed + new), plan order
  std::vector<results::ExperimentSummary> summaries;  // one per experiment run
  std::size_t ran = 0, resumed = 0;
};

// Throws BadInput (exit 2) for bad options or inputs before any pair runs. OUT/manifest.json records the options and
// the experiments (compared on --resume).
ExperimentsResult run_experiments(const ProtocolOptions& o, const std::vector<std::string>& names,
                                  const ProgressFn& progress = {}, const ExperimentPlants& plants = {});

// The summaries of records (of one run, or several shards merged), one per experiment present, in run order.
// A record whose "experiment" is unknown, or whose fields are missing, is BadInput naming the record's key.
std::vector<results::ExperimentSummary> summarize_experiments(const std::vector<nlohmann::json>& records);

std::string experiment_record_key(const nlohmann::json& record);  // "experiment|model|profile|strategy|seed|prompt"

}  // namespace kvconf::protocol
