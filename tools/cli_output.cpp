// What kvconf's commands print alike (cli_output.hpp).
#include "cli_output.hpp"

#include <cstdio>

#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::tools {

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

int print_failure(const std::string& command, const std::exception& e) {
  if (dynamic_cast<const protocol::BadInput*>(&e)) {
    std::fprintf(stderr, "%s: %s\n", command.c_str(), one_line(e.what()).c_str());
    return 2;
  }
  std::fprintf(stderr, "%s: error: %s\n", command.c_str(), one_line(e.what()).c_str());
  return 1;
}

std::size_t write_report_with_summary(const reports::ReportInput& in, const std::string& out) {
  const auto verdicts = reports::evaluate_rules(in);
  reports::write_report(in, out);
  std::printf("\n%s", reports::terminal_summary(in, verdicts).c_str());
  std::size_t failed = 0;
  for (const auto& v : verdicts) failed += !v.pass;
  std::printf("report: %s/report.html (also report.md, report.json, junit.xml)\n", out.c_str());
  return failed;
}

std::size_t print_failed_pairs(const std::vector<results::RunPairRecord>& records, const std::string& command) {
  std::size_t failed = 0;
  for (const results::RunPairRecord& p : records)
    if (!results::all_pass(p.rules)) {
      if (failed < 5)
        for (const results::CheckResult& x : p.rules)
          if (!x.pass)
            std::printf("FAIL %s %s: error=%.6g bound=%.6g %s\n", p.key().c_str(), x.rule.c_str(), x.error, x.bound,
                        x.detail.c_str());
      ++failed;
    }
  if (failed) std::printf("%s: %zu of %zu pairs failed a rule\n", command.c_str(), failed, records.size());
  return failed;
}

}  // namespace kvconf::tools
