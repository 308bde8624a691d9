// Provenance for reports and result files: kvconf version, the command, UTC date and host.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvconf::tools {

// {"kvconf_version", "command", "date" (UTC, ISO 8601), "host"}; callers add their options.
nlohmann::json provenance(const std::string& command);

}  // namespace kvconf::tools
