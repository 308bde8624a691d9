// One llama.cpp run of one prompt on one path (cache ON: one evaluation of the prompt, then one token per evaluation
// against the KV cache; cache OFF: the cache cleared and the whole sequence evaluated at every step), or the scenario
// side of prefix, refill, restore, batch or preempt (docs/SCENARIOS.md), with kvconf's sampler and shared draws, and
// every llama_decode call as llama.cpp's memory reports it (docs/LLAMA_CPP.md).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/engine/call_record.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/engine/sampling.hpp"
#include "gguf_weights.hpp"
#include "kv_state.hpp"

struct llama_model;
struct llama_context;

namespace kvconf::llama_cpp {

// Bad input (a GGUF llama.cpp refuses, a prompt outside the vocabulary, an unknown option value): one line, exit 2;
// kvconf's own (protocol/bad_input.hpp), as every kvconf command throws it.
using protocol::BadInput;

struct RunOptions {
  std::string cache_type = "f16";  // the K and V cache's ggml type: f32 | f16 | q8_0 | q4_0
  bool flash_attn = false;         // llama.cpp's flash_attn_ext path (else soft_max + mul_mat)
  int threads = 1;
  int batch = 512;  // the prompt evaluation's physical batch (n_ubatch): the rows one graph evaluates at a time
  std::size_t max_new_tokens = 16;
  // Cache ON only: the prompt fed in llama_decode calls of `chunk` tokens (the chunked scenario's side; 0: one call).
  std::size_t chunk = 0;
  // The sequence's K/V rows read from llama.cpp's saved state (kv_state.hpp): a cache-ON side's at its end, a cache-OFF
  // side's after the recompute of step kv_step.
  bool kv = false;
  std::size_t kv_step = 0;
  engine::Sampler sampler;
  // A planted path lie for kvconf's own tests (kvconf-llama-trace's hidden --plant; empty: none): "recompute_on",
  // cache ON's steps after the first clear the memory and decode the whole sequence; "batch_alone", the batch
  // scenario's side decodes only its own sequence. Both leave the logits a correct run could give; only the memory's
  // report of each call shows them (docs/TRACES.md "The engine's report").
  std::string plant;
};

// The scenario side of a scenario other than cache and chunked (run_scenario; its reference side is `run` cache ON).
struct ScenarioSide {
  std::string name;  // prefix | refill | restore | batch | preempt
  // refill, restore: the event follows step at_step's token (1 <= at_step <= T - 2), as the HF adapter; preempt: step
  // at_step's call is the recompute of the prompt and every token so far over a cleared memory (1 <= at_step <= T - 1).
  std::size_t at_step = 3;
  // prefix: another request (`donor`, sharing the prompt's first `shared` tokens) is decoded into sequence 1 of a
  // unified KV cache, its first `shared` rows copied to sequence 0 (llama_memory_seq_cp) and its own rows removed;
  // the rest of the prompt is then decoded over them.
  std::size_t shared = 0;
  std::vector<int> donor;
  // batch: the other requests, decoded with this one in every llama_decode (their own sequence ids; greedy).
  std::vector<std::vector<int>> batch_with;
};

// refill and restore: BadInput unless a step precedes the event and one follows it (1 <= at_step <= T - 2); preempt:
// unless a step precedes its recompute (1 <= at_step <= T - 1); nothing for another scenario.
void check_event_step(const std::string& scenario, std::size_t at_step, std::size_t max_new_tokens);

// BadInput naming the accepted types unless `name` is a cache type RunOptions::cache_type accepts.
void check_cache_type(const std::string& name);

struct RunResult {
  std::vector<int> generated;
  std::vector<double> draws;
  std::vector<std::vector<float>> logits;  // (T, V)
  // Every llama_decode as llama.cpp's memory reported it (never the tokens this program meant to feed): {fed: the
  // rows sequence 0 gained, cached: the rows it held before, batch: the rows every sequence gained}, and the rows
  // sequence 0 held after the call.
  std::vector<engine::CallRecord> calls;
  std::vector<std::size_t> cache_after;
  std::vector<std::size_t> call_of_step;   // the call whose logits chose each token
  std::optional<KvRows> kv;                // with RunOptions::kv
};

// A GGUF model loaded once for every run (CPU only), f32, f16, bf16 or quantised weights; `vocab_only`: its
// vocabulary alone (llama_model_params::vocab_only, for tokenising).
class Model {
 public:
  explicit Model(const std::string& gguf, bool vocab_only = false);  // BadInput when llama.cpp cannot load it
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  std::size_t vocab() const;
  std::size_t n_layers() const;
  std::size_t hidden() const;
  std::string arch() const;         // general.architecture
  const WeightTypes& weights() const { return weights_; }  // general.file_type and the tensors' types
  llama_model* get() const { return model_; }

 private:
  llama_model* model_ = nullptr;
  std::string file_;
  WeightTypes weights_;
};

// Runs `prompt` on one path. BadInput for a prompt token outside the vocabulary or a context llama.cpp refuses.
RunResult run(const Model& m, const std::vector<int>& prompt, bool cache_on, const RunOptions& o);

// The scenario side of `s` (refill: the memory cleared after step at_step and everything but the newest token
// decoded again; preempt: the memory cleared at step at_step and the prompt and every token so far decoded in that
// step's call, its last row choosing the token; restore: the sequence's state saved with llama_state_seq_get_data after step at_step and generation
// continued in a new context it was restored into). BadInput for options the scenario cannot use.
RunResult run_scenario(const Model& m, const std::vector<int>& prompt, const ScenarioSide& s, const RunOptions& o);

// "llama.cpp <build> (<ggml system info>)" for the trace's engine.version.
std::string engine_version();

// How RunResult::calls and cache_after were obtained, for the trace's calls_reported_by.
inline constexpr const char* kCallsReportedBy =
    "llama.cpp's memory: llama_memory_seq_pos_max of every sequence before and after each llama_decode";

}  // namespace kvconf::llama_cpp
