// kvconf.trace/1 (docs/TRACES.md): one engine run of one prompt on one path (cache ON or OFF), read from a
// .safetensors file whose metadata key "kvconf.trace" holds the JSON description; and the pairing of ON/OFF traces.
// Every defect is BadInput naming the file and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kvconf::protocol {

inline constexpr const char* kTraceFormat = "kvconf.trace/1";

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
  std::vector<float> k_rows, v_rows;                    // (L, N, D_kv) flattened, cache_on traces only

  // "<fp32|fp16|bf16>-<engine>-<attention>": the profile name the reports group this engine configuration under.
  std::string profile() const;
  // What the two traces of a pair share: model, dtype, engine, attention, strategy, prompt id.
  std::string pair_key() const;
};

// Reads and validates one trace file (docs/TRACES.md "Bad traces exit 2").
Trace read_trace(const std::filesystem::path& file);

struct TracePair {
  Trace on, off;
};

// Two traces given as --on and --off: `on` must be cache_on, `off` cache_off, and they must agree on everything
// pair_key() names and on the prompt ids (and on the draws when both carry them).
TracePair make_trace_pair(Trace on, Trace off);
// Every .safetensors file in a folder (not recursive), paired by pair_key(); a trace without a partner, or two
// traces for the same path of a pair, is BadInput. Pairs in the order of their keys.
std::vector<TracePair> read_trace_folder(const std::filesystem::path& dir);

}  // namespace kvconf::protocol
