// `kvconf model --experiment NAME|all` (docs/EXPERIMENTS.md): the experiments over the protocol's plan
// (protocol::run_experiments), a one-line summary per experiment, and the report with their findings, plots and rules.
#pragma once

#include "model_command.hpp"

namespace kvconf::tools {

// 0: every experiment rule passes; 1: a rule failed; 2: bad input (one stderr line).
int experiment_command(const ModelCliOptions& c);

}  // namespace kvconf::tools
