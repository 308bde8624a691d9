// The tables report.md and report.html both show (internal), built from report.json alone so a re-rendered report
// equals the original: verdicts, conditions, statistics, ours beside the paper, the paper's Table 1, kernels.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvconf::reports::detail {

struct Table {
  std::string id;     // anchor, "conditions"
  std::string title;  // section heading
  std::string note;   // a paragraph under the heading (plain text)
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row_class;  // per row: "fail", "skip" or "" (HTML colouring)
};

std::vector<Table> report_tables(const nlohmann::json& report);
std::string summary_line(const nlohmann::json& report);  // "N verdicts: P passed, F failed, S skipped; …"

}  // namespace kvconf::reports::detail
