// Paired runs of one prompt through cache-ON and cache-OFF, in the two regimes of DESIGN.md "Metrics":
// free-running (each path feeds back its own tokens: the seed paper's protocol) and teacher-forced (both paths fed the
// same tokens: numerical drift without context change). Per step metrics, per layer drift of the last row.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvconf/analysis/metrics.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/generate.hpp"
#include "kvconf/engine/sampling.hpp"

namespace kvconf::analysis {

enum class Regime : std::uint8_t { free_running, teacher_forced };
const char* regime_name(Regime r);  // "free", "teacher"

struct StepMetrics {
  std::size_t step = 0;
  int token_on = -1, token_off = -1;  // tokens each path chose at this step
  double kl = 0.0;                    // KL(p_on‖p_off)
  double js = 0.0;
  Top2 top_on, top_off;             // top-1/top-2 of each path's logits
  double max_abs_logit_diff = 0.0;  // max_v |z_on,v − z_off,v|
  std::vector<Drift> layer_drift;   // n_layers + 1 entries (last row of each hidden state) when requested
};

struct PairedRun {
  Regime regime = Regime::free_running;
  std::vector<int> prompt;
  std::vector<int> tokens_on, tokens_off;  // chosen tokens (teacher-forced: what each would have chosen)
  std::vector<StepMetrics> steps;
  std::optional<std::size_t> flip;  // first step whose chosen tokens differ
  bool diverged() const { return flip.has_value(); }
  double mean_kl() const;
  std::vector<std::vector<float>> logits_on, logits_off;  // per step, when keep_logits
};

struct PairOptions {
  std::size_t steps = 16;
  engine::Sampler sampler;
  bool layer_drift = false;  // capture hidden states and record per-layer drift at every step
  bool keep_logits = false;
};

// `on` and `off` may be the same context (each run resets it) or two contexts (e.g. different profiles).
PairedRun run_free(engine::Context& on, engine::Context& off, std::span<const int> prompt, const PairOptions& o);
// Both paths fed `forced` (its length sets the step count).
PairedRun run_teacher_forced(engine::Context& on, engine::Context& off, std::span<const int> prompt,
                             std::span<const int> forced, const PairOptions& o);

// A pair from two generations made elsewhere (e.g. a cache-ON run with noise injected into its cache against the clean
// one, protocol/src/experiments/): per-step metrics, the flip, and the logits when o.keep_logits. No layer drift.
PairedRun pair_of(Regime regime, std::span<const int> prompt, engine::GenerateResult on, engine::GenerateResult off,
                  const PairOptions& o);

// Over many runs: divergence rate, mean KL, flip-index distribution.
struct Summary {
  std::size_t runs = 0;
  std::size_t diverged = 0;
  double divergence_rate = 0.0;               // diverged / runs
  double mean_kl = 0.0;                       // mean over runs and steps of KL(p_on‖p_off)
  std::vector<std::size_t> flip_indices;      // of the diverged runs, ascending
  double mean_flip = 0.0, median_flip = 0.0;  // 0 when none diverged
};
Summary summarize(std::span<const PairedRun> runs);
std::string describe(const Summary& s);  // one line

}  // namespace kvconf::analysis
