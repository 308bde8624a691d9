// kvconf_model_table [PROMPTS STEPS [FIXTURE...]]: per fixture × profile, greedy cache-ON vs cache-OFF on the fixture's
// prompts — divergence rate, mean KL in the free-running and teacher-forced regimes, flip-index distribution — as a
// Markdown table (docs/MODELS.md). A measurement program, not a test: it gates nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kvconf/analysis/paired.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/registry.hpp"

using namespace kvconf;

int main(int argc, char** argv) {
  const std::size_t n_prompts = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 8;
  const std::size_t steps = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 32;
  std::vector<std::string> only;
  for (int i = 3; i < argc; ++i) only.emplace_back(argv[i]);
  const kernels::Registry reg = kernels::cpu_registry();
  const auto all = conformance::model_fixtures(KVCONF_FIXTURES_DIR, KVCONF_SHARED_DIR);
  std::printf(
      "| fixture | profile | prompts | steps | diverged | mean KL free | mean KL teacher | max KL teacher | "
      "flip indices | s |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const conformance::ModelFixture& f : all) {
    if (only.empty() ? f.real : std::find(only.begin(), only.end(), f.name) == only.end()) continue;
    if (const auto why = conformance::fixture_missing(f)) {
      std::fprintf(stderr, "skipping %s: %s\n", f.name.c_str(), why->c_str());
      continue;
    }
    const auto prompts = conformance::fixture_prompts(f, n_prompts, 160);
    for (const engine::Profile& p : engine::builtin_profiles()) {
      const auto t0 = std::chrono::steady_clock::now();
      const engine::ProfileKernels k = engine::resolve(p, reg);
      const engine::Model& m = conformance::fixture_model(f, p.storage);
      std::vector<analysis::PairedRun> free_runs, teacher_runs;
      double max_kl_t = 0.0;
      for (const analysis::Prompt& pr : prompts) {
        engine::Context ctx(m, k);
        analysis::PairOptions o;
        o.steps = steps;
        free_runs.push_back(analysis::run_free(ctx, ctx, pr.ids, o));
        // Teacher-forced on the cache-OFF path's own tokens: both paths see the same context at every step.
        teacher_runs.push_back(analysis::run_teacher_forced(ctx, ctx, pr.ids, free_runs.back().tokens_off, o));
        for (const auto& s : teacher_runs.back().steps) max_kl_t = std::max(max_kl_t, s.kl);
      }
      const analysis::Summary sf = analysis::summarize(free_runs), st = analysis::summarize(teacher_runs);
      std::string flips;
      for (std::size_t i : sf.flip_indices) flips += (flips.empty() ? "" : " ") + std::to_string(i);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("| %s | %s | %zu | %zu | %zu/%zu (%.0f%%) | %.3e | %.3e | %.3e | %s | %.0f |\n", f.name.c_str(),
                  p.name.c_str(), prompts.size(), steps, sf.diverged, sf.runs, 100.0 * sf.divergence_rate, sf.mean_kl,
                  st.mean_kl, max_kl_t, flips.empty() ? "—" : flips.c_str(), secs);
      std::fflush(stdout);
    }
  }
  return 0;
}
