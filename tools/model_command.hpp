// `kvconf model`: the seed paper's protocol on one model (run_protocol), its progress on stderr, a summary per model,
// profile and strategy on stdout, and the report (reports::write_report) in --out.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvconf/protocol/protocol.hpp"
#include "protocol_names.hpp"

namespace kvconf::tools {

struct ModelCliOptions {
  std::string model;                    // fixture:NAME or a checkpoint path
  std::string profiles = "fp16-eager";  // P[,P...]
  std::string strategies = "greedy,topk,topp";
  std::string prompts;  // gsm8k:FILE | ids:FILE | empty (the model's default)
  std::string tokenizer;
  long long n = 700;
  bool n_given = false;  // --n on the command line (else n clamps to the prompts available)
  std::uint64_t sample_seed = 42;
  std::string seeds = "0-4";  // "0-4", "0,2,4", "3"
  long long max_new_tokens = 128;
  long long shots = 2;
  long long top_k = 50;
  double top_p = 0.9, temperature = 1.0;
  bool no_layer_drift = false;
  std::string out = "kvconf-out";
  bool resume = false;
  std::string shard = "0/1";
  bool shard_given = false;  // --shard on the command line (else a Slurm array task's shard)
  std::string experiment;    // --experiment NAME[,NAME...]|all (experiment_command.hpp)
  std::string scenario;      // --scenario NAME[,NAME...]|all (docs/SCENARIOS.md); empty: the protocol's cache pair
};

CLI::App* add_model_command(CLI::App& app, ModelCliOptions& o);
// 0: every pair's rules pass; 1: a rule failed (or a pair could not run); 2: bad input (one stderr line).
int model_command(const ModelCliOptions& o);

// The CLI's options as ProtocolOptions (defaults for fixtures_dir/shared_dir from the build). Throws BadInput.
ProtocolOptions protocol_options(const ModelCliOptions& o);
// "0-4" -> {0,1,2,3,4}; "0,2,5"; "1-2,7". Throws BadInput naming the text ("--seeds '4-1': ...").
std::vector<std::uint64_t> parse_seeds(const std::string& text);
// "a,b,c" -> {a, b, c}; empty items are BadInput naming `flag`.
std::vector<std::string> split_list(const std::string& text, const std::string& flag);
// A `kvconf model` report's metadata: provenance(command) with the options' model, shard, max_new_tokens, n and
// sample_seed.
nlohmann::json model_report_meta(const std::string& command, const ProtocolOptions& o);

}  // namespace kvconf::tools
