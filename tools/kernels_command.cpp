// `kvconf kernels`: plans the sweep, runs this shard's items not yet in DIR/kernels.jsonl (appended and fsync'ed one by
// one), records the sweep's options in DIR/manifest.json (member "kernels") so --resume refuses a different sweep,
// and prints one table row per item.
#include "kernels_command.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "kvconf/numerics/number_text.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "provenance.hpp"
#include "kvconf/conformance/sweep.hpp"
#include "kvconf/kernels/plugin.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/kernels/torch.hpp"
#include "kvconf/reports/report.hpp"
#include "kvconf/protocol/kernel_sweep.hpp"
#include "kvconf/protocol/result_store.hpp"
#include "protocol_names.hpp"

namespace kvconf::tools {

namespace {

using nlohmann::json;
using results::KernelCaseRecord;

std::uint64_t parse_seed(const std::string& s) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || s[0] == '-')
    throw BadInput("--seed '" + s + "': expected a non-negative integer (decimal or 0x hex)");
  return v;
}

json manifest_of(const KernelsCliOptions& o, const Shard& shard, const conformance::SweepOptions& so) {
  json m = {{"command", "kernels"},
            {"kvconf_version", KVCONF_VERSION},
            {"filter", o.filter},
            {"quick", o.quick},
            {"seed", so.seed ? json(*so.seed) : json(nullptr)},
            {"shard", shard.str()}};
  if (!o.plugins.empty()) m["plugins"] = o.plugins;  // a sweep of plugin kernels resumes only on the same plugins
  return m;
}

// --plugin: the listed plugins' kernels only; a refused plugin is bad input (exit 2, one line naming it).
kernels::Registry plugin_sweep_registry(const std::vector<std::string>& libs) {
  try {
    return kernels::plugin_registry(libs);
  } catch (const kernels::PluginError& e) {
    throw BadInput(e.what());
  }
}

// The rule whose error is against the oracle (or, for projections, the ON vs OFF bound): the row's error columns.
const results::CheckResult* headline(const KernelCaseRecord& r) {
  for (const char* name : {"oracle_bound", "on_off_bound", "on_off_bitwise"})
    for (const auto& c : r.rules)
      if (c.rule == name) return &c;
  return r.rules.empty() ? nullptr : &r.rules.front();
}

void print_row(const KernelCaseRecord& r) {
  std::string rules;
  std::size_t passed = 0;
  std::string failed;
  for (const auto& c : r.rules) {
    passed += c.pass;
    if (!c.pass) failed += (failed.empty() ? "" : ",") + c.rule;
  }
  if (!r.skipped.empty())
    rules = "skip";
  else if (failed.empty())
    rules = std::to_string(passed) + "/" + std::to_string(r.rules.size()) + " pass";
  else
    rules = "FAIL " + failed;
  std::string err = "-", bound = "-", head = "-";
  if (const auto* h = headline(r)) {
    err = h->rule + "=" + num_short(h->error);
    bound = num_short(h->bound);
    head = num_short(h->headroom);
  }
  std::string onoff = "-";
  if (r.on_off)
    onoff = num_short(r.on_off->max_ulp) + " ulp, " + std::to_string(r.on_off->differing) + "/" +
            std::to_string(r.on_off->elements);
  std::printf("%-26s %-52s %-14s %-22s %-9s %-9s %s\n", r.kernel.c_str(), r.case_id.c_str(), rules.c_str(), err.c_str(),
              bound.c_str(), head.c_str(), r.skipped.empty() ? onoff.c_str() : r.skipped.c_str());
  std::fflush(stdout);
}

int run(const KernelsCliOptions& o) {
  const Shard shard = parse_shard(o.shard);
  conformance::SweepOptions so;
  so.filter = o.filter;
  so.quick = o.quick;
  if (!o.seed.empty()) so.seed = parse_seed(o.seed);
  // CPU emulations + libtorch kernels, or with --plugin the plugins' kernels.
  const kernels::Registry reg = o.plugins.empty() ? kernels::sweep_registry() : plugin_sweep_registry(o.plugins);
  const auto plan = conformance::sweep_plan(reg, so);
  if (plan.empty())
    throw BadInput("--filter '" + o.filter + "' matches no item of the " + (o.quick ? "quick " : "") +
                   "sweep (items are keyed \"kernel|case_id\"; see --list)");
  std::vector<const conformance::SweepItem*> mine;
  for (std::size_t i = 0; i < plan.size(); ++i)
    if (shard.owns(i)) mine.push_back(&plan[i]);

  if (o.list) {
    for (const auto* it : mine) std::printf("%-10s %s\n", it->kind.c_str(), it->key().c_str());
    std::printf("%zu items (shard %s of %zu)\n", mine.size(), shard.str().c_str(), plan.size());
    return 0;
  }

  std::set<std::string> planned;
  for (const auto* it : mine) planned.insert(it->key());
  std::optional<JsonlStore> opened;
  std::vector<KernelCaseRecord> records =
      protocol::open_kernel_sweep(o.out, manifest_of(o, shard, so), o.resume, planned, opened);
  JsonlStore& store = *opened;
  if (store.dropped_torn_line())
    std::fprintf(stderr, "kvconf kernels: dropped a torn last line of %s (an interrupted write); redoing it\n",
                 store.file().c_str());

  std::printf("kvconf kernels: %zu items (%s sweep, shard %s)%s -> %s\n", mine.size(), o.quick ? "quick" : "full",
              shard.str().c_str(), o.resume ? ", resuming" : "", store.file().c_str());
  std::printf("%-26s %-52s %-14s %-22s %-9s %-9s %s\n", "kernel", "case", "rules", "error (rule)", "bound", "headroom",
              "cache ON vs OFF (max ulp, differing/elements)");
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t resumed = records.size();
  for (const auto& r : records) print_row(r);
  const std::size_t ran = protocol::run_kernel_sweep(reg, so, mine, store, [&records](KernelCaseRecord&& r) {
    print_row(r);
    records.push_back(std::move(r));
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::size_t failed_items = 0, failed_rules = 0, skipped = 0, rules = 0;
  for (const auto& r : records) {
    skipped += !r.skipped.empty();
    rules += r.rules.size();
    std::size_t f = 0;
    for (const auto& c : r.rules) f += !c.pass;
    failed_rules += f;
    failed_items += f > 0;
  }
  // The report of this folder: one JUnit test case per rule and case, the oracle-error plots, the kernel table.
  reports::ReportInput in;
  in.title = "kvconf kernels";
  in.kernels = records;
  in.meta = provenance("kvconf kernels");
  in.meta.update({{"filter", o.filter}, {"quick", o.quick}, {"shard", shard.str()}});
  reports::write_report(in, o.out);
  std::printf(
      "\n%zu items (%zu run, %zu resumed, %zu skipped), %zu rules, %zu failed in %zu items; %.1f s. Records: %s\n",
      records.size(), ran, resumed, skipped, rules, failed_rules, failed_items, secs, store.file().c_str());
  std::printf("report: %s/report.html (also report.md, report.json, junit.xml)\n", o.out.c_str());
  return failed_rules ? 1 : 0;
}

}  // namespace

CLI::App* add_kernels_command(CLI::App& app, KernelsCliOptions& o) {
  auto* c = app.add_subcommand(
      "kernels",
      "The kernel sweep alone: every CPU kernel on standard shapes (GEMM, K/V projection, RMSNorm, attention over "
      "head\n"
      "dims 64/128/256, GQA 1 and 4, windows, softcap), each checked against the MPFR oracle within its a-priori\n"
      "bound and cache-ON (decode) against cache-OFF (prefill / full recompute). Records go to DIR/kernels.jsonl;\n"
      "a table of oracle errors and cache-ON vs OFF differences is printed. Exit 0: all rules pass; 1: a rule\n"
      "failed; 2: bad input.");
  c->add_option("--filter", o.filter, "Only items whose \"kernel|case_id\" contains this text (e.g. a1_flash2, d256)");
  c->add_flag("--quick", o.quick, "Only the standard shapes of kvconf run (seconds); default: also the full tables");
  c->add_option("--out", o.out, "Output directory DIR: DIR/kernels.jsonl and DIR/manifest.json")->capture_default_str();
  c->add_flag("--resume", o.resume, "Continue DIR/kernels.jsonl of an interrupted sweep; finished items are kept");
  c->add_option("--shard", o.shard, "I/N: run only items i with i % N == I (0 <= I < N), for fan-out")
      ->capture_default_str();
  c->add_option("--seed", o.seed, "One seed for every rule (default: derived per case id; KVCONF_SEED also overrides)");
  c->add_flag("--list", o.list, "Print this shard's items (kind, kernel|case_id) and exit");
  c->add_option("--plugin", o.plugins,
                "Sweep the kernels of this plugin (a shared library speaking include/kvconf/plugin.h; repeatable)\n"
                "instead of the built-in ones; each runs in its own worker process (docs/PLUGIN.md)");
  return c;
}

int kernels_command(const KernelsCliOptions& o) {
  try {
    return run(o);
  } catch (const BadInput& e) {
    std::fprintf(stderr, "kvconf kernels: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvconf kernels: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace kvconf::tools
