// kvconf.trace/1, /1.1 and /1.2 (docs/TRACES.md): one engine run of one prompt on one path (cache ON or OFF), or one
// side of a scenario (1.1: prefix, chunked, refill, restore, batch, preempt, kv_dtype; docs/SCENARIOS.md), read from a
// .safetensors file whose metadata key "kvconf.trace" holds the JSON description; and the pairing of traces. Every
// defect is BadInput naming the file and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/engine/call_record.hpp"
#include "kvconf/engine/scenario.hpp"

namespace kvconf::protocol {

inline constexpr const char* kTraceFormat = "kvconf.trace/1";
inline constexpr const char* kTraceFormat11 = "kvconf.trace/1.1";  // adds scenario and calls; 1 is still read
// Adds the engine's own report of each call: cache_after and calls_reported_by (required with calls); 1, 1.1 still read.
inline constexpr const char* kTraceFormat12 = "kvconf.trace/1.2";

struct Trace {
  std::filesystem::path file;
  std::string engine, engine_version, attention;  // "transformers", "5.23.0", "sdpa"
  std::string model_name, model_path;
  std::size_t vocab = 0;
  std::string dtype;  // "float32" | "float16" | "bfloat16"
  bool cache_on = false;
  std::string strategy = "greedy";  // "greedy" | "topk" | "topp"
  std::size_t top_k = 50;
  double top_p = 0.9, temperature = 1.0;
  std::uint64_t seed = 0;
  std::string prompt_id;
  std::vector<int> prompt_ids, generated_ids;
  std::vector<double> draws;                            // empty when the trace has none
  std::string logits_dtype;                             // "F32" | "F16" | "BF16"
  std::vector<std::vector<float>> logits;               // (T, V), widened exactly
  std::size_t n_layers = 0, hidden_size = 0;            // model.n_layers / model.hidden_size (0 when absent)
  std::vector<std::vector<std::vector<float>>> hidden;  // (T, L + 1, H) when the trace has hidden_states, else empty
  std::size_t kv_rows = 0, kv_dim = 0;                  // N and D_kv of k_rows / v_rows (L, N, D_kv); 0 when absent
  std::vector<float> k_rows, v_rows;                    // (L, N, D_kv) flattened
  // 1.1, a cache_off trace's k_rows / v_rows: the step whose recompute computed them (N = prompt + kv_step rows);
  // absent elsewhere (a cache-ON side's rows are its cache at the end).
  std::optional<std::size_t> kv_step;
  // 1.1: the scenario this trace is one side of ("cache" for 1 and when absent); side A is the scenario's execution
  // (for "cache": the cache_on path), side B the plain one it must agree with; the scenario's options (0: not given).
  engine::Scenario scenario = engine::Scenario::cache;
  bool side_a = false;
  std::size_t chunk = 0, at_step = 0, shared = 0;
  std::string kv_format;  // kv_dtype: the format side A keeps its cache in (engine::parse_kv_format's names)
  // 1.1, optional: every forward call as the engine reported it, {tokens fed, cached rows attended over, rows of the
  // whole call (a batch's; 0 when not given: alone)}, and for each generated token the index of the call whose
  // logits chose it.
  std::vector<engine::CallRecord> calls;
  std::vector<std::size_t> call_of_step;
  // 1.2, with calls: the rows of this sequence the engine's cache held after each call, as the engine's cache object
  // reported them (0: the call kept no cache), and how the engine's report was obtained (a forward pre-hook, the
  // memory's positions, ...). Empty in 1 and 1.1.
  std::vector<std::size_t> cache_after;
  std::string calls_reported_by;

  // "<fp32|fp16|bf16>-<engine>-<attention>" ("+" and scenario_options() for a scenario other than cache): the profile
  // name the reports group this engine configuration under.
  std::string profile() const;
  // The scenario with the option a folder may hold several values of: "chunked4", "refill3", "restore3",
  // "preempt3", "kv_dtype_q8_0"; "prefix", "batch" (prefix's shared rows follow the prompt).
  std::string scenario_options() const;
  // What the two traces of a pair share: model, dtype, engine, attention, strategy, prompt id, scenario and its options.
  std::string pair_key() const;
};

// Reads and validates one trace file (docs/TRACES.md "Bad traces exit 2").
Trace read_trace(const std::filesystem::path& file);

// The two sides of a scenario (engine/scenarios.json): the scenario's own execution (side A: cache_on for the cache
// scenario, the "scenario" side of the others) and the plain one it must agree with (side B: cache_off, "reference").
struct TracePair {
  Trace scenario_side, reference_side;
};

// Two traces given as --on and --off: `on` must be side A (cache_on, or a scenario's "scenario" side), `off` side B,
// and they must agree on everything pair_key() names and on the prompt ids (and on the draws when both carry them).
TracePair make_trace_pair(Trace on, Trace off);
// Every .safetensors file in a folder (not recursive), paired by pair_key(); a trace without a partner, or two
// traces for the same path of a pair, is BadInput. Pairs in the order of their keys.
std::vector<TracePair> read_trace_folder(const std::filesystem::path& dir);

}  // namespace kvconf::protocol
