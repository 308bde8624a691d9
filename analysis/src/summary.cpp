// Summaries of paired runs: per run mean KL, and over many runs the divergence rate, mean KL(p_on‖p_off) and the
// distribution of flip indices.
#include <algorithm>
#include <cstdio>

#include "kvconf/analysis/paired.hpp"

namespace kvconf::analysis {

const char* regime_name(Regime r) { return r == Regime::free_running ? "free" : "teacher"; }

double PairedRun::mean_kl() const {
  if (steps.empty()) return 0.0;
  double s = 0.0;
  for (const StepMetrics& m : steps) s += m.kl;
  return s / static_cast<double>(steps.size());
}

Summary summarize(std::span<const PairedRun> runs) {
  Summary s;
  s.runs = runs.size();
  double kl_sum = 0.0;
  std::size_t kl_steps = 0;
  for (const PairedRun& r : runs) {
    for (const StepMetrics& m : r.steps) kl_sum += m.kl;
    kl_steps += r.steps.size();
    if (r.flip) {
      ++s.diverged;
      s.flip_indices.push_back(*r.flip);
    }
  }
  if (s.runs > 0) s.divergence_rate = static_cast<double>(s.diverged) / static_cast<double>(s.runs);
  if (kl_steps > 0) s.mean_kl = kl_sum / static_cast<double>(kl_steps);  // pooled over every step of every run
  std::sort(s.flip_indices.begin(), s.flip_indices.end());
  const std::size_t n = s.flip_indices.size();
  if (n > 0) {
    double sum = 0.0;
    for (std::size_t f : s.flip_indices) sum += static_cast<double>(f);
    s.mean_flip = sum / static_cast<double>(n);
    s.median_flip =
        n % 2 == 1
            ? static_cast<double>(s.flip_indices[n / 2])
            : 0.5 * (static_cast<double>(s.flip_indices[n / 2 - 1]) + static_cast<double>(s.flip_indices[n / 2]));
  }
  return s;
}

std::string describe(const Summary& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%zu runs, %zu diverged (%.1f%%), mean KL %.3g", s.runs, s.diverged,
                100.0 * s.divergence_rate, s.mean_kl);
  std::string out = buf;
  if (s.diverged > 0) {
    std::snprintf(buf, sizeof buf, ", flip index mean %.2f median %g (min %zu, max %zu)", s.mean_flip, s.median_flip,
                  s.flip_indices.front(), s.flip_indices.back());
    out += buf;
  }
  return out;
}

}  // namespace kvconf::analysis
