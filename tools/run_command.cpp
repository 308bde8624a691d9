// `kvconf run`: self-checks, then the quick kernel sweep and the model runs on two workers, then the report
// (report.json/md/html, junit.xml) and the terminal summary. Everything finished is on disk as it finishes
// (DIR/kernels.jsonl, DIR/models/<fixture>/pairs.jsonl), so --resume after an interruption redoes nothing finished.
#include "run_command.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli_output.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "provenance.hpp"
#include "kvconf/engine/atomic_file.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/kernels/torch.hpp"
#include "kvconf/reports/report.hpp"
#include "progress.hpp"
#include "kvconf/protocol/kernel_sweep.hpp"
#include "kvconf/protocol/result_store.hpp"
#include "kvconf/protocol/results_dir.hpp"
#include "kvconf/protocol/run_plan.hpp"
#include "selfcheck.hpp"
#include "protocol_names.hpp"

namespace kvconf::tools {

using engine::write_file_atomic;
using Clock = std::chrono::steady_clock;

namespace {

bool matches(const std::string& name, const std::string& filter) {
  return filter.empty() || name.find(filter) != std::string::npos;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The self-checks: a table on stdout, DIR/selfcheck.json; returns the JSON (for the report's meta).
nlohmann::json run_self_checks(const std::vector<SelfCheck>& checks, const std::filesystem::path& out, int& failed) {
  std::printf("== self-checks: formats, arithmetic, oracle, bounds (%zu)\n", checks.size());
  nlohmann::json report = {{"schema", "kvconf.selfcheck/1"}, {"checks", nlohmann::json::array()}};
  for (const auto& c : checks) {
    const auto t0 = Clock::now();
    CheckResult r;
    try {
      r = c.run();
    } catch (const std::exception& e) {
      r.passed = false;
      r.detail = std::string("exception: ") + e.what();
    }
    const double secs = seconds_since(t0);
    failed += !r.passed;
    std::printf("  %-28s %-4s %10llu %7.2fs  %s\n", c.name.c_str(), r.passed ? "PASS" : "FAIL",
                static_cast<unsigned long long>(r.cases), secs, r.detail.c_str());
    std::fflush(stdout);
    report["checks"].push_back({{"name", c.name},
                                {"what", c.what},
                                {"passed", r.passed},
                                {"cases", r.cases},
                                {"seconds", secs},
                                {"detail", r.detail}});
  }
  report["passed"] = failed == 0;
  write_file_atomic(out / "selfcheck.json", report.dump(2) + "\n");
  return report;
}

// The kernel sweep into DIR/kernels.jsonl (items already there are kept); returns how many items ran.
std::size_t run_kernel_sweep(const kernels::Registry& reg, const conformance::SweepOptions& so,
                             const std::vector<conformance::SweepItem>& items, const std::filesystem::path& out,
                             bool resume) {
  JsonlStore store = protocol::open_kernel_store(out / "kernels.jsonl", resume);
  std::vector<const conformance::SweepItem*> planned;
  for (const auto& item : items) planned.push_back(&item);
  return protocol::run_kernel_sweep(reg, so, planned, store);
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  auto* run = app.add_subcommand(
      "run",
      "Run the main job on the built-in default (no network needed): the self-checks, the quick kernel sweep over\n"
      "every CPU kernel, and the paper's protocol (cache-ON vs cache-OFF, free-running and teacher-forced) on the\n"
      "built-in tiny fixtures (and stories260K when ../shared is present) under every CPU profile and strategy.\n"
      "Prints a summary table; writes report.json, report.md, report.html and junit.xml to --out.\n"
      "Exit status: 0 all passed, 1 a check or conformance rule failed (or a result could not be written),\n"
      "2 bad input.");
  run->add_option("--out", o.out, "Report directory")->capture_default_str();
  run->add_option("--filter", o.filter,
                  "Run only the self-checks, kernel items (kernel|case_id) and fixtures whose name contains this text");
  run->add_flag("--list", o.list, "List what would run and exit");
  run->add_flag("--resume", o.resume, "Continue an interrupted run in --out: finished items and pairs are kept");
  return run;
}

int run_command(const RunOptions& o) {
  const auto t_start = Clock::now();
  try {
    const RunPlan plan = default_run_plan(o.out, KVCONF_FIXTURES_DIR, KVCONF_SHARED_DIR, o.resume);
    std::vector<SelfCheck> checks;
    for (auto& c : all_self_checks())
      if (matches(c.name, o.filter)) checks.push_back(std::move(c));
    conformance::SweepOptions so = plan.kernels;
    so.filter = o.filter;
    const kernels::Registry reg = kernels::sweep_registry();  // CPU emulations + libtorch kernels
    const std::vector<conformance::SweepItem> items = conformance::sweep_plan(reg, so);
    std::vector<ProtocolOptions> models;
    for (const auto& m : plan.models)
      if (matches(m.model, o.filter)) models.push_back(m);
    if (checks.empty() && items.empty() && models.empty())
      throw BadInput("no self-check, kernel item or fixture matches --filter '" + o.filter + "'");
    if (o.list) {
      for (const auto& c : checks) std::printf("selfcheck  %-28s %s\n", c.name.c_str(), c.what.c_str());
      for (const auto& i : items) std::printf("kernel     %s\n", i.key().c_str());
      for (const auto& m : models) {
        std::printf("model      %s: %zu profiles x %zu strategies x %zu prompts x %zu seed, %zu new tokens\n",
                    m.model.c_str(), m.profiles.size(), m.strategies.size(), m.n, m.seeds.size(), m.max_new_tokens);
      }
      return 0;
    }
    ensure_out_dir(o.out);

    int failed_checks = 0;
    const nlohmann::json selfcheck = checks.empty() ? nlohmann::json() : run_self_checks(checks, o.out, failed_checks);

    // Two workers (2 cores) take jobs in order: the kernel sweep and one job per fixture. Progress goes to stderr as
    // plain lines (two workers would fight over one redrawn line).
    std::printf("\n== kernel sweep: %zu items (quick shapes) -> %s\n", items.size(), (o.out / "kernels.jsonl").c_str());
    std::printf("== model runs: %zu fixtures -> %s/models/<fixture>/pairs.jsonl (2 workers)\n", models.size(),
                o.out.c_str());
    std::fflush(stdout);
    std::vector<std::function<void()>> jobs;
    std::size_t sweep_ran = 0;
    double sweep_secs = 0.0;
    if (!items.empty()) {
      jobs.push_back([&] {
        const auto t0 = Clock::now();
        sweep_ran = run_kernel_sweep(reg, so, items, o.out, o.resume);
        sweep_secs = seconds_since(t0);
      });
    }
    for (const auto& m : models) {
      jobs.push_back([&m] {
        ProgressBar bar(m.model, stderr, false, 15.0);
        run_protocol(m, [&](const Progress& p) { bar.update(p); });
        bar.finish();
      });
    }
    std::vector<std::exception_ptr> errors(jobs.size());
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
        try {
          jobs[j]();
        } catch (...) {
          errors[j] = std::current_exception();
        }
      }
    };
    std::thread second(worker);
    worker();
    second.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);  // the first failed job, in plan order
    if (!items.empty())
      std::printf("   kernel sweep: %zu items run (%zu resumed) in %.1f s\n", sweep_ran, items.size() - sweep_ran,
                  sweep_secs);
    std::vector<std::filesystem::path> dirs;
    if (!items.empty()) dirs.push_back(o.out);  // kernels.jsonl
    for (const auto& m : models) dirs.push_back(m.out);

    reports::ReportInput in = (items.empty() && models.empty()) ? reports::ReportInput{} : reports::read_results(dirs);
    in.title = "kvconf run";
    in.meta = provenance("kvconf run");
    in.meta["filter"] = o.filter;
    if (!checks.empty())
      in.meta["selfcheck"] =
          std::to_string(checks.size()) + " run, " + std::to_string(failed_checks) + " failed (selfcheck.json)";
    in.meta["seconds"] = seconds_since(t_start);
    const auto verdicts = reports::evaluate_rules(in);
    reports::write_report(in, o.out);
    std::printf("\n%s", reports::terminal_summary(in, verdicts).c_str());
    std::size_t failed_rules = 0;
    for (const auto& v : verdicts) failed_rules += !v.pass;
    std::printf("\nself-checks: %zu run, %d failed; conformance rules: %zu evaluated, %zu failed; %.1f s\n",
                checks.size(), failed_checks, verdicts.size(), failed_rules, seconds_since(t_start));
    std::printf("report: %s/report.html (also report.md, report.json, junit.xml)\n", o.out.c_str());
    return (failed_checks || failed_rules) ? 1 : 0;
  } catch (const std::exception& e) {
    // Bad input (an option, an --out that cannot be created or opened): status 2; every other failure (a full disk:
    // the file it could not write): status 1.
    return print_failure("kvconf run", e);
  }
}

}  // namespace kvconf::tools
