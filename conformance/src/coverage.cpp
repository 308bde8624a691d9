// The properties an attention case exercises, from its fields (shape, mask, softcap, capacity, data), and the
// coverage of a case set against another.
#include "kvconf/conformance/coverage.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace kvconf::conformance {

namespace {

// make_problem (checks_attention.cpp) scales wide-range q and k by 2^-4 (V is not part of the scores).
double qk_scale(Data d) { return d == Data::wide_range ? 0x1p-4 : 1.0; }

// The expected largest of n draws of a standard normal, to leading order: √(2 ln n) (0 for n ≤ 1).
double normal_max(double n) { return n > 1.0 ? std::sqrt(2.0 * std::log(n)) : 0.0; }

// A score above which one fp16 rounding moves it by 2^-6 or more (half an ulp in [32, 64)), as much as fp16's
// rounding of a probability near 1 several times over.
constexpr double kLargeScore = 32.0;
// e^s within a factor e² of fp16's largest finite value 65504: a softmax that does not subtract the row's max
// overflows fp16 there.
const double kNearExpOverflow = std::log(65504.0) - 2.0;
// A typical key's probability e^-gap below 2^-24, fp16's smallest subnormal: flushed to zero in fp16.
const double kFlushGap = 24.0 * std::log(2.0);

}  // namespace

ScoreScale score_scale(const AttentionCase& c) {
  const auto& s = c.call.shape;
  const auto& p = c.call.params;
  const DataMoments m = data_moments(c.data, qk_scale(c.data));
  const double d = static_cast<double>(s.d);
  ScoreScale r;
  // s = scale·Σ q_i k_i over d independent products: E = scale·d·μ², Var = scale²·d·(E[x²]² − μ⁴).
  r.mean = p.scale * d * m.mean * m.mean;
  r.sd = p.scale * std::sqrt(d * std::max(0.0, m.second * m.second - m.mean * m.mean * m.mean * m.mean));
  const double n_scores = static_cast<double>(s.n_q * s.n_heads * s.n_kv);
  const double cap = p.softcap;
  auto capped = [cap](double x) { return cap > 0 ? cap * std::tanh(x / cap) : x; };
  r.max_abs = std::abs(r.mean) + r.sd * normal_max(n_scores);
  r.capped_max_abs = capped(r.max_abs);
  r.capped_gap = capped(r.mean + r.sd * normal_max(static_cast<double>(s.n_kv))) - capped(r.mean);
  return r;
}

// Each property, and the bug a case without it lets through:
//   heads.mha / heads.mqa        one KV head per query head / one for all: their maps
//   heads.gqa                    ≥ 2 KV heads and ≥ 2 query heads per KV head: a wrong q-head → KV-head map (h % H_kv
//                                for h / group) is visible only here
//   head_dim.<d>                 the head dims of the table's models (64, 128, 256): per-d code paths
//   keys.one                     the first token (one key): empty blocks, divisions by n_kv − 1
//   keys.partial_tile            n_kv not a multiple of 64: a partly filled last tile
//   keys.long                    n_kv ≥ 512: several tiles and splits of the cache
//   rows.one                     the whole case one decode row
//   rows.chunks_of_4             n_q > 4: the chunked rule's chunks of 4 rows are several multi-row calls, each at
//                                its own offset over the cache filled so far
//   mask.noncausal               no causal mask
//   mask.window                  a sliding window narrower than the cache (keys outside it for the last row): an
//                                off-by-one window
//   mask.window_noncausal        a symmetric (non-causal) window that binds
//   softcap / softcap.binds      a logit softcap, and one the scores reach (|s| ≥ softcap / 2: tanh far from linear)
//   capacity.spare               capacity > n_kv: unused cache rows a kernel must not read
//   scores.large                 |s| ≥ 32: scores kept in fp16 are off by up to 2^-6 there (test_default_set.py: a
//                                decode keeping them in fp16 is caught on such cases only)
//   scores.near_exp_overflow     e^max|s| near fp16's overflow: a softmax without the max subtracted overflows
//   scores.p_flush               a typical key's probability below 2^-24: flushed to zero in fp16
//   inputs.one_sign              q, k, v mostly of one sign (E[x]² > E[x²] / 2): sums without cancellation
//   inputs.wide_range            magnitudes over 2^16 (Data::wide_range)
std::vector<std::string> attention_properties(const AttentionCase& c) {
  const auto& s = c.call.shape;
  const auto& p = c.call.params;
  std::vector<std::string> out;
  auto add = [&out](bool has, const char* name) {
    if (has) out.emplace_back(name);
  };
  const std::size_t group = s.n_kv_heads ? s.n_heads / s.n_kv_heads : 0;
  add(s.n_heads >= 2 && s.n_kv_heads == s.n_heads, "heads.mha");
  add(s.n_heads >= 2 && s.n_kv_heads == 1, "heads.mqa");
  add(s.n_kv_heads >= 2 && group >= 2, "heads.gqa");
  out.push_back("head_dim." + std::to_string(s.d));
  add(s.d_v != s.d, "head_dim.dv_differs");
  add(s.n_kv == 1, "keys.one");
  add(s.n_kv % 64 != 0, "keys.partial_tile");
  add(s.n_kv >= 512, "keys.long");
  add(s.n_q == 1, "rows.one");
  add(s.n_q > 4, "rows.chunks_of_4");
  const bool window = p.window > 0 && static_cast<std::size_t>(p.window) < s.n_kv;
  add(!p.causal, "mask.noncausal");
  add(window, "mask.window");
  add(window && !p.causal, "mask.window_noncausal");
  const ScoreScale sc = score_scale(c);
  add(p.softcap > 0, "softcap");
  add(p.softcap > 0 && sc.max_abs >= p.softcap / 2, "softcap.binds");
  add(c.call.cap() > s.n_kv, "capacity.spare");
  add(sc.capped_max_abs >= kLargeScore, "scores.large");
  add(sc.capped_max_abs >= kNearExpOverflow, "scores.near_exp_overflow");
  add(sc.capped_gap > kFlushGap, "scores.p_flush");
  const DataMoments m = data_moments(c.data);
  add(m.mean * m.mean > m.second / 2, "inputs.one_sign");
  add(c.data == Data::wide_range, "inputs.wide_range");
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> uncovered_properties(const std::vector<AttentionCase>& set,
                                              const std::vector<AttentionCase>& reference) {
  std::set<std::string> have, want;
  for (const auto& c : set)
    for (auto& p : attention_properties(c)) have.insert(std::move(p));
  for (const auto& c : reference)
    for (auto& p : attention_properties(c))
      if (!have.count(p)) want.insert(std::move(p));
  return {want.begin(), want.end()};
}

}  // namespace kvconf::conformance
