// report_markdown: report.md, the report's tables as GitHub-flavoured Markdown (docs/REPORTS.md "report.md").
#include "kvconf/reports/report.hpp"
#include "report_tables.hpp"

namespace kvconf::reports {

namespace {

std::string cell(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|')
      o += "\\|";
    else if (c == '\n')
      o += ' ';
    else
      o += c;
  }
  return o;
}

}  // namespace

std::string report_markdown(const nlohmann::json& r) {
  std::string o = "# " + r.value("title", std::string("kvconf report")) + "\n\n";
  o += "Schema `" + r.value("schema", std::string()) + "` (docs/REPORTS.md). " + detail::summary_line(r) + ".\n\n";
  if (r.contains("meta") && r["meta"].is_object() && !r["meta"].empty()) {
    o += "Provenance:\n\n";
    for (const auto& [k, v] : r["meta"].items())
      o += "- " + cell(k) + ": `" + cell(v.is_string() ? v.get<std::string>() : v.dump()) + "`\n";
    o += "\n";
  }
  for (const auto& t : detail::report_tables(r)) {
    o += "## " + t.title + "\n\n";
    if (!t.note.empty()) o += t.note + "\n\n";
    o += "|";
    for (const auto& h : t.header) o += " " + cell(h) + " |";
    o += "\n|";
    for (std::size_t i = 0; i < t.header.size(); ++i) o += "---|";
    o += "\n";
    for (const auto& row : t.rows) {
      o += "|";
      for (const auto& c : row) o += " " + cell(c) + " |";
      o += "\n";
    }
    if (t.rows.empty()) o += "\n(none)\n";
    o += "\n";
  }
  o += "Plots (KL per decode step, flip-index histogram, per-layer drift, oracle error vs sequence length and head "
       "dimension, and each experiment's plots) are in report.html.\n";
  return o;
}

}  // namespace kvconf::reports
