// `kvconf report`: read and merge result folders, write the report, print the summary (report_command.hpp).
#include "report_command.hpp"

#include <cstdio>
#include <exception>
#include <map>

#include "kvconf/reports/report.hpp"
#include "provenance.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/experiments.hpp"
#include "kvconf/protocol/result_store.hpp"
#include "kvconf/protocol/shard_check.hpp"

namespace kvconf::tools {

CLI::App* add_report_command(CLI::App& app, ReportCliOptions& o) {
  auto* rep = app.add_subcommand(
      "report",
      "Render or re-render reports from result folders (DIR/pairs.jsonl, DIR/kernels.jsonl). Several --in folders\n"
      "(the shards of one run, --shard I/N) are merged record by record; the same record with different content in\n"
      "two folders is an error. Each `kvconf model` run among them (the folders whose manifest.json has the same\n"
      "options but --shard) must hold every planned pair exactly once: a pair missing (unless --partial) or in two\n"
      "folders is an error naming the pair and the folders. Writes report.json, report.md, report.html and junit.xml\n"
      "to --out.\n"
      "Exit status: 0 all conformance rules pass, 1 a rule failed, 2 bad input.");
  rep->add_option("--in", o.in, "Result folder(s) to read (repeat, or list several)")->required()->expected(1, -1);
  rep->add_option("--out", o.out, "Folder for the report files")->required();
  rep->add_option("--title", o.title, "Report title")->capture_default_str();
  rep->add_flag("--partial", o.partial, "Report runs whose planned pairs are not all there yet (unfinished shards)");
  return rep;
}

// Every DIR/experiments.jsonl (kvconf model --experiment shards) merged by record key and summarised: the same key
// with other content (wall time aside) in two folders is an error naming both.
static std::vector<results::ExperimentSummary> merged_experiments(const std::vector<std::filesystem::path>& dirs) {
  std::map<std::string, std::pair<nlohmann::json, std::string>> by_key;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(d / "experiments.jsonl", ec)) continue;
    for (nlohmann::json& r : protocol::read_jsonl(d / "experiments.jsonl")) {
      const std::string key = protocol::experiment_record_key(r);
      auto timeless = [](nlohmann::json j) {
        j.erase("seconds");
        return j;
      };
      const auto it = by_key.find(key);
      if (it == by_key.end())
        by_key.emplace(key, std::make_pair(std::move(r), d.string()));
      else if (timeless(it->second.first) != timeless(r))
        throw protocol::BadInput("experiment record " + key + " differs between " + it->second.second + " and " +
                                 d.string());
    }
  }
  std::vector<nlohmann::json> records;
  records.reserve(by_key.size());
  for (auto& [_, v] : by_key) records.push_back(std::move(v.first));
  return records.empty() ? std::vector<results::ExperimentSummary>{} : protocol::summarize_experiments(records);
}

int report_command(const ReportCliOptions& o) {
  try {
    for (const auto& d : o.in)
      if (!std::filesystem::is_directory(d)) throw std::runtime_error("--in " + d.string() + ": not a folder");
    reports::ReportInput in = reports::read_results(o.in);
    const protocol::ShardCoverage coverage = protocol::check_shard_coverage(o.in, o.partial);
    for (const std::string& note : coverage.notes) std::printf("kvconf report: %s\n", note.c_str());
    in.experiments = merged_experiments(o.in);
    in.title = o.title;
    nlohmann::json dirs = nlohmann::json::array();
    for (const auto& d : o.in) dirs.push_back(d.string());
    in.meta = provenance("kvconf report");
    in.meta["inputs"] = dirs;
    const auto verdicts = reports::evaluate_rules(in);
    reports::write_report(in, o.out);
    std::printf("%s", reports::terminal_summary(in, verdicts).c_str());
    std::size_t failed = 0;
    for (const auto& v : verdicts) failed += !v.pass;
    std::printf("\n%zu run pairs, %zu kernel cases, %zu rules, %zu failed. Report: %s/report.html\n", in.pairs.size(),
                in.kernels.size(), verdicts.size(), failed, o.out.c_str());
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvconf report: %s\n", e.what());
    return 2;
  }
}

}  // namespace kvconf::tools
