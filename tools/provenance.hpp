// Provenance for reports and result files: kvconf version, the command, UTC date and host.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvconf::tools {

// {"kvconf_version", "command", "date" (UTC, ISO 8601), "host", "torch"}; callers add their options. "torch" describes
// the libtorch the torch kernels ran on (loading it: ~0.35 s) when the command can run them (describe_torch), and is
// "not loaded (...)" for a command that runs none (kvconf check).
nlohmann::json provenance(const std::string& command, bool describe_torch = true);

}  // namespace kvconf::tools
