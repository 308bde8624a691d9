// The built-in default of `kvconf run`: which kernel sweep and which model runs make up the main job, sized to finish
// in under 3 minutes on 2 cores (the figures are in docs/REPORTS.md). One place, so the README, the tests and the
// command agree.
#pragma once

#include <filesystem>
#include <vector>

#include "kvconf/conformance/sweep.hpp"
#include "kvconf/protocol/protocol.hpp"

namespace kvconf::protocol {

struct RunPlan {
  conformance::SweepOptions kernels;    // the quick sweep over every CPU kernel
  std::vector<ProtocolOptions> models;  // one per fixture; out = <dir>/models/<fixture>
};

// The fixtures present (stories260K only when shared_dir holds it), each under every CPU profile and strategy.
RunPlan default_run_plan(const std::filesystem::path& out, const std::filesystem::path& fixtures_dir,
                         const std::filesystem::path& shared_dir, bool resume);

}  // namespace kvconf::protocol
