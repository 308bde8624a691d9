// Which properties an attention case exercises (GQA maps, windows, softcaps, score ranges, spare capacity, chunking),
// computed from the case's own fields, so that a case set's coverage can be compared with the full table's.
#pragma once

#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"

namespace kvconf::conformance {

// The scores s = scale·q·k the case's inputs give (make_problem's draws): `max_abs` the expected largest |s| over its
// n_q·heads·n_kv scores (|E s| + sd·√(2 ln N), the leading term of the maximum of N normals), `gap` how far a
// typical score sits below its row's largest (over n_kv keys); `capped_*` after the case's softcap, if any.
struct ScoreScale {
  double mean = 0.0;     // E[s]
  double sd = 0.0;       // standard deviation of s
  double max_abs = 0.0;  // before the softcap
  double capped_max_abs = 0.0;
  double capped_gap = 0.0;
};
ScoreScale score_scale(const AttentionCase& c);

// The properties of one case, sorted (coverage.cpp lists each with the bug it exposes).
std::vector<std::string> attention_properties(const AttentionCase& c);

// The properties some case of `reference` has and no case of `set` has, sorted.
std::vector<std::string> uncovered_properties(const std::vector<AttentionCase>& set,
                                              const std::vector<AttentionCase>& reference);

}  // namespace kvconf::conformance
