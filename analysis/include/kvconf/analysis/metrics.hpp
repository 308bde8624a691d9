// Divergence metrics between the cache-ON and cache-OFF paths (DESIGN.md "Metrics"): per step KL(p_on‖p_off) and JS
// over the full vocabulary (softmax in double), top-1/top-2 margins, the largest logit difference; per run token
// divergence and the flip index; per layer drift (L2 norm of the difference, cosine similarity).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace kvconf::analysis {

std::vector<double> log_softmax(std::span<const float> logits);  // in double, max-subtracted
// KL(p‖q) in nats of the softmaxes of two logit vectors of the same length (>= 0; 0 iff equal distributions).
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);
// Jensen–Shannon divergence in nats (symmetric, <= ln 2).
double js_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

struct Top2 {
  int top1 = -1, top2 = -1;  // arg-max and runner-up (lowest index on ties)
  double margin = 0.0;       // logit[top1] − logit[top2] (>= 0)
};
Top2 top2(std::span<const float> logits);

double max_abs_diff(std::span<const float> a, std::span<const float> b);

struct Drift {
  double l2 = 0.0;      // ‖a − b‖₂
  double cosine = 1.0;  // a·b / (‖a‖‖b‖) (1 when both are zero)
};
Drift drift(std::span<const float> a, std::span<const float> b);

// First index where the sequences differ (over the shorter length; a length difference counts at its end).
std::optional<std::size_t> flip_index(std::span<const int> a, std::span<const int> b);

// Throws std::invalid_argument when the spans' lengths differ or are empty (names the function).
void check_same_length(const char* fn, std::size_t a, std::size_t b);

}  // namespace kvconf::analysis
