// Free-running and teacher-forced generation with one path (generate.hpp).
#include "kvconf/engine/generate.hpp"

#include <stdexcept>
#include <vector>

namespace kvconf::engine {

const char* cache_mode_name(CacheMode m) { return m == CacheMode::on ? "on" : "off"; }

namespace {

// Runs steps; next(t) gives the token fed after step t (free-running: the chosen one; teacher-forced: forced[t]).
template <class Next>
GenerateResult run(Context& ctx, std::span<const int> prompt, CacheMode mode, std::size_t steps,
                   const GenerateOptions& o, Next next) {
  if (prompt.empty()) throw std::invalid_argument("kvconf::engine::generate: the prompt is empty");
  ctx.reset();
  GenerateResult res;
  std::vector<int> seq(prompt.begin(), prompt.end());
  std::vector<float> logits;
  for (std::size_t t = 0; t < steps; ++t) {
    if (mode == CacheMode::off)
      logits = ctx.recompute(seq, o.forward);
    else if (t == 0)
      logits = ctx.prefill(seq, o.forward);
    else
      logits = ctx.decode(seq.back(), o.forward);
    const int tok = sample(o.sampler, logits, step_draw(o.sampler.seed, t));
    res.tokens.push_back(tok);
    if (o.keep_logits) res.logits.push_back(logits);
    if (o.hook) o.hook(t, logits, tok);
    const int fed = next(t, tok);
    if (o.stop_at_eos && fed == ctx.model().config.eos_token_id) break;
    seq.push_back(fed);
  }
  return res;
}

}  // namespace

GenerateResult generate(Context& ctx, std::span<const int> prompt, CacheMode mode, const GenerateOptions& o) {
  return run(ctx, prompt, mode, o.steps, o, [](std::size_t, int tok) { return tok; });
}

GenerateResult teacher_forced(Context& ctx, std::span<const int> prompt, std::span<const int> forced, CacheMode mode,
                              const GenerateOptions& o) {
  return run(ctx, prompt, mode, forced.size(), o, [forced](std::size_t t, int) { return forced[t]; });
}

}  // namespace kvconf::engine
