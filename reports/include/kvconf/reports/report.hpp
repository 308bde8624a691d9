// The report writers' public API: rule verdicts over run-pair and kernel-case records, the four report files
// (report.json, report.md, report.html, junit.xml) of a result directory, shard merging, the terminal summary.
// The report.json schema and every rule's source are documented in docs/REPORTS.md.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvconf/results/experiment_summary.hpp"
#include "kvconf/conformance/model_rules.hpp"
#include "kvconf/results/records.hpp"

namespace kvconf::reports {

inline constexpr const char* kReportSchema = "kvconf.report/1";

struct ReportInput {
  std::string title;                                    // e.g. "kvconf run" or "kvconf model fixture:llama2-tiny"
  nlohmann::json meta;                                  // provenance: kvconf version, command line, date, host, seeds
  std::vector<results::RunPairRecord> pairs;            // any models/profiles/strategies mixed
  std::vector<results::KernelCaseRecord> kernels;       // the kernel sweep, may be empty
  std::vector<results::ExperimentSummary> experiments;  // kvconf model --experiment: findings, plots, verdicts
};

// One JUnit test case (conformance/model_rules.hpp: the model rules and the suites share it).
using RuleVerdict = results::RuleVerdict;

// The rules of docs/REPORTS.md "Rules": per model×profile FlipsAreNearTies, Fp32TokensIdentical, Fp32KlRatio,
// InvariantBitwise; per kernel case one verdict per CheckResult (skipped cases: one skipped verdict); each experiment's
// verdicts (suite "experiment.<name>.<model>.<profile>", docs/EXPERIMENTS.md). Sorted by
// suite, then name.
std::vector<RuleVerdict> evaluate_rules(const ReportInput& in);

// Writes DIR/report.json, report.md, report.html, junit.xml (each atomically, engine::write_file_atomic), and the
// same four per model×profile under DIR/<model-slug>__<profile>/ when there is more than one model×profile.
// Everything is rendered before the first file is written. Throws std::runtime_error naming the path on failure.
void write_report(const ReportInput& in, const std::filesystem::path& dir);

// Reads DIR/pairs.jsonl and DIR/kernels.jsonl (either may be absent; both absent, without an experiments.jsonl that
// the caller merges (kvconf report: protocol::summarize_experiments), is an error naming DIR) of several
// result dirs (shards) and merges them by record key(); the same key with different content (wall time aside) in
// two dirs is an error naming both dirs and the key; identical duplicates are kept once. Records are ordered by key,
// so N merged shards equal one unsharded run record for record. A torn last line (no newline, not JSON) is dropped;
// any other unparsable line is an error naming the file and line. meta: {"sources": [dirs], "manifests": [...]}.
ReportInput read_results(const std::vector<std::filesystem::path>& dirs);

// A fixed-width table: one line per model×profile×strategy condition, the model rules, kernel rules aggregated
// per kernel, and every failed verdict.
std::string terminal_summary(const ReportInput& in, const std::vector<RuleVerdict>& v);

// The pieces write_report assembles (public for tests and for re-rendering).
nlohmann::json report_json(const ReportInput& in, const std::vector<RuleVerdict>& v);  // schema kReportSchema
std::string report_markdown(const nlohmann::json& report);
std::string report_html(const nlohmann::json& report);
std::string junit_xml(const std::string& title, const std::vector<RuleVerdict>& v);
std::string slug(const std::string& model);  // "fixture:llama2-tiny" -> "fixture-llama2-tiny" (directory names)

}  // namespace kvconf::reports
