// What one experiment of `kvconf model --experiment` (protocol/src/experiments/) found over a run's records: the
// question, findings in words, a table, plots, and the verdicts of its gating rules. The protocol library fills it;
// the report writers (reports/) render it into report.json, report.md, report.html and junit.xml. docs/EXPERIMENTS.md.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kvconf/results/check_result.hpp"

namespace kvconf::results {

struct ExperimentSeries {
  std::string name;
  std::string style = "line";  // "line", "points" or "bars"
  std::vector<double> x, y;    // same length; non-finite y are skipped when drawn
};

struct ExperimentPlot {
  std::string title, xlabel, ylabel;
  std::vector<ExperimentSeries> series;
};

// One gating rule's verdict over a group of records: suite "experiment.<name>.<model>.<profile>", result.rule its
// name; result.error/bound/headroom from the worst record, detail naming that record.
struct ExperimentVerdict {
  std::string suite;
  CheckResult result;
  std::size_t records = 0;  // records the rule was evaluated on
};

struct ExperimentSummary {
  std::string name;                            // "kv_patching"
  std::string title;                           // "Direct KV-cache patching"
  std::string question;                        // what it answers, one sentence
  std::vector<std::string> findings;           // one sentence each, with numbers
  std::vector<std::string> columns;            // the table: header ...
  std::vector<std::vector<std::string>> rows;  // ... and rows (cells already formatted)
  std::vector<ExperimentPlot> plots;
  std::vector<ExperimentVerdict> verdicts;
  std::size_t records = 0;
  double seconds = 0.0;   // summed wall time of its records (the cost; seconds per pair = seconds / pairs)
  std::size_t pairs = 0;  // run pairs (profile, strategy, seed, prompt) it covered
};

}  // namespace kvconf::results
