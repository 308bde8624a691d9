// `kvconf run`: the main job on the built-in default (kvconf/protocol/run_plan.hpp): the self-checks, the quick kernel sweep and the
// paper's protocol on the built-in fixtures, a summary table on the terminal and the full report in --out.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>

namespace kvconf::tools {

struct RunOptions {
  std::filesystem::path out = "kvconf-out";
  std::string filter;   // run only self-checks, kernel items and fixtures whose name contains this text
  bool list = false;    // print what would run and exit
  bool resume = false;  // keep the finished kernel items and run pairs of an interrupted run in --out
};

CLI::App* add_run_command(CLI::App& app, RunOptions& o);
// Returns the process exit status: 0 all passed, 1 a check or rule failed, 2 bad input / cannot write.
int run_command(const RunOptions& o);

}  // namespace kvconf::tools
