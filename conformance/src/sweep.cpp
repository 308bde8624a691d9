// The kernel sweep: its shapes (quick and full), the fixed-order plan over a registry, and one item run as a
// KernelCaseRecord: every rule of its kind (kernel_rules.hpp, the list the suites and Python run) with its seed.
#include "kvconf/conformance/sweep.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kvconf/conformance/checks.hpp"
#include "kvconf/conformance/kernel_rules.hpp"
#include "kvconf/kernels/kernel_failure.hpp"

namespace kvconf::conformance {

namespace {

// A causal prefill of n_q rows ending at n_kv (the cache-OFF call), scale fl32(1/√d) as the suites use.
AttentionCase attn(std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t heads, std::size_t kv_heads,
                   std::int64_t window = 0, double softcap = 0.0, Data data = Data::normal) {
  AttentionCase c;
  c.call.shape = {n_q, n_kv, heads, kv_heads, d, d};
  c.call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  c.call.params.causal = true;
  c.call.params.window = window;
  c.call.params.scale = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  c.call.params.softcap = softcap;
  c.data = data;
  return c;
}

template <class C>
void append(std::vector<C>& to, const std::vector<C>& from) {
  for (const C& c : from) {
    bool dup = false;
    for (const C& t : to) dup = dup || t.id() == c.id();
    if (!dup) to.push_back(c);
  }
}

kernels::Reason projection_unsupported(const kernels::GemmKernel& k, const ProjectionCase& c) {
  for (std::size_t m : {c.total, c.prompt, std::size_t{1}})
    if (auto why = k.supports({m, c.n, c.k})) return why;
  return std::nullopt;
}

std::uint64_t seed(const SweepOptions& o, const char* rule, const std::string& id) {
  return o.seed ? *o.seed : seed_for(rule, id);
}

SweepItem item(const std::string& kernel, const char* kind, const std::string& case_id) {
  SweepItem it;
  it.kernel = kernel;
  it.kind = kind;
  it.case_id = case_id;
  return it;
}

}  // namespace

// Quick GEMM: decode (M = 1) and prefill rows at reductions 1024 and 2048 (the models' hidden sizes scaled down in n,
// the output count, which does not change the per-element numerics).
std::vector<GemmCase> sweep_gemm_cases(bool quick) {
  std::vector<GemmCase> v = {gemm_case(1, 64, 1024, Data::normal), gemm_case(8, 64, 1024, Data::normal),
                             gemm_case(1, 32, 2048, Data::same_sign), gemm_case(4, 32, 2048, Data::wide_range)};
  if (!quick) append(v, gemm_cases());
  return v;
}

std::vector<ProjectionCase> sweep_projection_cases(bool quick) {
  std::vector<ProjectionCase> v = {projection_case(4, 8, 64, 1024, Data::normal),
                                   projection_case(8, 12, 32, 2048, Data::same_sign)};
  if (!quick) append(v, projection_cases());
  return v;
}

std::vector<NormCase> sweep_norm_cases(bool quick) {
  std::vector<NormCase> v;
  for (const NormCase& c : norm_cases())
    if (!quick || !c.slow) v.push_back(c);
  return v;
}

// Quick attention: 4 query rows, 4 heads (GQA 1 = 4 KV heads, GQA 4 = 1 KV head), head dims 64/128/256, n_kv 16 … 512,
// a sliding window and Gemma-2's softcap 50. Full adds the suites' table and longer caches.
std::vector<AttentionCase> sweep_attention_cases(bool quick) {
  std::vector<AttentionCase> v = {
      attn(4, 16, 64, 4, 4),       attn(4, 64, 64, 4, 1),
      attn(4, 32, 128, 4, 4),      attn(4, 128, 128, 4, 1),
      attn(4, 256, 128, 4, 4),     attn(4, 512, 128, 4, 1),
      attn(4, 64, 256, 4, 4),      attn(4, 128, 256, 4, 1, 0, 50.0),  // Gemma-2: d 256, softcap
      attn(4, 256, 128, 4, 1, 64),                                    // sliding window 64
  };
  if (!quick) {
    append(v, attention_cases());
    append(v, {attn(16, 1024, 64, 8, 8), attn(16, 2048, 128, 8, 2), attn(16, 1024, 256, 8, 2, 0, 50.0)});
  }
  return v;
}

std::vector<SweepItem> sweep_plan(const kernels::Registry& reg, const SweepOptions& o) {
  std::vector<SweepItem> plan;
  auto keep = [&](SweepItem&& it) {
    if (o.filter.empty() || it.key().find(o.filter) != std::string::npos) plan.push_back(std::move(it));
  };
  for (const GemmCase& c : sweep_gemm_cases(o.quick))
    for (const auto& k : reg.gemm()) {
      SweepItem it = item(k.info.name, "gemm", c.id());
      it.gemm = c;
      keep(std::move(it));
    }
  for (const ProjectionCase& c : sweep_projection_cases(o.quick))
    for (const auto& k : reg.gemm()) {
      SweepItem it = item(k.info.name, "projection", c.id());
      it.projection = c;
      keep(std::move(it));
    }
  for (const NormCase& c : sweep_norm_cases(o.quick))
    for (const auto& k : reg.norm()) {
      SweepItem it = item(k.info.name, "norm", c.id());
      it.norm = c;
      keep(std::move(it));
    }
  for (const AttentionCase& c : sweep_attention_cases(o.quick))
    for (const auto& k : reg.attention()) {
      SweepItem it = item(k.info.name, "attention", c.id());
      it.attention = c;
      keep(std::move(it));
    }
  return plan;
}

KernelCaseRecord run_sweep_item(const kernels::Registry& reg, const SweepItem& item, const SweepOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  KernelCaseRecord r;
  r.kernel = item.kernel;
  r.kind = item.kind;
  r.case_id = item.case_id;
  const std::string& id = item.case_id;
  auto missing = [&]() {
    return std::invalid_argument("kvconf sweep: kernel '" + item.kernel + "' (" + item.kind +
                                 ") is not in the registry");
  };
  // A kernel that fails outright (an isolated plugin kernel killed by a signal, past its time limit, returning an
  // error) fails this item with rule kernel_ran, after the rules it finished; the sweep goes on.
  try {
    if (item.kind == "gemm" && item.gemm) {
      const auto* k = reg.find_gemm(item.kernel);
      if (k == nullptr) throw missing();
      const GemmCase& c = *item.gemm;
      r.seq_len = c.shape.k;
      if (auto why = k->supports(c.shape))
        r.skipped = *why;
      else
        r.rules = run_gemm_rules(*k, c, {}, o.seed);
    } else if (item.kind == "projection" && item.projection) {
      const auto* k = reg.find_gemm(item.kernel);
      if (k == nullptr) throw missing();
      const ProjectionCase& c = *item.projection;
      r.seq_len = c.k;
      if (auto why = projection_unsupported(*k, c)) {
        r.skipped = *why;
      } else {
        r.rules = run_projection_rules(*k, c, {}, o.seed);
        r.on_off = measure_projection_on_off(*k, c, seed(o, "projection_on_off", id));
      }
    } else if (item.kind == "norm" && item.norm) {
      const auto* k = reg.find_norm(item.kernel);
      if (k == nullptr) throw missing();
      const NormCase& c = *item.norm;
      r.seq_len = c.shape.d;  // the reduction length
      if (auto why = k->supports(c.shape))
        r.skipped = *why;
      else
        r.rules = run_norm_rules(*k, c, {}, o.seed);
    } else if (item.kind == "attention" && item.attention) {
      const auto* k = reg.find_attention(item.kernel);
      if (k == nullptr) throw missing();
      const AttentionCase& c = *item.attention;
      r.seq_len = c.call.shape.n_kv;
      r.head_dim = c.call.shape.d;
      if (auto why = k->supports(c.call)) {
        r.skipped = *why;
      } else {
        r.rules = run_attention_rules(*k, c, {}, o.seed);
        r.on_off = measure_attention_on_off(*k, c, seed(o, "attention_on_off", id));
      }
    } else {
      throw std::invalid_argument("kvconf sweep: item '" + item.key() + "' has kind '" + item.kind +
                                  "' without its case");
    }
  } catch (const kernels::KernelFailure& e) {
    CheckResult f;
    f.rule = "kernel_ran";
    f.pass = false;
    f.error = 1.0;
    f.headroom = -std::numeric_limits<double>::infinity();
    f.detail = e.what();
    r.rules.push_back(f);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kvconf::conformance
