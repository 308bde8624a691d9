// The records kvconf's commands write and read back: one per run pair of the paper's protocol (kvconf model, a JSONL
// line each) and one per kernel case of the sweep (kvconf kernels). Reports, golden baselines and shard merging are
// built from these alone, so everything a report shows is in them. Schema names are versioned (docs/REPORTS.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/results/check_result.hpp"

namespace kvconf::results {

inline constexpr const char* kRunPairSchema = "kvconf.runpair/1";
inline constexpr const char* kKernelCaseSchema = "kvconf.kernelcase/1";

// One regime (free-running or teacher-forced) of a run pair; every per-step vector has one entry per decode step.
struct RegimeRecord {
  std::vector<int> tokens_on, tokens_off;     // tokens each path chose (teacher-forced: would have chosen)
  std::optional<std::size_t> flip;            // first step whose tokens differ
  std::vector<double> kl, js;                 // KL(p_on‖p_off), JS, nats
  std::vector<double> margin_on, margin_off;  // top-1 − top-2 logit of each path
  std::vector<double> max_abs_logit_diff;     // max_v |z_on,v − z_off,v|
  double mean_kl() const;                     // 0 when no steps
};

// One prompt × sample seed × strategy × profile × model: both paths, both regimes.
struct RunPairRecord {
  std::string model;       // "fixture:llama2-tiny", or the checkpoint path as the user gave it
  std::string profile;     // "fp16-eager", ...
  std::string strategy;    // "greedy" | "topk" | "topp"
  std::string prompt_id;   // "gsm8k:0123" (0-based line of test.jsonl) or "ids:07" (index in a prompt-set file)
  std::uint64_t seed = 0;  // the sample seed (the paper's 0-4): seeds the per-step draws shared by both paths
  std::size_t max_new_tokens = 0;
  std::size_t prompt_tokens = 0;
  RegimeRecord free, teacher;                        // teacher-forced on the cache-ON free-running tokens
  std::vector<double> layer_drift_l2, layer_cosine;  // teacher-forced, mean over steps, per hidden state (layers + 1)
  CheckResults rules;  // FlipsAreNearTies on the free-running pair: "no_flip" or flip_consistency + flip_near_tie
  std::optional<std::string> gold;                   // GSM8K gold answer (after ####), normalised; none for id prompts
  std::optional<std::string> answer_on, answer_off;  // the last number of each path's generated text
  bool correct_on = false, correct_off = false;
  double seconds = 0.0;  // wall time of this pair
  // fp32 reference profiles only: the pair's fp32 noise floor (conformance::fp32_kl_floor), Fp32KlRatio's bound where
  // fp16's KL is too small for the paper's ratio (docs/MODELS.md "Fp32KlRatio"); absent in other and older records.
  std::optional<double> fp32_kl_floor;
  std::string key() const;  // "model|profile|strategy|seed|prompt_id": resume and merge key
};

struct KernelCaseRecord {
  std::string kernel;                     // registry name, "cpu.attn.a1_flash2.f16"
  std::string kind;                       // "gemm" | "norm" | "attention" | "projection"
  std::string case_id;                    // the suites' case id (same string keys filters, reports, golden)
  std::size_t seq_len = 0, head_dim = 0;  // n_kv and d for attention, k for gemm/projection; 0 when n/a
  CheckResults rules;
  std::optional<OnOffDiff> on_off;  // measured cache-ON vs cache-OFF difference, when the kind has one
  std::string skipped;              // non-empty: the kernel does not support the case (why)
  double seconds = 0.0;
  std::string key() const;  // "kernel|case_id"
};

// JSON has no infinities or NaN: such numbers (a bitwise rule's −inf headroom) are written as "inf", "-inf", "nan".
// Every kvconf file that stores measurements (records, golden baselines) uses these two.
nlohmann::json json_number(double x);
std::optional<double> number_from_json(const nlohmann::json& v);  // a number or one of those strings; else nullopt

nlohmann::json to_json(const CheckResult& r);
nlohmann::json to_json(const RegimeRecord& r);
nlohmann::json to_json(const RunPairRecord& r);     // carries "schema": kRunPairSchema
nlohmann::json to_json(const KernelCaseRecord& r);  // carries "schema": kKernelCaseSchema
// Parse back; throw std::runtime_error naming the field and what was expected ("field 'free.kl': expected an array
// of numbers"), and the schema when it is not the one this build writes.
CheckResult check_result_from_json(const nlohmann::json& j);
RunPairRecord run_pair_from_json(const nlohmann::json& j);
KernelCaseRecord kernel_case_from_json(const nlohmann::json& j);

}  // namespace kvconf::results
