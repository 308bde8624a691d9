// What every model-running command of the protocol library loads before its first pair (run_protocol, and
// run_experiments): the checked options, the model in each storage format with its fp32 copy, the profiles' kernels,
// the tokenizer and the sampled prompts; and the results folder's manifest, compared on --resume. Internal.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/engine/sampling.hpp"
#include "kvconf/engine/tokenizer.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/protocol.hpp"
#include "kvconf/analysis/paired.hpp"
#include "kvconf/protocol/protocol_inputs.hpp"
#include "kvconf/protocol/protocol_plan.hpp"

namespace kvconf::protocol::detail {

// The models a run needs: one per storage format (shared by the profiles with that storage), plus their fp32
// copies (the same stored values in fp32: the flip check's reference, and LayerCast-style fp32 compute).
struct Models {
  std::vector<std::unique_ptr<engine::Model>> owned;
  std::map<Format, const engine::Model*> by_storage, ref_by_storage;
};

struct RunSetup {
  ModelSource src;
  std::unique_ptr<kernels::Registry> registry;            // kernels::cpu_registry(): the kernels point into it
  std::map<std::string, engine::ProfileKernels> kernels;  // per --profile, resolved once
  std::map<std::string, engine::Strategy> strategies;     // per --strategies entry, parsed once
  engine::ProfileKernels k32;                             // the fp32 reference profile
  Models models;
  const engine::ModelConfig* cfg = nullptr;
  std::optional<engine::Tokenizer> tok;
  PromptSet ps;
  const engine::Tokenizer* decoder = nullptr;  // answers are decoded when the tokenizer fits the model
  nlohmann::json options;                      // the manifest's "options" (compared on --resume)
  // A profile that IS the fp32 reference (fp32 storage, the reference's kernels).
  bool is_reference(const std::string& profile) const;
};

// Step 1 of a run: everything that can be bad input, checked, parsed and loaded once (BadInput otherwise); later
// steps read the parsed values here, never the option strings again. `extra` fields join
// the manifest options (e.g. the experiments of kvconf model --experiment).
RunSetup load_run(const ProtocolOptions& o, const nlohmann::json& extra = nlohmann::json::object());

// Creates OUT; on --resume compares s.options with OUT/manifest.json (BadInput naming the differing flag). Call
// before opening the results file; write_manifest after (a refused run never replaces the manifest in OUT).
void prepare_out(const ProtocolOptions& o, const nlohmann::json& options, const std::string& results_file);
// The manifest also lists the sampled prompts' ids (prompt_ids: kvconf report names a pair no shard holds).
void write_manifest(const ProtocolOptions& o, const RunSetup& s, const std::string& command);

// The paired-run options of one planned pair: the run's steps and sampler settings, the pair's strategy, and its
// per-step draws (pair_sampler_seed of the sample seed and prompt id). Layer drift is left to the caller.
analysis::PairOptions pair_options(const ProtocolOptions& o, const RunSetup& s, const WorkItem& w,
                                   const std::string& prompt_id);

// The answer a decoded continuation gives (GSM8K's last number before the stop text); none without a decoder.
std::optional<std::string> answer_of(const RunSetup& s, const std::vector<int>& tokens);

}  // namespace kvconf::protocol::detail
