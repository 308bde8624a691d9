// `kvconf run`: executes the self-checks, prints a table, writes DIR/selfcheck.json and
// DIR/summary.md atomically.
#include "run_command.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvconf/engine/atomic_file.hpp"
#include "selfcheck.hpp"

namespace kvconf::tools {

using engine::write_file_atomic;

int run_command(const RunOptions& o) {
  std::vector<SelfCheck> checks;
  for (auto& c : all_self_checks())
    if (o.filter.empty() || c.name.find(o.filter) != std::string::npos) checks.push_back(std::move(c));
  if (checks.empty()) {
    std::fprintf(stderr, "kvconf run: no self-check matches --filter '%s'\n", o.filter.c_str());
    return 2;
  }
  if (o.list) {
    for (const auto& c : checks) std::printf("%-28s %s\n", c.name.c_str(), c.what.c_str());
    return 0;
  }
  {
    // Fail before doing any work if the report directory cannot be created.
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec || !std::filesystem::is_directory(o.out)) {
      std::fprintf(stderr, "kvconf run: cannot create output directory %s: %s\n", o.out.c_str(),
                   ec ? ec.message().c_str() : "a file of that name exists");
      return 2;
    }
  }
  std::printf("kvconf run: the kernel and model suites are not built yet; running the %zu built-in\n"
              "self-checks of the formats, arithmetic, oracle and bounds (unit level).\n\n",
              checks.size());
  std::printf("%-28s %-6s %10s %8s  %s\n", "check", "status", "cases", "time(s)", "detail");
  nlohmann::json report = {{"schema", "kvconf.selfcheck/1"}, {"checks", nlohmann::json::array()}};
  std::ostringstream md;
  md << "# kvconf self-checks\n\n| check | status | cases | time (s) | detail |\n|---|---|---|---|---|\n";
  int failed = 0;
  for (const auto& c : checks) {
    const auto t0 = std::chrono::steady_clock::now();
    CheckResult r;
    try {
      r = c.run();
    } catch (const std::exception& e) {
      r.passed = false;
      r.detail = std::string("exception: ") + e.what();
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    failed += !r.passed;
    std::printf("%-28s %-6s %10llu %8.2f  %s\n", c.name.c_str(), r.passed ? "PASS" : "FAIL",
                static_cast<unsigned long long>(r.cases), secs, r.detail.c_str());
    std::fflush(stdout);
    report["checks"].push_back({{"name", c.name}, {"what", c.what}, {"passed", r.passed}, {"cases", r.cases},
                                {"seconds", secs}, {"detail", r.detail}});
    md << "| " << c.name << " | " << (r.passed ? "PASS" : "FAIL") << " | " << r.cases << " | " << secs << " | "
       << r.detail << " |\n";
  }
  report["passed"] = failed == 0;
  try {
    write_file_atomic(o.out / "selfcheck.json", report.dump(2) + "\n");
    write_file_atomic(o.out / "summary.md", md.str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvconf run: %s\n", e.what());
    return 2;
  }
  std::printf("\n%zu checks, %d failed. Report: %s/selfcheck.json, %s/summary.md\n", checks.size(), failed,
              o.out.c_str(), o.out.c_str());
  return failed ? 1 : 0;
}

}  // namespace kvconf::tools
