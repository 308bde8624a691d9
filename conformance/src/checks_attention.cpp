// Attention checks: rule 1 (oracle accuracy, two-sided) and rule 2 (decode vs prefill, chunked vs one shot,
// unused cache slots never read, cache-capacity invariance) for one kernel on one case.
#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "attention_layout.hpp"
#include "checks_common.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::conformance {

namespace {

using detail::batch_calls;
using detail::BatchLaunch;
using detail::capacity_variants;
using detail::kBatchSizes;
using detail::make_problem;
using detail::num;
using detail::Problem;
using detail::recap;
using detail::sub_call;
using detail::unused_slots_capacity;
using kernels::AttentionCall;
using kernels::AttentionKernel;

std::vector<float> run(const AttentionKernel& kern, const AttentionCall& call, std::span<const float> q,
                       std::span<const float> k, std::span<const float> v) {
  std::vector<float> o(call.shape.n_q * call.shape.n_heads * call.shape.d_v, 0.0f);  // (n_q, H, d_v)
  kern.run(call, q, k, v, o);
  return o;
}

std::span<const float> q_rows(const Problem& p, std::size_t r0, std::size_t r1) {
  const std::size_t row = p.call.shape.n_heads * p.call.shape.d;
  return std::span<const float>(p.q).subspan(r0 * row, (r1 - r0) * row);
}

// The oracle for the query rows [r0, r1) of the problem's call, rounded to the kernel's output format.
struct Oracle {
  ref::AttentionShape shape;
  ref::AttentionParams params;
  std::vector<double> v;  // (n_kv, Hkv, d_v) as passed to the oracle
  ref::AttentionResult r;
};

Oracle oracle(const AttentionKernel& kern, const Problem& p, std::size_t r0, std::size_t r1) {
  const auto& s = p.call.shape;
  Oracle o;
  o.shape = s;
  o.shape.n_q = r1 - r0;
  o.params = p.call.params;
  o.params.q_offset += static_cast<std::int64_t>(r0);
  const auto q = detail::to_double(q_rows(p, r0, r1));
  const auto k = detail::to_double(std::span<const float>(p.k).first(s.n_kv * s.n_kv_heads * s.d));
  o.v = detail::to_double(std::span<const float>(p.v).first(s.n_kv * s.n_kv_heads * s.d_v));
  ref::OracleOptions opt;
  opt.out = kern.info.out;
  o.r = ref::attention(q, k, o.v, o.shape, o.params, kern.info.in, opt);
  return o;
}

// Per-element bounds (rows [r0, r1) of the oracle, (r1 − r0, H, d_v)) of a kernel path.
std::vector<double> bounds(const Oracle& o, const ref::AttentionPipeline& pipe, std::size_t r0, std::size_t r1) {
  const auto& s = o.shape;
  std::vector<double> b((r1 - r0) * s.n_heads * s.d_v);
  for (std::size_t i = r0; i < r1; ++i)
    for (std::size_t h = 0; h < s.n_heads; ++h)
      for (std::size_t c = 0; c < s.d_v; ++c)
        b[((i - r0) * s.n_heads + h) * s.d_v + c] =
            ref::attention_pipeline_bound(pipe, o.params, ref::element_stats(o.r, o.v, s, o.params, i, h, c));
  return b;
}

std::string where(const ref::AttentionShape& s, std::size_t index) {
  const std::size_t c = index % s.d_v, h = (index / s.d_v) % s.n_heads, i = index / (s.d_v * s.n_heads);
  return "(row " + std::to_string(i) + ", head " + std::to_string(h) + ", col " + std::to_string(c) + ")";
}

std::string notes(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed) {
  return " seed=" + std::to_string(seed) + " case=" + c.id() + " kernel=" + kern.info.name;
}

// One result from a comparison: bitwise (cache-invariant kernels) or within the sum of bounds.
// The worst element's flat index in the compared output, and in bound mode its two values (a: the side under test,
// b: the reference side), as the result's fields.
CheckResult result_of(const detail::Comparison& cmp, const std::string& base, std::uint64_t seed,
                      const std::string& what) {
  if (cmp.bitwise) {
    CheckResult r = detail::bitwise_result(base + "_bitwise", cmp.bitwise_error(), seed, what + " " + cmp.stats());
    if (cmp.differ > 0) r.worst_index = cmp.diff_index;
    return r;
  }
  CheckResult r = detail::bound_result(base + "_bound", cmp.worst.error, cmp.worst.bound, seed,
                                       what + " " + cmp.stats() + " worst a=" + num(cmp.worst_a) +
                                           " b=" + num(cmp.worst_b) +
                                           " elements_over_bound=" + std::to_string(cmp.worst.failed));
  if (cmp.worst.index < cmp.where.size()) {
    r.worst_index = cmp.where[cmp.worst.index].second;
    r.worst_value = cmp.worst_a;
    r.worst_expected = cmp.worst_b;
  }
  return r;
}

// Decode (n_q = 1 over the cache) vs the last row of the prefill. A decode case (n_q = 1) is compared against a
// prefill of min(n_kv, 16) rows ending at the same position or, for a kernel that cannot take that call (SDPA's
// CUDA flash backend takes no mask, so no bottom-right causal prefill shorter than the keys), against the full
// recompute of all n_kv rows: the cache-OFF path an engine then runs.
struct OnOff {
  AttentionCall off_call, dec_call;
  Problem p;
  std::vector<float> off_last;  // (1, H, d_v) last row of the prefill
  std::vector<float> on;        // (1, H, d_v) decode
};

kernels::Reason run_on_off(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed, OnOff& r) {
  r.off_call = c.call;
  const auto& s = c.call.shape;
  if (s.n_q == 1 && s.n_kv > 1) {
    r.off_call.shape.n_q = std::min<std::size_t>(s.n_kv, 16);
    r.off_call.params.q_offset = static_cast<std::int64_t>(s.n_kv - r.off_call.shape.n_q);
  }
  if (s.n_q == 1 && s.n_kv > 1 && kern.supports(r.off_call) && !kern.supports(c.call)) {
    r.off_call.shape.n_q = s.n_kv;
    r.off_call.params.q_offset = 0;
  }
  const std::size_t nq = r.off_call.shape.n_q;
  r.dec_call = sub_call(r.off_call, nq - 1, nq);
  for (const auto* call : {&r.off_call, &r.dec_call})
    if (auto why = kern.supports(*call)) return why;
  r.p = make_problem(kern.info.in, r.off_call, c.data, seed);
  const auto off = run(kern, r.off_call, r.p.q, r.p.k, r.p.v);
  const std::size_t row = s.n_heads * s.d_v;
  r.off_last.assign(off.end() - static_cast<std::ptrdiff_t>(row), off.end());
  r.on = run(kern, r.dec_call, q_rows(r.p, nq - 1, nq), r.p.k, r.p.v);
  return std::nullopt;
}

}  // namespace

CheckResults check_attention_matches_oracle(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed) {
  const std::string nt = notes(kern, c, seed);
  if (auto why = kern.supports(c.call)) return {detail::unsupported_result("oracle_bound", *why, seed)};
  const Problem p = make_problem(kern.info.in, c.call, c.data, seed);
  const auto& s = c.call.shape;
  const auto y = run(kern, c.call, p.q, p.k, p.v);
  const Oracle o = oracle(kern, p, 0, s.n_q);
  const ref::AttentionPipeline pipe = kern.pipeline(c.call);
  const auto b = bounds(o, pipe, 0, s.n_q);
  const auto naive = detail::naive_attention(kern.info.in, pipe.qk_spec.out, pipe.score, kern.info.out,
                                             kern.info.partial, c.call, p.q, p.k, p.v);

  detail::Worst kernel_err, naive_err;
  double max_oracle = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double exact = o.r.approx[i];
    max_oracle = std::max(max_oracle, std::fabs(exact));
    kernel_err.add(i, detail::error_up(y[i], exact), b[i]);
    naive_err.add(i, detail::error_up(naive[i], exact), std::numeric_limits<double>::infinity());
  }
  const std::size_t w = kernel_err.index;
  CheckResults res;
  res.push_back(detail::bound_result("oracle_bound", kernel_err.error, kernel_err.bound, seed,
                                     "pipeline=" + pipe.name + " worst " + where(s, w) + " kernel=" + num(y[w]) +
                                         " oracle=" + num(o.r.approx[w]) +
                                         " elements_over_bound=" + std::to_string(kernel_err.failed) +
                                         " max_error=" + num(kernel_err.max_error) + nt));
  res.back().worst_index = w;  // the numbers of the detail, as fields
  res.back().worst_value = y[w];
  res.back().worst_expected = o.r.approx[w];
  const double floor = detail::ulp(kern.info.out, max_oracle);
  const double f = detail::two_sided_factor(c.call.params.softcap);
  res.push_back(detail::bound_result("two_sided", kernel_err.max_error, f * naive_err.max_error + floor, seed,
                                     "naive eager (scores " + std::string(name(pipe.qk_spec.out)) + "/" +
                                         std::string(name(pipe.score)) + ", softmax fp32, PV accumulated in " +
                                         std::string(name(kern.info.partial)) + ") error=" + num(naive_err.max_error) +
                                         " factor=" + num(f) + " floor=ulp_" + std::string(name(kern.info.out)) + "(" +
                                         num(max_oracle) + ")=" + num(floor) + nt));
  res.back().reference_error = naive_err.max_error;  // the bound is a factor times it plus a floor
  return res;
}

CheckResults check_attention_cache_on_off(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed) {
  const std::string nt = notes(kern, c, seed);
  const bool bitwise = kern.info.cache_invariant;
  OnOff r;
  if (auto why = run_on_off(kern, c, seed, r))
    return {detail::unsupported_result(bitwise ? "on_off_bitwise" : "on_off_bound", *why, seed)};
  detail::Comparison cmp;
  cmp.out = kern.info.out;
  cmp.bitwise = bitwise;
  std::vector<double> b_on, b_off;
  if (!bitwise) {
    const std::size_t nq = r.off_call.shape.n_q;
    const Oracle o = oracle(kern, r.p, nq - 1, nq);
    b_on = bounds(o, kern.pipeline(r.dec_call), 0, 1);
    b_off = bounds(o, kern.pipeline(r.off_call), 0, 1);
  }
  for (std::size_t i = 0; i < r.on.size(); ++i)
    cmp.add(r.on[i], r.off_last[i], 0, i, bitwise ? 0.0 : b_on[i] + b_off[i]);
  const std::size_t at = bitwise ? cmp.diff_index : cmp.where[cmp.worst.index].second;
  const std::string what = "decode pipeline=" + kern.pipeline(r.dec_call).name +
                           " prefill(n_q=" + std::to_string(r.off_call.shape.n_q) +
                           ") pipeline=" + kern.pipeline(r.off_call).name + " at " + where(r.dec_call.shape, at) +
                           " on=" + num(r.on[at]) + " off=" + num(r.off_last[at]) + nt;
  CheckResult res = result_of(cmp, "on_off", seed, what);
  res.paths = kern.pipeline(r.dec_call).name + " | " + kern.pipeline(r.off_call).name;  // cache ON | cache OFF
  res.worst_index = at;
  res.worst_value = r.on[at];
  res.worst_expected = r.off_last[at];  // the cache-OFF side's value: the reference of this comparison
  return {res};
}

OnOffDiff measure_attention_on_off(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed) {
  OnOff r;
  if (auto why = run_on_off(kern, c, seed, r))
    throw std::invalid_argument("measure_attention_on_off: " + kern.info.name + " on " + c.id() + ": " + *why);
  detail::Comparison cmp;
  cmp.out = kern.info.out;
  cmp.bitwise = true;
  for (std::size_t i = 0; i < r.on.size(); ++i) cmp.add(r.on[i], r.off_last[i], 0, i);
  return {cmp.count,     cmp.differ,
          cmp.max_ulp,   cmp.max_diff,
          cmp.max_rel(), "decode=" + kern.pipeline(r.dec_call).name + " prefill=" + kern.pipeline(r.off_call).name};
}

CheckResults check_attention_chunked(const AttentionKernel& kern, const AttentionCase& c,
                                     std::span<const std::size_t> chunks, std::uint64_t seed) {
  const std::string nt = notes(kern, c, seed);
  const bool bitwise = kern.info.cache_invariant;
  const std::string rule = bitwise ? "chunked_bitwise" : "chunked_bound";
  const auto& s = c.call.shape;
  if (auto why = kern.supports(c.call)) return {detail::unsupported_result(rule, *why, seed)};
  for (std::size_t ch : chunks) {
    if (ch == 0) return {detail::unsupported_result(rule, "chunk size 0", seed)};
    for (std::size_t r0 = 0; r0 < s.n_q; r0 += ch)
      if (auto why = kern.supports(sub_call(c.call, r0, std::min(s.n_q, r0 + ch))))
        return {detail::unsupported_result(rule, "chunk " + std::to_string(ch) + ": " + *why, seed)};
  }
  const Problem p = make_problem(kern.info.in, c.call, c.data, seed);
  const auto one_shot = run(kern, c.call, p.q, p.k, p.v);
  std::optional<Oracle> o;
  std::vector<double> b_full;
  if (!bitwise) {
    o = oracle(kern, p, 0, s.n_q);
    b_full = bounds(*o, kern.pipeline(c.call), 0, s.n_q);
  }
  const std::size_t row = s.n_heads * s.d_v;
  CheckResults res;
  for (std::size_t ch : chunks) {
    detail::Comparison cmp;
    cmp.out = kern.info.out;
    cmp.bitwise = bitwise;
    std::string pipes;
    for (std::size_t r0 = 0; r0 < s.n_q; r0 += ch) {
      const std::size_t r1 = std::min(s.n_q, r0 + ch);
      const AttentionCall call = sub_call(c.call, r0, r1);
      const auto y = run(kern, call, q_rows(p, r0, r1), p.k, p.v);
      std::vector<double> b;
      if (!bitwise) b = bounds(*o, kern.pipeline(call), r0, r1);
      if (r0 == 0 || r1 == s.n_q) {
        if (!pipes.empty()) pipes += " … ";
        pipes += kern.pipeline(call).name;
      }
      for (std::size_t i = 0; i < y.size(); ++i)
        cmp.add(y[i], one_shot[r0 * row + i], r0, r0 * row + i, bitwise ? 0.0 : b[i] + b_full[r0 * row + i]);
    }
    const std::size_t at = bitwise ? cmp.diff_index : cmp.where[cmp.worst.index].second;
    std::string detail = "chunk=" + std::to_string(ch);
    detail += " chunk pipelines=" + pipes;
    detail += " one-shot pipeline=" + kern.pipeline(c.call).name;
    detail += " at " + where(s, at) + nt;
    res.push_back(result_of(cmp, "chunked", seed, detail));
  }
  return res;
}

CheckResults check_attention_chunked(const AttentionKernel& kern, const AttentionCase& c, std::size_t chunk,
                                     std::uint64_t seed) {
  const std::array<std::size_t, 1> one{chunk};
  return check_attention_chunked(kern, c, std::span<const std::size_t>(one), seed);
}

CheckResults check_attention_unused_slots(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed) {
  const std::string nt = notes(kern, c, seed);
  const auto& s = c.call.shape;
  // A capacity with a partly filled last tile of 64 rows and a whole spare tile after it.
  const std::size_t cap = unused_slots_capacity(c.call);
  AttentionCall full = c.call;
  full.capacity = cap;
  const AttentionCall dec = sub_call(full, s.n_q - 1, s.n_q);
  const AttentionCall* const both[] = {&full, &dec};
  for (const AttentionCall* call : both)
    if (auto why = kern.supports(*call)) return {detail::unsupported_result("unused_slots", *why, seed)};
  const Problem p = make_problem(kern.info.in, full, c.data, seed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto k_nan = recap(p.k, s.n_kv_heads * s.d, s.n_kv, cap, nan);
  const auto v_nan = recap(p.v, s.n_kv_heads * s.d_v, s.n_kv, cap, nan);
  std::size_t bad = 0, count = 0;
  std::string first_what;
  for (const AttentionCall* call : both) {
    const std::size_t r0 = call == &dec ? s.n_q - 1 : 0;
    const auto q = q_rows(p, r0, s.n_q);
    const auto clean = run(kern, *call, q, p.k, p.v);
    const auto poisoned = run(kern, *call, q, k_nan, v_nan);
    for (std::size_t i = 0; i < clean.size(); ++i) {
      ++count;
      const bool changed = std::bit_cast<std::uint32_t>(clean[i]) != std::bit_cast<std::uint32_t>(poisoned[i]);
      const bool nonfinite = !std::isfinite(poisoned[i]);
      // A nondeterministic kernel may change bits run to run: only NaN/inf counts against it.
      if (nonfinite || (changed && kern.info.deterministic)) {
        if (bad++ == 0) {
          first_what = std::string(call == &dec ? "decode" : "prefill") + " " + where(call->shape, i) +
                       " finite-fill=" + num(clean[i]) + " NaN-fill=" + num(poisoned[i]);
        }
      }
    }
  }
  return {detail::bitwise_result("unused_slots", static_cast<double>(bad), seed,
                                 "capacity=" + std::to_string(cap) + " n_kv=" + std::to_string(s.n_kv) +
                                     " elements changed by NaN in rows [n_kv, capacity)=" + std::to_string(bad) + "/" +
                                     std::to_string(count) + (bad ? " first: " + first_what : "") + nt)};
}

CheckResults check_attention_capacity(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed) {
  const std::string nt = notes(kern, c, seed);
  const bool bitwise = kern.info.cache_invariant;
  const std::string base = "capacity";
  const auto& s = c.call.shape;
  // The reference capacity n_kv (no spare rows), against one spare row, a tile-rounded cache, a doubled one and the
  // case's own capacity.
  const std::vector<std::size_t> caps = capacity_variants(c.call);
  AttentionCall ref_full = c.call;
  ref_full.capacity = s.n_kv;
  const AttentionCall ref_dec = sub_call(ref_full, s.n_q - 1, s.n_q);
  std::vector<AttentionCall> calls = {ref_full, ref_dec};
  for (std::size_t cap : caps) {
    AttentionCall f = c.call;
    f.capacity = cap;
    calls.push_back(f);
    calls.push_back(sub_call(f, s.n_q - 1, s.n_q));
  }
  for (const auto& call : calls)
    if (auto why = kern.supports(call))
      return {detail::unsupported_result(base + (bitwise ? "_bitwise" : "_bound"), *why, seed)};
  const Problem p = make_problem(kern.info.in, c.call, c.data, seed);
  const std::size_t krow = s.n_kv_heads * s.d, vrow = s.n_kv_heads * s.d_v, row = s.n_heads * s.d_v;
  auto run_at = [&](const AttentionCall& call, std::size_t r0) {
    const std::size_t cap = call.cap();
    return run(kern, call, q_rows(p, r0, s.n_q), recap(p.k, krow, s.n_kv, cap, std::nullopt),
               recap(p.v, vrow, s.n_kv, cap, std::nullopt));
  };
  const auto ref_out_full = run_at(ref_full, 0);
  const auto ref_out_dec = run_at(ref_dec, s.n_q - 1);
  std::optional<Oracle> o;
  std::vector<double> b_ref_full, b_ref_dec;
  if (!bitwise) {
    o = oracle(kern, p, 0, s.n_q);
    b_ref_full = bounds(*o, kern.pipeline(ref_full), 0, s.n_q);
    b_ref_dec = bounds(*o, kern.pipeline(ref_dec), s.n_q - 1, s.n_q);
  }
  detail::Comparison cmp;
  cmp.out = kern.info.out;
  cmp.bitwise = bitwise;
  for (std::size_t j = 2; j < calls.size(); ++j) {
    const bool is_dec = j % 2 == 1;
    const std::size_t r0 = is_dec ? s.n_q - 1 : 0;
    const auto y = run_at(calls[j], r0);
    const auto& ref_y = is_dec ? ref_out_dec : ref_out_full;
    std::vector<double> b;
    if (!bitwise) b = bounds(*o, kern.pipeline(calls[j]), r0, s.n_q);
    const auto& b_ref = is_dec ? b_ref_dec : b_ref_full;
    for (std::size_t i = 0; i < y.size(); ++i)
      cmp.add(y[i], ref_y[i], j, r0 * row + i, bitwise ? 0.0 : b[i] + b_ref[i]);
  }
  const std::size_t ctx = bitwise ? cmp.diff_ctx : cmp.where[cmp.worst.index].first;
  const std::size_t at = bitwise ? cmp.diff_index : cmp.where[cmp.worst.index].second;
  std::string cap_list;
  for (std::size_t cap : caps) {
    if (!cap_list.empty()) cap_list += ',';
    cap_list += std::to_string(cap);
  }
  const std::string what = "reference capacity=" + std::to_string(s.n_kv) + " vs capacities " + cap_list +
                           (calls.size() > 2 ? " worst at " + std::string(ctx % 2 ? "decode" : "prefill") +
                                                   " capacity=" + std::to_string(calls[ctx].cap()) + " " + where(s, at)
                                             : "") +
                           nt;
  return {result_of(cmp, base, seed, what)};
}

BatchLaunch batch_launch(const AttentionKernel& kern, const AttentionCall& alone, Data data, std::size_t size,
                         std::uint64_t seed) {
  BatchLaunch b = batch_calls(alone, size);
  for (std::size_t i = 0, j = 0; i < size; ++i)
    if (i == b.target)
      b.others.emplace_back();
    else
      b.others.push_back(make_problem(kern.info.in, b.calls[i], data, detail::sub_seed(seed, "batch_seq") + j++));
  return b;
}

std::optional<std::string> attention_batch_unchecked(const AttentionKernel& kern, const AttentionCase& c) {
  const AttentionCall alone = sub_call(c.call, c.call.shape.n_q - 1, c.call.shape.n_q);
  if (auto why = kern.supports(alone)) return why;
  if (kern.run_batch) {
    // A launch the kernel declines (SDPA's flash backend takes no padded batch's mask) is not run, as a call it
    // declines is not: the check would report it unsupported.
    for (std::size_t size : kBatchSizes) {
      const std::vector<AttentionCall> calls = batch_calls(alone, size).calls;
      for (const AttentionCall& call : calls)
        if (auto why = kern.supports(call))
          return "a sequence of its batched launch of " + std::to_string(size) + ": " + *why;
      if (kern.supports_batch)
        if (auto why = kern.supports_batch(calls))
          return "its batched launch of " + std::to_string(size) + " sequences: " + *why;
    }
    return std::nullopt;
  }
  for (std::size_t size : kBatchSizes) {
    AttentionCall in_batch = alone;
    in_batch.batch = size;
    if (kern.pipeline(in_batch).name != kern.pipeline(alone).name) return std::nullopt;
  }
  // One sequence per call and a plan that does not read the batch size: the same arithmetic in any batch by
  // construction, so there is no batched path to check (a pass would prove nothing).
  return "launches one sequence per call and its launch plan (" + kern.pipeline(alone).name +
         ") does not read the batch size: no batched path to check";
}

CheckResults check_attention_batch_invariance(const AttentionKernel& kern, const AttentionCase& c, std::uint64_t seed) {
  const std::string nt = notes(kern, c, seed);
  const bool bitwise = kern.info.cache_invariant;
  const std::string base = std::string("batch") + (bitwise ? "_bitwise" : "_bound");
  const auto& s = c.call.shape;
  const std::size_t r0 = s.n_q - 1;
  // The last row decoded alone, and the same row inside batched decode launches of 4 and 64 sequences.
  const AttentionCall alone = sub_call(c.call, r0, s.n_q);
  const std::vector<std::size_t> sizes(kBatchSizes.begin(), kBatchSizes.end());
  if (auto why = attention_batch_unchecked(kern, c)) return {detail::unsupported_result(base, *why, seed)};
  const Problem p = make_problem(kern.info.in, c.call, c.data, seed);
  std::vector<BatchLaunch> launches;
  for (std::size_t size : sizes) {
    launches.push_back(batch_launch(kern, alone, c.data, size, seed));
    for (const auto& call : launches.back().calls)
      if (auto why = kern.supports(call)) return {detail::unsupported_result(base, *why, seed)};
    if (kern.run_batch && kern.supports_batch)
      if (auto why = kern.supports_batch(launches.back().calls)) return {detail::unsupported_result(base, *why, seed)};
  }
  const std::size_t krow = s.n_kv_heads * s.d, vrow = s.n_kv_heads * s.d_v, row = s.n_heads * s.d_v;
  const auto k_alone = recap(p.k, krow, s.n_kv, alone.cap(), std::nullopt);
  const auto v_alone = recap(p.v, vrow, s.n_kv, alone.cap(), std::nullopt);
  const auto y_alone = run(kern, alone, q_rows(p, r0, s.n_q), k_alone, v_alone);
  std::optional<Oracle> o;
  std::vector<double> b_alone;
  if (!bitwise) {
    o = oracle(kern, p, r0, s.n_q);  // the last row only: its bounds are the oracle's row 0
    b_alone = bounds(*o, kern.pipeline(alone), 0, 1);
  }
  detail::Comparison cmp;
  cmp.out = kern.info.out;
  cmp.bitwise = bitwise;
  std::string paths = kern.pipeline(alone).name, lengths;
  for (std::size_t j = 0; j < launches.size(); ++j) {
    const BatchLaunch& l = launches[j];
    std::vector<std::vector<float>> outs(l.calls.size());
    std::vector<kernels::AttentionSeq> seqs;
    for (std::size_t i = 0; i < l.calls.size(); ++i) {
      const AttentionCall& call = l.calls[i];
      outs[i].assign(call.shape.n_q * call.shape.n_heads * call.shape.d_v, 0.0f);  // (1, H, d_v)
      if (const auto& op = l.others[i])
        seqs.push_back({call, op->q, op->k, op->v, outs[i]});
      else
        seqs.push_back({call, q_rows(p, r0, s.n_q), k_alone, v_alone, outs[i]});
    }
    kernels::run_attention_batch(kern, seqs);
    const std::vector<float>& y = outs[l.target];
    const AttentionCall& target = l.calls[l.target];
    paths += " | batch " + std::to_string(sizes[j]) + ": " + kern.pipeline(target).name;
    lengths += (lengths.empty() ? "" : ", ") + std::to_string(sizes[j]) + " sequences (n_kv " +
               std::to_string(l.min_kv) + ".." + std::to_string(l.max_kv) + ", this one at " +
               std::to_string(l.target) + ")";
    std::vector<double> b;
    if (!bitwise) b = bounds(*o, kern.pipeline(target), 0, 1);
    for (std::size_t i = 0; i < y.size(); ++i)
      cmp.add(y[i], y_alone[i], j + 1, r0 * row + i, bitwise ? 0.0 : b[i] + b_alone[i]);
  }
  const std::size_t ctx = bitwise ? cmp.diff_ctx : cmp.where[cmp.worst.index].first;
  const std::size_t at = bitwise ? cmp.diff_index : cmp.where[cmp.worst.index].second;
  const std::string what = "decode row alone vs inside " +
                           std::string(kern.run_batch ? "the kernel's batched launch" : "per-sequence launches") +
                           " of " + lengths + " (" + paths + "); worst at batch " +
                           std::to_string(ctx == 0 ? 1 : sizes[std::min(ctx, sizes.size()) - 1]) + " " + where(s, at) +
                           nt;
  return {result_of(cmp, "batch", seed, what)};
}

}  // namespace kvconf::conformance
