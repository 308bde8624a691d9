// PairUnit (experiment.hpp): the runs every experiment of one pair shares, each computed on first use.
#include <algorithm>
#include <cmath>

#include "experiment.hpp"
#include "kvconf/analysis/metrics.hpp"

namespace kvconf::protocol::experiments {
namespace {

double max_abs_diff(const Logits& a, const Logits& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace

const analysis::PairedRun& PairUnit::free() {
  if (!free_) {
    analysis::PairOptions po = po_;
    po.keep_logits = true;
    po.layer_drift = false;
    free_ = analysis::run_free(ctx_, ctx_, prompt_.ids, po);
  }
  return *free_;
}

const std::vector<Logits>& PairUnit::teacher_on() {
  if (!teacher_on_) teacher_on_ = cache_on_teacher_forced(ctx_, prompt_.ids, free().tokens_off);
  return *teacher_on_;
}

const std::vector<Logits>& PairUnit::ref_along(const std::vector<int>& tokens) {
  for (const auto& [t, z] : ref_memo_)
    if (t == tokens) return z;
  std::vector<Logits> z;
  std::vector<int> seq = prompt_.ids;
  for (int tok : tokens) {
    z.push_back(ref_.recompute(seq));
    seq.push_back(tok);
  }
  ref_memo_.emplace_back(tokens, std::move(z));
  return ref_memo_.back().second;
}

const std::vector<double>& PairUnit::S_off() {
  if (!S_off_) {
    const analysis::PairedRun& f = free();
    const std::vector<Logits>& z = ref_along(f.tokens_off);
    std::vector<double> S;
    double s = 0.0;
    for (std::size_t t = 0; t < z.size() && t < f.logits_off.size(); ++t) {
      s = std::max(s, max_abs_diff(f.logits_off[t], z[t]));
      S.push_back(s);
    }
    S_off_ = std::move(S);
  }
  return *S_off_;
}

double PairUnit::mean_kl(const std::vector<Logits>& a, const std::vector<Logits>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  if (n == 0) return 0.0;
  double s = 0.0;
  for (std::size_t t = 0; t < n; ++t) s += analysis::kl_divergence(a[t], b[t]);
  return s / static_cast<double>(n);
}

std::vector<Logits> cache_on_teacher_forced(engine::Context& ctx, const std::vector<int>& prompt,
                                            const std::vector<int>& forced, const BeforeDecode& before) {
  std::vector<Logits> out;
  if (forced.empty()) return out;
  ctx.reset();
  out.push_back(ctx.prefill(prompt));
  for (std::size_t t = 1; t < forced.size(); ++t) {
    engine::ForwardOptions fo;
    if (before) before(t, ctx, fo);
    out.push_back(ctx.decode(forced[t - 1], fo));
  }
  return out;
}

}  // namespace kvconf::protocol::experiments
