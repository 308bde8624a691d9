// `kvconf report --in DIR… --out DIR`: (re)render the report of one or more result folders (shards of one run are
// merged record by record), and exit 1 when a conformance rule fails.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

namespace kvconf::tools {

struct ReportCliOptions {
  std::vector<std::filesystem::path> in;  // folders holding pairs.jsonl and/or kernels.jsonl
  std::filesystem::path out;              // where report.{json,md,html} and junit.xml go
  std::string title = "kvconf report";
  bool partial = false;  // report a run with planned pairs missing (else exit 2)
};

CLI::App* add_report_command(CLI::App& app, ReportCliOptions& o);
int report_command(const ReportCliOptions& o);  // 0 all rules pass, 1 a rule failed, 2 bad input

}  // namespace kvconf::tools
