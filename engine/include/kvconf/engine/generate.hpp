// Generation with one path (cache-ON: prefill + decode; cache-OFF: recompute at every step), free-running or
// teacher-forced. Step t's logits follow the prompt and the t tokens before it; the token of step t is sampled from
// them with the draw step_draw(seed, t), the same draw for both paths.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "kvconf/engine/context.hpp"
#include "kvconf/engine/sampling.hpp"

namespace kvconf::engine {

enum class CacheMode : std::uint8_t { on, off };
const char* cache_mode_name(CacheMode m);  // "on", "off"

// Called after each step with that step's logits and chosen token (hooks may read ctx.trace()).
using StepHook = std::function<void(std::size_t step, std::span<const float> logits, int token)>;

struct GenerateOptions {
  std::size_t steps = 16;
  Sampler sampler;
  bool keep_logits = false;  // store every step's logits in the result
  bool stop_at_eos = false;  // stop after generating eos_token_id (off: comparisons run a fixed number of steps)
  ForwardOptions forward;    // applied to every call
  StepHook hook;
};

struct GenerateResult {
  std::vector<int> tokens;                 // generated tokens (prompt excluded)
  std::vector<std::vector<float>> logits;  // per step, when keep_logits
};

// Free-running: each step feeds back this path's own token. ctx is reset first.
GenerateResult generate(Context& ctx, std::span<const int> prompt, CacheMode mode, const GenerateOptions& o);

// Teacher-forced: step t's logits follow prompt + forced[0..t); `tokens` are the tokens this path would have chosen.
// Runs forced.size() steps (o.steps is ignored). ctx is reset first.
GenerateResult teacher_forced(Context& ctx, std::span<const int> prompt, std::span<const int> forced, CacheMode mode,
                              const GenerateOptions& o);

}  // namespace kvconf::engine
