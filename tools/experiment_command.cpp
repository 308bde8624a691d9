// `kvconf model --experiment` (experiment_command.hpp).
#include "experiment_command.hpp"

#include <cstdio>
#include <exception>

#include "cli_output.hpp"
#include "kvconf/protocol/experiments.hpp"
#include "kvconf/reports/report.hpp"
#include "progress.hpp"

namespace kvconf::tools {

int experiment_command(const ModelCliOptions& c) {
  std::size_t failed_rules = 0;
  try {
    const ProtocolOptions o = protocol_options(c);
    const std::vector<std::string> names = protocol::parse_experiments(c.experiment);
    ProgressBar bar("kvconf model --experiment");
    const protocol::ExperimentsResult r =
        protocol::run_experiments(o, names, [&bar](const Progress& p) { bar.update(p); });
    bar.finish();
    std::printf("kvconf model --experiment: %zu records (%zu run now, %zu resumed) in %s/experiments.jsonl\n",
                r.records.size(), r.ran, r.resumed, o.out.c_str());
    std::printf("%-20s %8s %8s %10s %12s\n", "experiment", "records", "rules", "failed", "s/pair");
    for (const results::ExperimentSummary& s : r.summaries) {
      std::size_t failed = 0;
      for (const results::ExperimentVerdict& v : s.verdicts) failed += !v.result.pass;
      std::printf("%-20s %8zu %8zu %10zu %12.4f\n", s.name.c_str(), s.records, s.verdicts.size(), failed,
                  s.records ? s.seconds / double(s.records) : 0.0);
      for (const std::string& f : s.findings) std::printf("  %s\n", f.c_str());
    }
    reports::ReportInput in;
    in.title = "kvconf model --experiment " + c.experiment + " " + o.model;
    in.experiments = r.summaries;
    in.meta = model_report_meta("kvconf model --experiment", o);
    in.meta["experiments"] = names;
    failed_rules = write_report_with_summary(in, o.out);
  } catch (const std::exception& e) {
    return print_failure("kvconf model", e);
  }
  if (failed_rules) std::printf("kvconf model --experiment: %zu conformance rules failed\n", failed_rules);
  return failed_rules ? 1 : 0;
}

}  // namespace kvconf::tools
