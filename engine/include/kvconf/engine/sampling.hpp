// Decoding strategies: greedy, top-k and top-p with temperature. Both paths of a comparison use the same uniform
// draw u at each step (step_draw), so a difference in the chosen token comes from the logits alone.
// Defaults k = 50, p = 0.9, T = 1.0 (the seed paper does not state its values; docs/ENGINE.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvconf::engine {

enum class Strategy : std::uint8_t { greedy, top_k, top_p };

struct Sampler {
  Strategy strategy = Strategy::greedy;
  std::size_t top_k = 50;
  double top_p = 0.9;
  double temperature = 1.0;
  std::uint64_t seed = 0;    // the draws of a run
  std::string name() const;  // "greedy", "topk50_t1", "topp0.9_t1"
};

// "greedy" | "topk" | "topp" (with the defaults); throws std::invalid_argument listing the choices.
Strategy parse_strategy(std::string_view s);
// The inverse of parse_strategy: "greedy" | "topk" | "topp" (records, case ids).
const char* strategy_key(Strategy s);

// The uniform draw in [0, 1) of step `step` of a run with this seed (SplitMix64; the same for both paths).
double step_draw(std::uint64_t seed, std::size_t step);

// The token chosen from full-vocabulary logits. Greedy: the arg-max (lowest index on ties). Top-k / top-p: softmax
// (in double) of logits / T over the kept tokens — the k largest, or the smallest prefix of the tokens sorted by
// probability whose mass reaches p (at least one) — then, walking the kept tokens in vocabulary order, the token where
// the cumulative mass first exceeds u. Throws std::invalid_argument on empty logits, T <= 0, k = 0, p outside (0, 1].
int sample(const Sampler& s, std::span<const float> logits, double u);

}  // namespace kvconf::engine
