// `kvconf check`: kvconf model's rules and reports on the cache-ON / cache-OFF traces (kvconf.trace/1, docs/TRACES.md)
// of any engine, with kvconf's fp32 engine replaying the prompts when the checkpoint is given.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace kvconf::tools {

struct CheckCliOptions {
  std::string on, off;  // one pair
  std::string dir;      // or every pair in a folder
  std::string model;    // checkpoint for the fp32 replay (optional)
  std::string out = "kvconf-out";
  bool resume = false;
  bool expect_bitwise = false;  // every pair bitwise (engines that claim determinism)
};

CLI::App* add_check_command(CLI::App& app, CheckCliOptions& o);
// 0: every pair's rules and the report's rules pass; 1: a rule failed; 2: bad input (one stderr line).
int check_command(const CheckCliOptions& o);

}  // namespace kvconf::tools
