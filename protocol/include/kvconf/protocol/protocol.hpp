// The seed paper's protocol as one function (kvconf model, and the model part of kvconf run and kvconf golden): for
// every model × profile × strategy × sample seed × prompt, run the cache-ON / cache-OFF pair in both regimes and
// record it (results::RunPairRecord), appended to OUT/pairs.jsonl as it finishes. Work is planned in a fixed
// order, so --shard I/N and --resume are deterministic. The GSM8K prompt format is documented in docs/PROTOCOL.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kvconf/results/records.hpp"
#include "kvconf/protocol/result_store.hpp"

namespace kvconf::protocol {

struct ProtocolOptions {
  std::string model;  // "fixture:NAME" (llama2-tiny, mistral-tiny, gemma2-tiny, stories260K, smollm2-135m) or a
                      // path: checkpoint folder, config.json, llama2.c .bin
  std::vector<std::string> profiles = {"fp16-eager"};
  std::vector<std::string> strategies = {"greedy", "topk", "topp"};
  std::string prompts;              // "gsm8k:FILE" (GSM8K jsonl), "ids:FILE" (a prompt-set file of token ids),
                                    // or empty: the model's default (fixture prompt set; GSM8K from shared)
  std::filesystem::path tokenizer;  // SentencePiece model for gsm8k prompts, or a tokenizer.json for answers (empty:
                                    // the model folder's tokenizer.json, else the shared LLaMA-2 tokenizer)
  std::size_t n = 700;              // problems sampled without replacement ...
  std::uint64_t sample_seed = 42;   // ... with this seed
  std::vector<std::uint64_t> seeds = {0, 1, 2, 3, 4};  // sample seeds: the per-step draws of both paths
  std::size_t max_new_tokens = 128;
  std::size_t top_k = 50;
  double top_p = 0.9, temperature = 1.0;
  bool layer_drift = true;    // record per-layer drift (teacher-forced, mean over steps)
  std::filesystem::path out;  // results: out/pairs.jsonl (+ out/manifest.json)
  bool resume = false;
  Shard shard;
  std::filesystem::path fixtures_dir;  // build/fixtures (fixture models and prompt sets)
  std::filesystem::path shared_dir;    // ../shared (GSM8K, stories260K, tokenizer)
  std::size_t shots = 2;               // GSM8K few-shot exemplars before each question (docs/PROTOCOL.md)
  bool clamp_n = false;                // n larger than the prompts available takes them all (the CLI's default
                                       // when --n is not given); otherwise that is BadInput
  // kvconf model --scenario (docs/SCENARIOS.md): the scenarios each planned pair runs, of cache, prefix, batch,
  // chunked, refill, restore, preempt. "cache" is the protocol's own pair (both regimes); any other runs that
  // scenario's two sides free-running (conformance::check_scenario: its path, bitwise and near-tie rules), filed under
  // the profile "<profile>+<scenario>" with the next prompt of the sample as the other request (prefix donor, batch neighbours).
  std::vector<std::string> scenarios = {"cache"};
  bool reuse_free_as_teacher = true;  // a pair without a flip fed both paths the same tokens, so its free run IS
                                      // the teacher-forced run: not run again (tests turn this off to check it)
};

struct Progress {
  std::size_t done = 0, total = 0;  // pairs of this shard, including resumed ones
  std::size_t resumed = 0;          // finished before this invocation (not redone)
  double elapsed_s = 0.0;           // of this invocation
  const results::RunPairRecord* last = nullptr;
};
using ProgressFn = std::function<void(const Progress&)>;

struct ProtocolResult {
  std::vector<results::RunPairRecord> records;  // this shard's finished pairs (resumed + new), plan order
  std::size_t ran = 0, resumed = 0;
};

// Throws BadInput (exit 2) for bad options or input files, before any pair runs; other exceptions are failures.
ProtocolResult run_protocol(const ProtocolOptions& o, const ProgressFn& progress = {});

}  // namespace kvconf::protocol
