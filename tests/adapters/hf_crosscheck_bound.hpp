// The transformers cross-check's bound (docs/MODELS.md "transformers as the first engine checked"), in one place for
// every test that compares an engine's fp32 logits with kvconf's fp32 engine (HfCrossCheck, HfSmolLM2).
#pragma once

#include <vector>

#include "trace_dirs.hpp"

namespace kvconf::testing {

// B = 4·S32 over one token sequence: S32 = max_s ‖z_alt,s − z32,s‖∞, kvconf's fp32 logits `z32` (T, V) against the
// same fp32 arithmetic summed in other orders, `alt` (T, V) (conformance::reordered_fp32_kernels), both cache OFF over
// the same tokens. An engine's fp32 logits agree with kvconf's when max_s ‖z_engine,s − z32,s‖∞ <= B.
inline double crosscheck_bound(const std::vector<std::vector<float>>& alt, const std::vector<std::vector<float>>& z32) {
  return 4.0 * max_diff(alt, z32);
}

}  // namespace kvconf::testing
