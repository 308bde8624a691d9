// A paired run as the record stores it (per step KL, JS, margins, largest logit difference; tokens; flip): shared by
// the protocol runner and kvconf check's trace pairs.
#pragma once

#include "kvconf/analysis/paired.hpp"
#include "kvconf/conformance/records.hpp"

namespace kvconf::protocol {

inline conformance::RegimeRecord regime_record(const analysis::PairedRun& r) {
  conformance::RegimeRecord g;
  g.tokens_on = r.tokens_on;
  g.tokens_off = r.tokens_off;
  g.flip = r.flip;
  for (const analysis::StepMetrics& s : r.steps) {
    g.kl.push_back(s.kl);
    g.js.push_back(s.js);
    g.margin_on.push_back(s.top_on.margin);
    g.margin_off.push_back(s.top_off.margin);
    g.max_abs_logit_diff.push_back(s.max_abs_logit_diff);
  }
  return g;
}

}  // namespace kvconf::protocol
