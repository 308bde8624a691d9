// `kvconf check` (check_command.hpp): read and pair the traces, check each pair (kvconf::protocol trace_check), print
// a table per profile, write the report as kvconf model does.
#include "check_command.hpp"

#include <cstdio>
#include <exception>
#include <map>

#include "cli_output.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/trace_check.hpp"
#include "kvconf/reports/report.hpp"
#include "provenance.hpp"

namespace kvconf::tools {
namespace {

using protocol::BadInput;

void print_summary(const protocol::TraceCheckResult& r) {
  struct Group {
    std::size_t pairs = 0, diverged = 0, failed = 0, prefill_differs = 0;
    double kl = 0.0;
  };
  std::map<std::string, Group> groups;
  for (const results::RunPairRecord& p : r.records) {
    Group& g = groups[p.model + "  " + p.profile + "  " + p.strategy];
    ++g.pairs;
    g.diverged += p.free.flip.has_value();
    g.failed += !results::all_pass(p.rules);
    for (const auto& x : p.rules) g.prefill_differs += x.rule == "prefill_logits_bitwise" && !x.pass;
    g.kl += p.free.mean_kl();
  }
  std::printf("%-52s %6s %9s %11s %9s %6s\n", "model  profile  strategy", "pairs", "diverged", "meanKL", "prefill≠",
              "fails");
  for (const auto& [k, g] : groups)
    std::printf("%-52s %6zu %8.1f%% %11.3e %9zu %6zu\n", k.c_str(), g.pairs, 100.0 * g.diverged / g.pairs,
                g.kl / g.pairs, g.prefill_differs, g.failed);
}

}  // namespace

CLI::App* add_check_command(CLI::App& app, CheckCliOptions& o) {
  auto* c = app.add_subcommand(
      "check",
      "Apply kvconf model's rules to an engine's own cache-ON / cache-OFF runs, or to the two sides of a scenario\n"
      "(prefix, chunked, refill, restore, batch, preempt, kv_dtype: docs/SCENARIOS.md), given as kvconf.trace/1,\n"
      "/1.1 or /1.2 files (docs/TRACES.md): --on A --off B for one pair, or --dir D for every pair in a folder. With\n"
      "--model, kvconf's fp32 engine replays each prompt as the near-tie rule's reference and says which path is\n"
      "closer to fp32 at the first flip. Writes OUT/pairs.jsonl and the report (report.html, report.md, report.json,\n"
      "junit.xml).\n"
      "Exit 0: every rule passes; 1: a rule failed; 2: bad input (a bad trace: one line naming the file and field).");
  c->add_option("--on", o.on, "The cache-ON trace of one pair (a scenario's \"scenario\" side)");
  c->add_option("--off", o.off, "The cache-OFF trace of that pair (a scenario's \"reference\" side)");
  c->add_option("--dir", o.dir, "A folder of traces, paired by model, dtype, engine, strategy and prompt");
  c->add_option("--model", o.model, "The checkpoint (folder, config.json or llama2.c .bin) for the fp32 replay");
  c->add_option("--out", o.out, "Results directory")->capture_default_str();
  c->add_flag("--resume", o.resume, "Continue the check in --out: pairs already recorded are not redone");
  c->add_flag("--expect-bitwise", o.expect_bitwise,
              "The engine claims determinism (vLLM's batch-invariant mode, SGLang's deterministic mode): every pair's\n"
              "logits and tokens must be equal bit for bit (rule scenario_bitwise)");
  return c;
}

int check_command(const CheckCliOptions& c) {
  protocol::TraceCheckResult r;
  std::size_t failed_rules = 0;
  try {
    std::vector<protocol::TracePair> pairs;
    protocol::TraceCheckOptions o;
    if (!c.dir.empty()) {
      if (!c.on.empty() || !c.off.empty()) throw BadInput("give either --dir or --on and --off, not both");
      pairs = protocol::read_trace_folder(c.dir);
      o.inputs = {c.dir};
    } else {
      if (c.on.empty() || c.off.empty()) throw BadInput("--on and --off are both required (or --dir)");
      pairs.push_back(protocol::make_trace_pair(protocol::read_trace(c.on), protocol::read_trace(c.off)));
      o.inputs = {c.on, c.off};
    }
    o.model = c.model;
    o.out = c.out;
    o.resume = c.resume;
    o.expect_bitwise = c.expect_bitwise;
    r = protocol::run_trace_check(pairs, o);
    std::printf("kvconf check: %zu pairs (%zu checked now, %zu resumed) in %s/pairs.jsonl\n", r.records.size(), r.ran,
                r.resumed, c.out.c_str());
    print_summary(r);
    if (r.replay_max_diff >= 0)
      std::printf("fp32 replay (kvconf engine, prefill then decode over an fp32 cache): max |z_off - z_fp32| = %.6g\n",
                  r.replay_max_diff);
    reports::ReportInput in;
    in.title = "kvconf check " + (c.dir.empty() ? c.on + " " + c.off : c.dir);
    in.pairs = r.records;
    in.meta = provenance("kvconf check", false);  // no torch kernel: libtorch is not loaded for its version
    in.meta.update({{"traces", o.inputs}, {"model", c.model}, {"pairs", r.records.size()}});
    failed_rules = write_report_with_summary(in, c.out);
  } catch (const std::exception& e) {
    return print_failure("kvconf check", e);
  }
  const std::size_t failed = print_failed_pairs(r.records, "kvconf check");
  return (failed || failed_rules) ? 1 : 0;
}

}  // namespace kvconf::tools
