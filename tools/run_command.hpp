// `kvconf run`: the main job on the built-in default (for now: the self-checks), with a report.
#pragma once

#include <filesystem>
#include <string>

namespace kvconf::tools {

struct RunOptions {
  std::filesystem::path out = "kvconf-out";
  std::string filter;  // run only checks whose name contains this substring
  bool list = false;   // print the checks and exit
};

// Returns the process exit status: 0 all passed, 1 a check failed, 2 bad input / cannot write.
int run_command(const RunOptions& o);

}  // namespace kvconf::tools
