// PropagationConformance (the seed paper's Experiment 2): an L-layer stack of attention + residual steps,
// h_{l+1} = fl(h_l + attn(q = k = v = h_l)), computed cache-OFF (each layer one prefill call over all T tokens) and
// cache-ON (a prefill over the first T − 1 tokens, then one decode call per layer for the last token over the
// cache), with an attention kernel of the registry. Per layer, the measured max |h_ON − h_OFF| over all tokens must
// stay within the bound composed across layers in docs/TOLERANCES.md "Propagation (Experiment 2)"; cache-invariant
// kernels must give 0 at every layer. Names: <Backend>/PropagationConformance.LayersWithinComposedBound/<kernel>__<case>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/kernels/mutants.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::conformance::propagation {
namespace {

using kernels::AttentionCall;
using kernels::AttentionKernel;

struct StackCase {
  std::size_t layers = 4;
  std::size_t tokens = 32;  // T: prompt T − 1, then one decode step
  std::size_t d = 64;       // head dim
  std::size_t heads = 2;    // MHA: q, k and v of head h are columns [h·d, (h+1)·d) of h_l
  bool slow = false;
  std::string id() const {
    return "L" + std::to_string(layers) + "_t" + std::to_string(tokens) + "_d" + std::to_string(d) + "_h" +
           std::to_string(heads);
  }
  std::size_t width() const { return heads * d; }
};

// Scores τ·q·k with τ = 1/(4d) (a power of two for d = 64, 128: exact), so that with q = k = h ~ N(0, 1) the self
// score is ≈ 1/4 and the others ≈ N(0, 1/(16d)): the logits' sensitivity τ·(‖q‖₁ + ‖k‖₁) stays below ~1 per unit
// of input difference; v = fl(h/4), so that a token attending mostly to itself grows by at most 5/4 per layer.
constexpr double kVScale = 0.25;
AttentionCall make_call(const StackCase& c, std::size_t n_q, std::size_t n_kv) {
  AttentionCall call;
  call.shape = {n_q, n_kv, c.heads, c.heads, c.d, c.d};
  call.params.q_offset = static_cast<std::int64_t>(n_kv - n_q);
  call.params.causal = true;
  call.params.scale = 0.25 / static_cast<double>(c.d);
  call.capacity = c.tokens;
  return call;
}

std::vector<float> run(const AttentionKernel& k, const AttentionCall& call, std::span<const float> q,
                       std::span<const float> k_cache, std::span<const float> v_cache) {
  std::vector<float> o(call.shape.n_q * call.shape.n_heads * call.shape.d_v);  // (n_q, H, d)
  k.run(call, q, k_cache, v_cache, o);
  return o;
}

// v = fl(h·kVScale) in the kernel's input format (exact unless it underflows).
std::vector<float> values_of(Format f, const std::vector<float>& h) {
  std::vector<float> v(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) v[i] = kernels::round_double(f, static_cast<double>(h[i]) * kVScale);
  return v;
}

// h + a rounded to the kernel's output format, elementwise.
std::vector<float> residual(Format f, const std::vector<float>& h, const std::vector<float>& a) {
  std::vector<float> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    out[i] = kernels::round_double(f, static_cast<double>(h[i]) + static_cast<double>(a[i]));
  return out;
}

// One layer of both paths. h_off, h_on: (T, H·d).
struct Layer {
  std::vector<float> a_off, a_on;  // (T, H, d) attention outputs
};

Layer attention_layer(const AttentionKernel& k, const StackCase& c, const std::vector<float>& h_off,
                      const std::vector<float>& h_on) {
  const std::size_t T = c.tokens, W = c.width();
  const auto tail = static_cast<std::ptrdiff_t>(W);
  Layer L;
  const std::vector<float> v_off = values_of(k.info.in, h_off), v_on = values_of(k.info.in, h_on);  // (T, H·d)
  L.a_off = run(k, make_call(c, T, T), h_off, h_off, v_off);  // cache-OFF: one prefill over all T tokens
  // cache-ON: the prompt prefill fills rows [0, T − 1) of caches of capacity T (the last row not yet written) ...
  std::vector<float> k_cache(h_on.begin(), h_on.end() - tail), v_cache(v_on.begin(), v_on.end() - tail);
  k_cache.resize(T * W, 0.0f);
  v_cache.resize(T * W, 0.0f);
  L.a_on = run(k, make_call(c, T - 1, T - 1), std::span<const float>(h_on).first((T - 1) * W), k_cache, v_cache);
  // ... then the decode step writes the last token's rows and attends over all T rows.
  std::copy(h_on.end() - tail, h_on.end(), k_cache.end() - tail);
  std::copy(v_on.end() - tail, v_on.end(), v_cache.end() - tail);
  const auto last = run(k, make_call(c, 1, T), std::span<const float>(h_on).last(W), k_cache, v_cache);
  L.a_on.insert(L.a_on.end(), last.begin(), last.end());
  return L;
}

// The exact attention of one path's layer input (all T rows: row i sees keys 0..i in both of that path's calls).
struct Exact {
  ref::AttentionResult r;
  std::vector<double> v;  // (T, H, d)
};
Exact exact(const AttentionKernel& k, const StackCase& c, const std::vector<float>& h) {
  Exact e;
  const std::vector<double> qk(h.begin(), h.end());
  const std::vector<float> v = values_of(k.info.in, h);
  e.v.assign(v.begin(), v.end());
  ref::OracleOptions opt;
  opt.out = k.info.out;
  const AttentionCall call = make_call(c, c.tokens, c.tokens);
  e.r = ref::attention(qk, qk, e.v, call.shape, call.params, k.info.in, opt);
  return e;
}

double l1(const std::vector<float>& h, std::size_t row, std::size_t head, const StackCase& c) {
  double s = 0.0;
  for (std::size_t i = 0; i < c.d; ++i) s += std::fabs(static_cast<double>(h[row * c.width() + head * c.d + i]));
  return s;
}

// The composed bound of layer l+1 given E_l (bound of max |h_ON,l − h_OFF,l|), elementwise:
//   b = E_l + B_on + B_off + ΔV + expm1(2Δs_i)·Σ_j p_j|v_j − o| + u_out·(|x_on| + |x_off|) + 2·η_out,
//   ΔV = E_l/4 + 2·η_in                                     (v = fl(h/4), η_in the underflow unit of the input format)
//   Δs_i = τ·(‖q_i‖₁ + max_{j<=i} ‖k_j‖₁)·E_l + τ·d·E_l²    (OFF-path q, k; per head)
// and x = h + â of each path (docs/TOLERANCES.md "Propagation (Experiment 2)"). Returns max_elements b.
double composed_bound(const AttentionKernel& k, const StackCase& c, double E, const std::vector<float>& h_off,
                      const std::vector<float>& h_on, const Layer& L, const Exact& x_off, const Exact& x_on) {
  const std::size_t T = c.tokens;
  const AttentionCall off = make_call(c, T, T), pre = make_call(c, T - 1, T - 1), dec = make_call(c, 1, T);
  const ref::AttentionPipeline p_off = k.pipeline(off), p_pre = k.pipeline(pre), p_dec = k.pipeline(dec);
  const ref::AttentionParams& params = off.params;  // the oracle's view: all T rows from q_offset 0
  const double tau = params.scale, u_out = ref::unit_roundoff(k.info.out);
  const double dv = kVScale * E + 2.0 * ref::underflow_unit(k.info.in);
  const double eta_out = ref::underflow_unit(k.info.out);
  double worst = 0.0;
  for (std::size_t h = 0; h < c.heads; ++h) {
    double max_k1 = 0.0;  // max_{j<=i} ‖k_j‖₁ of the OFF path, running over rows
    for (std::size_t i = 0; i < T; ++i) {
      max_k1 = std::max(max_k1, l1(h_off, i, h, c));
      const double ds = tau * (l1(h_off, i, h, c) + max_k1) * E + tau * static_cast<double>(c.d) * E * E;
      for (std::size_t col = 0; col < c.d; ++col) {
        const auto s_off = ref::element_stats(x_off.r, x_off.v, off.shape, params, i, h, col);
        const auto s_on = ref::element_stats(x_on.r, x_on.v, off.shape, params, i, h, col);
        const double b_off = ref::attention_pipeline_bound(p_off, params, s_off);
        const double b_on = ref::attention_pipeline_bound(i + 1 < T ? p_pre : p_dec, params, s_on);
        const std::size_t at = i * c.width() + h * c.d + col;
        const double x1 = std::fabs(static_cast<double>(h_on[at])) + std::fabs(static_cast<double>(L.a_on[at]));
        const double x2 = std::fabs(static_cast<double>(h_off[at])) + std::fabs(static_cast<double>(L.a_off[at]));
        const double b =
            (E + b_on + b_off + dv + std::expm1(2.0 * ds) * s_off.spread + u_out * (x1 + x2) + 2.0 * eta_out) *
            ref::kSafety;
        worst = std::max(worst, b);
      }
    }
  }
  return worst;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b, std::size_t from = 0) {
  double m = 0.0;
  for (std::size_t i = from; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    m = std::isnan(d) ? d : std::max(m, d);
    if (std::isnan(m)) return m;
  }
  return m;
}

void run_stack(const AttentionKernel& k, const StackCase& c) {
  const AttentionCall calls[] = {make_call(c, c.tokens, c.tokens), make_call(c, c.tokens - 1, c.tokens - 1),
                                 make_call(c, 1, c.tokens)};
  for (const auto& call : calls)
    if (auto why = k.supports(call)) GTEST_SKIP() << *why;
  if (k.info.in != k.info.out) GTEST_SKIP() << "the residual stream needs the same input and output format";
  const std::uint64_t seed = seed_for("propagation", c.id());
  std::vector<float> h_off = make_values(c.tokens * c.width(), k.info.in, Data::normal, seed);  // (T, H·d)
  std::vector<float> h_on = h_off;
  std::printf("[ propag   ] %s on %s (seed %llu): q = k = h_l, v = h_l/4, scale 1/(4d), causal, %s\n", k.info.name.c_str(),
              c.id().c_str(), static_cast<unsigned long long>(seed), k.info.cache_invariant ? "cache-invariant" : "");
  std::printf("[ propag   ] %5s %14s %14s %14s\n", "layer", "max|ON-OFF|", "last token", "composed bound");
  double E = 0.0;  // bound of max |h_ON − h_OFF| at the current layer (inputs identical)
  for (std::size_t l = 0; l < c.layers; ++l) {
    const Layer L = attention_layer(k, c, h_off, h_on);
    const Exact x_off = exact(k, c, h_off), x_on = exact(k, c, h_on);
    const double bound = composed_bound(k, c, E, h_off, h_on, L, x_off, x_on);
    h_off = residual(k.info.out, h_off, L.a_off);
    h_on = residual(k.info.out, h_on, L.a_on);
    E = bound;
    const double measured = max_diff(h_on, h_off), last = max_diff(h_on, h_off, (c.tokens - 1) * c.width());
    std::printf("[ propag   ] %5zu %14.6g %14.6g %14.6g\n", l + 1, measured, last, bound);
    const std::string key = "layer" + std::to_string(l + 1);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", measured);
    ::testing::Test::RecordProperty(key + ".measured", buf);
    std::snprintf(buf, sizeof buf, "%.9g", last);
    ::testing::Test::RecordProperty(key + ".measured_last_token", buf);
    std::snprintf(buf, sizeof buf, "%.9g", bound);
    ::testing::Test::RecordProperty(key + ".bound", buf);
    EXPECT_LE(measured, bound) << "layer " << l + 1 << ": cache-ON vs cache-OFF difference above the composed bound"
                               << " (seed " << seed << ")";
    if (k.info.cache_invariant) {
      EXPECT_EQ(measured, 0.0) << "layer " << l + 1 << ": " << k.info.name
                               << " claims cache_invariant but the paths differ (seed " << seed << ")";
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------

class Stack : public ::testing::Test {
 public:
  explicit Stack(std::function<void()> body) : body_(std::move(body)) {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// The CPU kernels of the default registry, and the correct mutant bases (a cache-invariant and a split-KV one).
const kernels::Registry& kernel_registry() {
  static const kernels::Registry r = [] {
    kernels::Registry reg = kernels::cpu_registry();
    kernels::register_mutant_kernels(reg);
    return reg;
  }();
  return r;
}

bool wanted(const AttentionKernel& k) {
  if (k.info.backend != "mutant") return true;
  const auto bases = kernels::mutant_base_names();
  return std::find(bases.begin(), bases.end(), k.info.name) != bases.end();
}

std::string backend_prefix(const std::string& backend) {
  std::string p = backend;
  if (!p.empty()) p[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(p[0])));
  return p;
}

const bool registered = [] {
  const StackCase fast{4, 32, 64, 2, false}, slow{8, 128, 64, 2, true};
  for (const AttentionKernel& k : kernel_registry().attention()) {
    if (!wanted(k)) continue;
    for (const StackCase& c : {fast, slow}) {
      const std::string suite = backend_prefix(k.info.backend) + "/PropagationConformance";
      const std::string name =
          "LayersWithinComposedBound/" + sanitize(k.info.name) + "__" + c.id() + (c.slow ? "__Slow" : "");
      const AttentionKernel* kp = &k;
      ::testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [kp, c]() -> ::testing::Test* { return new Stack([kp, c] { run_stack(*kp, c); }); });
    }
  }
  return true;
}();

}  // namespace
}  // namespace kvconf::conformance::propagation
