// The experiments' internal interface: the PairUnit each experiment runs on (one planned pair, with the free-running
// pair, the cache-ON run teacher-forced on cache-OFF's tokens and the fp32 reference computed once and shared by
// every experiment of the pair), and the table of experiments (name, what it asks, run, summarise).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvconf/analysis/paired.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/results/experiment_summary.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/protocol/experiments.hpp"
#include "kvconf/protocol/protocol_inputs.hpp"

namespace kvconf::protocol::experiments {

using Logits = std::vector<float>;  // (vocab)

class PairUnit {
 public:
  PairUnit(engine::Context& ctx, engine::Context& ref, const ProtocolPrompt& prompt, analysis::PairOptions po,
           const ExperimentPlants& plants)
      : ctx_(ctx), ref_(ref), prompt_(prompt), po_(po), plants_(plants) {}  // PairOptions is trivially copyable

  engine::Context& ctx() { return ctx_; }  // the profile under test (cache-ON and cache-OFF)
  engine::Context& ref() { return ref_; }  // fp32 compute over the fp32 copy of the same stored weights
  const std::vector<int>& prompt() const { return prompt_.ids; }
  const ProtocolPrompt& protocol_prompt() const { return prompt_; }
  const analysis::PairOptions& options() const { return po_; }
  const ExperimentPlants& plants() const { return plants_; }
  std::uint64_t seed() const { return po_.sampler.seed; }

  // The free-running pair (logits kept): the protocol's run.
  const analysis::PairedRun& free();
  // Teacher-forced on cache-OFF's free-running tokens: cache-OFF's logits are free().logits_off; cache-ON's here.
  const std::vector<Logits>& teacher_on();
  // S_t = max_{s<=t} ‖z_off,s − z_fp32,s‖∞ along cache-OFF's tokens: cache-OFF's own rounding error (the near-tie
  // yardstick of FlipsAreNearTies, docs/TOLERANCES.md).
  const std::vector<double>& S_off();
  // The fp32 reference's logits after prompt + tokens[0..t) for t = 0..tokens.size()-1 (cache OFF), memoised for
  // cache-OFF's and cache-ON's free-running tokens.
  const std::vector<Logits>& ref_along(const std::vector<int>& tokens);
  // The GSM8K answer a continuation gives (none without a tokenizer that fits the model), set by the runner.
  std::function<std::optional<std::string>(const std::vector<int>&)> answer;
  // The cache-invariant profile (fp16-invariant) over the same stored weights, for models stored in fp16; else null.
  engine::Context* invariant = nullptr;
  // The profile with ContextOptions::kv_fp32_gemm (fp32 K/V projections and cache), for 16-bit CPU profiles; else null.
  engine::Context* kv_fp32 = nullptr;

  // Mean over steps of KL(softmax(a_t) ‖ softmax(b_t)).
  static double mean_kl(const std::vector<Logits>& a, const std::vector<Logits>& b);

 private:
  engine::Context& ctx_;
  engine::Context& ref_;
  const ProtocolPrompt& prompt_;
  analysis::PairOptions po_;
  ExperimentPlants plants_;
  std::optional<analysis::PairedRun> free_;
  std::optional<std::vector<Logits>> teacher_on_;
  std::optional<std::vector<double>> S_off_;
  std::vector<std::pair<std::vector<int>, std::vector<Logits>>> ref_memo_;
};

// Cache-ON teacher-forced on `forced` (step 0 from the prompt's prefill, step t after decoding forced[t−1]); `before`
// runs before each decode call (step t >= 1) and may patch the cache or set the call's forward options.
using BeforeDecode = std::function<void(std::size_t step, engine::Context& ctx, engine::ForwardOptions& fo)>;
std::vector<Logits> cache_on_teacher_forced(engine::Context& ctx, const std::vector<int>& prompt,
                                            const std::vector<int>& forced, const BeforeDecode& before = {});

// One experiment: `run` returns the record's "data" and appends the record's rule results; `summarize` reads the
// records of every profile/strategy of this experiment.
struct Experiment {
  const char* name;
  const char* title;
  const char* question;
  std::function<nlohmann::json(PairUnit&, results::CheckResults&)> run;
  std::function<void(const std::vector<const nlohmann::json*>&, results::ExperimentSummary&)> summarize;
};
const std::vector<Experiment>& all_experiments();

// The experiments (one file each).
Experiment decision_boundary();
Experiment residual_patching();
Experiment kv_patching();
Experiment kv_buildup();
Experiment gqa_amplification();
Experiment kv_injection();
Experiment mitigations();
Experiment flip_attribution();

}  // namespace kvconf::protocol::experiments
