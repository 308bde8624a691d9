// EngineMatchesOracle checks (engine_checks.hpp): every stage of one decoder layer against the oracle evaluated on the
// engine's own inputs to that stage, within the stage's a-priori bound from reference/ (norm, projection, attention
// pipeline, RoPE, activation, opmath add/mul bounds; docs/TOLERANCES.md "EngineMatchesOracle").
#include "kvconf/conformance/engine_checks.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "checks_common.hpp"
#include "kvconf/engine/attention_call.hpp"
#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/elementwise.hpp"
#include "kvconf/reference/norm.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::conformance {

namespace {

using detail::num;
using engine::LayerTrace;
using engine::ModelConfig;
using Sel = std::vector<std::size_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Evenly spaced indices of [0, n), first and last included; all of them when max is 0 or >= n.
Sel pick(std::size_t n, std::size_t max) {
  Sel s;
  if (max == 0 || max >= n) {
    for (std::size_t i = 0; i < n; ++i) s.push_back(i);
    return s;
  }
  if (max == 1) return {n - 1};
  for (std::size_t j = 0; j < max; ++j) {
    const std::size_t i = (j * (n - 1) + (max - 1) / 2) / (max - 1);
    if (s.empty() || s.back() != i) s.push_back(i);
  }
  return s;
}

double max_abs_of(std::span<const double> a) {
  double m = 0.0;
  for (double v : a) m = std::max(m, std::fabs(v));
  return m;
}

// One stage's element-by-element comparison against its bounds.
class Stage {
 public:
  Stage(const std::string& prefix, std::string name, std::size_t row_len, StageElementMap* elements)
      : name_(std::move(name)), rule_(prefix + "." + name_ + ".oracle_bound"), row_len_(row_len) {
    if (elements) el_ = &(*elements)[name_];
  }

  // flat: index into the stage's output tensor (rows, row_len); e encloses the exact value.
  void add(std::size_t flat, double computed, const ref::Enclosure& e, double bound) {
    const double err = ref::enclosure_error(computed, e);
    if (!(bound < kInf)) ++vacuous_;
    worst_.add(idx_.size(), err, bound);
    idx_.push_back(flat);
    comp_.push_back(computed);
    lo_.push_back(e.lo);
    hi_.push_back(e.hi);
    if (el_) {
      el_->index.push_back(flat);
      el_->lo.push_back(e.lo);
      el_->hi.push_back(e.hi);
      el_->bound.push_back(bound);
    }
  }

  CheckResult result(std::uint64_t seed, const std::string& what) const {
    if (worst_.count == 0)
      return detail::bound_result(rule_, std::numeric_limits<double>::quiet_NaN(), kInf, seed,
                                  "no element checked; " + what);
    const std::size_t w = worst_.index;
    const std::size_t flat = idx_[w];
    std::string d = what + " worst (row " + std::to_string(flat / row_len_) + ", col " +
                    std::to_string(flat % row_len_) + ") engine=" + num(comp_[w]) + " exact in [" + num(lo_[w]) + ", " +
                    num(hi_[w]) + "] elements=" + std::to_string(worst_.count) +
                    " over_bound=" + std::to_string(worst_.failed) + " max_error=" + num(worst_.max_error);
    if (vacuous_ > 0)
      return detail::bound_result(rule_, worst_.max_error, kInf, seed,
                                  std::to_string(vacuous_) + " element bounds are +inf; " + d);
    return detail::bound_result(rule_, worst_.error, worst_.bound, seed, d);
  }

 private:
  std::string name_, rule_;
  std::size_t row_len_;
  detail::Worst worst_;
  std::size_t vacuous_ = 0;
  std::vector<std::size_t> idx_;
  std::vector<double> comp_, lo_, hi_;
  StageElements* el_ = nullptr;
};

// What every stage of one call needs.
struct Ctx {
  const EngineLayerCall& call;
  const ModelConfig& c;
  const engine::ProfileKernels& k;
  Format f;
  Sel rows;  // checked rows of the call
  const EngineOracleOptions& opt;
  std::uint64_t seed;
  StageElementMap* elements;
  std::string note;  // " seed=… layer=… profile=…"
};

void check_size(const char* what, const std::vector<float>& t, std::size_t expected) {
  if (t.size() != expected)
    throw std::invalid_argument(std::string("check_engine_layer: LayerTrace::") + what + " has " +
                                std::to_string(t.size()) + " values, expected " + std::to_string(expected));
}

ref::OracleOptions oracle_options(Format f) {
  ref::OracleOptions o;
  o.out = f;
  return o;
}

// RMSNorm x: (rows, D) → y with weight w: (D), the profile's norm kernel on NormShape{rows, D}.
CheckResult norm_stage(const Ctx& x, const std::string& name, const std::vector<float>& in, const std::vector<float>& w,
                       const std::vector<float>& y) {
  const std::size_t D = x.c.hidden;
  const kernels::NormShape shape{x.call.rows, D};
  const kernels::NormPath path = x.k.norm->path(shape);
  std::vector<double> xs;  // (checked rows, D)
  xs.reserve(x.rows.size() * D);
  for (std::size_t r : x.rows) xs.insert(xs.end(), in.begin() + r * D, in.begin() + (r + 1) * D);
  const double eps = static_cast<double>(static_cast<float>(x.c.rms_eps));
  const bool opw = x.c.norm_one_plus_weight;
  const ref::RmsNormResult orc =
      ref::rms_norm(xs, detail::to_double(w), x.rows.size(), D, eps, opw, x.f, oracle_options(x.f));
  const ref::ErrorTerms sum_terms = detail::reduction_terms(path.spec, path.order, D, max_abs_of(xs));
  Stage st(x.call.prefix, name, D, x.elements);
  for (std::size_t j = 0; j < x.rows.size(); ++j) {
    ref::RmsNormErrorInputs bi;
    bi.d = D;
    bi.sum_sq = orc.sum_sq[j];
    bi.eps = eps;
    bi.sum_terms = sum_terms;
    bi.one_plus_weight = opw;
    bi.out = x.f;
    const ref::RmsNormErrorTerms terms = ref::rms_norm_error_terms(bi);
    for (std::size_t i = 0; i < D; ++i) {
      const double approx = orc.approx[j * D + i];
      const double abs_y = std::nextafter(std::fabs(approx) * (1.0 + 0x1p-51), kInf);
      const double wf = opw ? std::fabs(1.0 + static_cast<double>(w[i])) : std::fabs(static_cast<double>(w[i]));
      const std::size_t flat = x.rows[j] * D + i;
      st.add(flat, y[flat], ref::around_approx(approx), terms.at(abs_y, wf));
    }
  }
  return st.result(
      x.seed, "kernel=" + x.k.norm->info.name + " path=" + path.name + " order=" + order_name(path.order) + x.note);
}

// Projection y: (rows, N) = in: (rows, K) · Wᵀ, W: (N, K), the profile's GEMM on GemmShape{rows, N, K}.
CheckResult proj_stage(const Ctx& x, const std::string& name, const std::vector<float>& in, const std::vector<float>& W,
                       const std::vector<float>& y, std::size_t N, std::size_t K) {
  const kernels::GemmShape shape{x.call.rows, N, K};
  const kernels::GemmPath path = x.k.gemm->path(shape);
  const Sel cols = pick(N, x.opt.max_features);
  std::vector<double> xs, ws;  // (checked rows, K), (checked cols, K)
  for (std::size_t r : x.rows) xs.insert(xs.end(), in.begin() + r * K, in.begin() + (r + 1) * K);
  for (std::size_t o : cols) ws.insert(ws.end(), W.begin() + o * K, W.begin() + (o + 1) * K);
  const ref::ProjectionResult orc = ref::project(xs, ws, x.rows.size(), K, cols.size(), x.f, oracle_options(x.f));
  const ref::ErrorTerms terms =
      detail::reduction_terms(path.spec, path.order, K, std::max(max_abs_of(xs), max_abs_of(ws)));
  Stage st(x.call.prefix, name, N, x.elements);
  for (std::size_t j = 0; j < x.rows.size(); ++j)
    for (std::size_t q = 0; q < cols.size(); ++q) {
      const std::size_t e = j * cols.size() + q, flat = x.rows[j] * N + cols[q];
      st.add(flat, y[flat], ref::around_approx(orc.approx[e]), terms.at(orc.abs_sum[e]));
    }
  return st.result(x.seed, "kernel=" + x.k.gemm->info.name + " M=" + std::to_string(x.call.rows) +
                               " N=" + std::to_string(N) + " K=" + std::to_string(K) + " path=" + path.name +
                               " order=" + order_name(path.order) + " checked " + std::to_string(cols.size()) + "/" +
                               std::to_string(N) + " features" + x.note);
}

// RoPE of in: (rows, heads, d) → y at positions pos0 + r (HF rotate_half pairs, or interleaved pairs).
CheckResult rope_stage(const Ctx& x, const std::string& name, const std::vector<float>& in, const std::vector<float>& y,
                       std::size_t heads) {
  const std::size_t d = x.c.head_dim, h = d / 2, width = heads * d;
  Stage st(x.call.prefix, name, width, x.elements);
  std::vector<ref::RopeAngle> ang(h);
  for (std::size_t r : x.rows) {
    const std::size_t pos = x.call.pos0 + r;
    for (std::size_t i = 0; i < h; ++i) ang[i] = ref::rope_angle(pos, i, d, x.c.rope_theta);
    for (std::size_t hd = 0; hd < heads; ++hd) {
      const std::size_t base = r * width + hd * d;
      for (std::size_t i = 0; i < h; ++i) {
        // Each output = x_cos·cos A + x_sin·sin A; (index of the output, x_cos, x_sin).
        std::pair<std::size_t, std::pair<double, double>> outs[2];
        if (x.c.rope_interleaved) {
          const double v0 = in[base + 2 * i], v1 = in[base + 2 * i + 1];
          outs[0] = {base + 2 * i, {v0, -v1}};
          outs[1] = {base + 2 * i + 1, {v1, v0}};
        } else {
          const double a = in[base + i], b = in[base + i + h];
          outs[0] = {base + i, {a, -b}};
          outs[1] = {base + i + h, {b, a}};
        }
        for (const auto& [flat, coef] : outs) {
          const ref::Enclosure e = ref::rope_component(coef.first, coef.second, ang[i]);
          ref::RopeErrorInputs bi;
          bi.storage = x.f;
          bi.theta = x.c.rope_theta;
          bi.d = d;
          bi.i = i;
          bi.pos = pos;
          bi.abs_x_cos = std::fabs(coef.first);
          bi.abs_x_sin = std::fabs(coef.second);
          bi.exact = ang[i];
          bi.abs_y = e.abs_up();
          st.add(flat, y[flat], e, ref::rope_error_bound(bi));
        }
      }
    }
  }
  return st.result(x.seed, std::string("layout=") + (x.c.rope_interleaved ? "interleaved" : "rotate_half") +
                               " theta=" + num(x.c.rope_theta) + " positions " + std::to_string(x.call.pos0) + ".." +
                               std::to_string(x.call.pos0 + x.call.rows - 1) + x.note);
}

CheckResult attention_stage(const Ctx& x, const std::vector<float>& q, const std::vector<float>& out) {
  const ModelConfig& c = x.c;
  const std::size_t H = c.n_heads, KV = c.n_kv_heads, d = c.head_dim, qd = H * d;
  const kernels::AttentionCall call =
      engine::layer_attention_call(c, x.call.layer, x.call.rows, x.call.pos0, x.call.capacity);
  const kernels::AttentionKernel& kern = x.call.rows == 1 ? *x.k.attn_decode : *x.k.attn_prefill;
  const ref::AttentionPipeline pipe = kern.pipeline(call);
  const std::size_t n_kv = call.shape.n_kv;
  const auto K = detail::to_double(x.call.k_cache.first(n_kv * KV * d));  // (n_kv, KV, d)
  const auto V = detail::to_double(x.call.v_cache.first(n_kv * KV * d));  // (n_kv, KV, d)
  Stage st(x.call.prefix, "attention", qd, x.elements);
  for (std::size_t r : x.rows) {
    ref::AttentionShape shape = call.shape;
    shape.n_q = 1;
    ref::AttentionParams params = call.params;
    params.q_offset = static_cast<std::int64_t>(x.call.pos0 + r);
    const auto qr = detail::to_double(std::span<const float>(q).subspan(r * qd, qd));  // (1, H, d)
    const ref::AttentionResult o = ref::attention(qr, K, V, shape, params, x.f, oracle_options(x.f));
    for (std::size_t hd = 0; hd < H; ++hd)
      for (std::size_t col = 0; col < d; ++col) {
        const double b =
            ref::attention_pipeline_bound(pipe, params, ref::element_stats(o, V, shape, params, 0, hd, col));
        const std::size_t flat = r * qd + hd * d + col;
        st.add(flat, out[flat], ref::around_approx(o.approx[hd * d + col]), b);
      }
  }
  return st.result(x.seed, "kernel=" + kern.info.name + " pipeline=" + pipe.name +
                               " n_q=" + std::to_string(call.shape.n_q) + " n_kv=" + std::to_string(n_kv) +
                               " window=" + std::to_string(call.params.window) +
                               " softcap=" + num(call.params.softcap) + " scale=" + num(call.params.scale) + x.note);
}

// y = fl(a + b) elementwise (rows, D).
CheckResult add_stage(const Ctx& x, const std::string& name, const std::vector<float>& a, const std::vector<float>& b,
                      const std::vector<float>& y, std::size_t width) {
  Stage st(x.call.prefix, name, width, x.elements);
  for (std::size_t r : x.rows)
    for (std::size_t i = 0; i < width; ++i) {
      const std::size_t flat = r * width + i;
      const double p = a[flat], q = b[flat];
      // TwoSum: s + t = p + q exactly, |t| <= ulp(s)/2.
      const double s = p + q, bb = s - p, t = (p - (s - bb)) + (q - bb);
      const ref::Enclosure e{t < 0.0 ? std::nextafter(s, -kInf) : s, t > 0.0 ? std::nextafter(s, kInf) : s};
      st.add(flat, y[flat], e, ref::opmath_add_bound(x.f, e.abs_up()));
    }
  return st.result(x.seed, "fl_" + std::string(kvconf::name(x.f)) + "(fl32(a + b))" + x.note);
}

// y = fl(a · b) elementwise (rows, width) on the checked features.
CheckResult mul_stage(const Ctx& x, const std::string& name, const std::vector<float>& a, const std::vector<float>& b,
                      const std::vector<float>& y, std::size_t width) {
  Stage st(x.call.prefix, name, width, x.elements);
  const Sel cols = pick(width, x.opt.max_features);
  for (std::size_t r : x.rows)
    for (std::size_t i : cols) {
      const std::size_t flat = r * width + i;
      const double p = static_cast<double>(a[flat]) * static_cast<double>(b[flat]);  // exact: two 24-bit significands
      st.add(flat, y[flat], ref::Enclosure{p, p}, ref::opmath_mul_bound(x.f, std::fabs(p)));
    }
  return st.result(x.seed, "fl_" + std::string(kvconf::name(x.f)) + "(fl32(a·b)) checked " +
                               std::to_string(cols.size()) + "/" + std::to_string(width) + " features" + x.note);
}

CheckResult activation_stage(const Ctx& x, const std::vector<float>& gate, const std::vector<float>& act,
                             std::size_t width) {
  Stage st(x.call.prefix, "activation", width, x.elements);
  const Sel cols = pick(width, x.opt.max_features);
  const bool silu = x.c.act == engine::Activation::silu;
  for (std::size_t r : x.rows)
    for (std::size_t i : cols) {
      const std::size_t flat = r * width + i;
      const double g = gate[flat];
      if (silu) {
        const ref::Enclosure e = ref::silu(g);
        st.add(flat, act[flat], e, ref::silu_error_bound(x.f, g, e.abs_up(), kernels::kExpRelError));
      } else {
        const ref::GeluTanh e = ref::gelu_tanh(g);
        st.add(flat, act[flat], e.g, ref::gelu_tanh_error_bound(x.f, g, e, kernels::kExpRelError));
      }
    }
  return st.result(x.seed, std::string(silu ? "silu" : "gelu_tanh") + " in fp32, one rounding to " +
                               std::string(kvconf::name(x.f)) + " checked " + std::to_string(cols.size()) + "/" +
                               std::to_string(width) + " features" + x.note);
}

// The cache rows [pos0, pos0 + rows) hold the call's post-RoPE K and its V, bit for bit.
CheckResult cache_write_check(const Ctx& x, const LayerTrace& t) {
  const std::size_t kvd = x.c.kv_dim(), n = x.call.rows, p0 = x.call.pos0;
  std::size_t bad = 0, first = 0;
  std::string first_side;
  for (int side = 0; side < 2; ++side) {
    const std::vector<float>& src = side == 0 ? t.k_rope : t.v;
    const std::span<const float> cache = side == 0 ? x.call.k_cache : x.call.v_cache;
    for (std::size_t i = 0; i < n * kvd; ++i)
      if (std::bit_cast<std::uint32_t>(src[i]) != std::bit_cast<std::uint32_t>(cache[p0 * kvd + i])) {
        if (bad++ == 0) {
          first = i;
          first_side = side == 0 ? "K" : "V";
        }
      }
  }
  return detail::bitwise_result(x.call.prefix + ".kv_cache_write.bitwise", static_cast<double>(bad), x.seed,
                                "cache rows [" + std::to_string(p0) + ", " + std::to_string(p0 + n) +
                                    ") vs the call's k_rope and v: " + std::to_string(bad) + " values differ" +
                                    (bad ? " (first: " + first_side + " row " + std::to_string(p0 + first / kvd) +
                                               " col " + std::to_string(first % kvd) + ")"
                                         : "") +
                                    x.note);
}

}  // namespace

std::vector<std::string> engine_stages(const ModelConfig& c) {
  std::vector<std::string> s = {"attn_norm", "q_proj", "k_proj", "v_proj", "q_rope", "k_rope", "attention", "o_proj"};
  if (c.post_norms) s.push_back("post_attn_norm");
  for (const char* n : {"attn_residual", "mlp_norm", "gate_proj", "up_proj", "activation", "mlp_product", "down_proj"})
    s.push_back(n);
  if (c.post_norms) s.push_back("post_mlp_norm");
  s.push_back("mlp_residual");
  return s;
}

std::vector<float>* stage_output(LayerTrace& t, std::string_view stage) {
  const std::pair<std::string_view, std::vector<float>*> map[] = {{"attn_norm", &t.attn_in},
                                                                  {"q_proj", &t.q},
                                                                  {"k_proj", &t.k},
                                                                  {"v_proj", &t.v},
                                                                  {"q_rope", &t.q_rope},
                                                                  {"k_rope", &t.k_rope},
                                                                  {"attention", &t.attn},
                                                                  {"o_proj", &t.o},
                                                                  {"post_attn_norm", &t.o_normed},
                                                                  {"attn_residual", &t.h_mid},
                                                                  {"mlp_norm", &t.mlp_in},
                                                                  {"gate_proj", &t.gate},
                                                                  {"up_proj", &t.up},
                                                                  {"activation", &t.act},
                                                                  {"mlp_product", &t.prod},
                                                                  {"down_proj", &t.down},
                                                                  {"post_mlp_norm", &t.down_normed},
                                                                  {"mlp_residual", &t.x_out}};
  for (const auto& [name, ptr] : map)
    if (name == stage) return ptr;
  return nullptr;
}

CheckResults check_engine_layer(const EngineLayerCall& call, const EngineOracleOptions& options, std::uint64_t seed,
                                StageElementMap* elements) {
  if (!call.model || !call.kernels || !call.trace)
    throw std::invalid_argument("check_engine_layer: model, kernels and trace must be set");
  const engine::Model& m = *call.model;
  const ModelConfig& c = m.config;
  const engine::ProfileKernels& k = *call.kernels;
  const LayerTrace& t = *call.trace;
  if (call.layer >= c.n_layers) throw std::invalid_argument("check_engine_layer: layer out of range");
  if (call.rows == 0) throw std::invalid_argument("check_engine_layer: a call has at least one row");
  if (!k.gemm || !k.norm || !k.attn_decode || !k.attn_prefill)
    throw std::invalid_argument("check_engine_layer: the profile's kernels are not resolved");
  const engine::LayerWeights& w = m.layers[call.layer];
  const std::size_t n = call.rows, D = c.hidden, qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate;
  check_size("x_in", t.x_in, n * D);
  check_size("attn_in", t.attn_in, n * D);
  check_size("q", t.q, n * qd);
  check_size("k", t.k, n * kvd);
  check_size("v", t.v, n * kvd);
  check_size("q_rope", t.q_rope, n * qd);
  check_size("k_rope", t.k_rope, n * kvd);
  check_size("attn", t.attn, n * qd);
  check_size("o", t.o, n * D);
  if (c.post_norms) check_size("o_normed", t.o_normed, n * D), check_size("down_normed", t.down_normed, n * D);
  check_size("h_mid", t.h_mid, n * D);
  check_size("mlp_in", t.mlp_in, n * D);
  check_size("gate", t.gate, n * I);
  check_size("up", t.up, n * I);
  check_size("act", t.act, n * I);
  check_size("prod", t.prod, n * I);
  check_size("down", t.down, n * D);
  check_size("x_out", t.x_out, n * D);
  const std::size_t cache_need = (call.pos0 + n) * kvd;
  if (call.k_cache.size() < cache_need || call.v_cache.size() < cache_need || call.capacity < call.pos0 + n)
    throw std::invalid_argument(
        "check_engine_layer: the KV cache holds fewer than pos0 + rows = " + std::to_string(call.pos0 + n) + " rows");

  const Ctx x{call,
              c,
              k,
              m.storage,
              pick(n, options.max_rows),
              options,
              seed,
              elements,
              " seed=" + std::to_string(seed) + " profile=" + k.profile.name + " arch=" + engine::arch_name(c.arch) +
                  " layer=" + std::to_string(call.layer) + " rows=" + std::to_string(n) +
                  " pos0=" + std::to_string(call.pos0)};
  CheckResults res;
  res.push_back(norm_stage(x, "attn_norm", t.x_in, w.attn_norm, t.attn_in));
  res.push_back(proj_stage(x, "q_proj", t.attn_in, w.wq, t.q, qd, D));
  res.push_back(proj_stage(x, "k_proj", t.attn_in, w.wk, t.k, kvd, D));
  res.push_back(proj_stage(x, "v_proj", t.attn_in, w.wv, t.v, kvd, D));
  res.push_back(rope_stage(x, "q_rope", t.q, t.q_rope, c.n_heads));
  res.push_back(rope_stage(x, "k_rope", t.k, t.k_rope, c.n_kv_heads));
  res.push_back(cache_write_check(x, t));
  res.push_back(attention_stage(x, t.q_rope, t.attn));
  res.push_back(proj_stage(x, "o_proj", t.attn, w.wo, t.o, D, qd));
  if (c.post_norms) res.push_back(norm_stage(x, "post_attn_norm", t.o, w.post_attn_norm, t.o_normed));
  res.push_back(add_stage(x, "attn_residual", t.x_in, c.post_norms ? t.o_normed : t.o, t.h_mid, D));
  res.push_back(norm_stage(x, "mlp_norm", t.h_mid, w.mlp_norm, t.mlp_in));
  res.push_back(proj_stage(x, "gate_proj", t.mlp_in, w.w_gate, t.gate, I, D));
  res.push_back(proj_stage(x, "up_proj", t.mlp_in, w.w_up, t.up, I, D));
  res.push_back(activation_stage(x, t.gate, t.act, I));
  res.push_back(mul_stage(x, "mlp_product", t.act, t.up, t.prod, I));
  res.push_back(proj_stage(x, "down_proj", t.prod, w.w_down, t.down, D, I));
  if (c.post_norms) res.push_back(norm_stage(x, "post_mlp_norm", t.down, w.post_mlp_norm, t.down_normed));
  res.push_back(add_stage(x, "mlp_residual", t.h_mid, c.post_norms ? t.down_normed : t.down, t.x_out, D));
  return res;
}

CheckResults check_engine_matches_oracle(const engine::Model& model, const engine::ProfileKernels& kernels,
                                         std::span<const int> tokens, const EngineOracleOptions& options,
                                         std::uint64_t seed, engine::ContextOptions context) {
  if (tokens.size() < 2)
    throw std::invalid_argument("check_engine_matches_oracle: need at least 2 tokens (a prefix and one decode step)");
  const ModelConfig& c = model.config;
  engine::Context ctx(model, kernels, std::move(context));
  engine::ForwardOptions fo;
  fo.capture_layers = true;
  CheckResults res;
  auto check_trace = [&](const engine::Trace& tr, const engine::KvCache& cache, const std::string& side) {
    if (tr.layers.size() != c.n_layers)
      throw std::runtime_error("check_engine_matches_oracle: the engine captured " + std::to_string(tr.layers.size()) +
                               " layers of " + std::to_string(c.n_layers));
    for (std::size_t l : options.layers) {
      if (l >= c.n_layers) continue;
      EngineLayerCall call;
      call.model = &model;
      call.kernels = &kernels;
      call.layer = l;
      call.pos0 = tr.pos0;
      call.rows = tr.rows;
      call.trace = &tr.layers[l];
      call.k_cache = cache.k[l];
      call.v_cache = cache.v[l];
      call.capacity = cache.capacity;
      call.prefix = side + ".layer" + std::to_string(l);
      for (auto& r : check_engine_layer(call, options, seed)) res.push_back(std::move(r));
    }
  };
  // Cache-OFF: one recompute over every token.
  ctx.recompute(tokens, fo);
  const engine::Trace off = ctx.trace();
  const engine::KvCache off_cache = ctx.last_recompute_cache();
  check_trace(off, off_cache, "recompute");
  // Cache-ON: prefill all but the last token, then decode it (M = 1).
  ctx.reset();
  ctx.prefill(tokens.first(tokens.size() - 1));
  ctx.decode(tokens.back(), fo);
  const engine::Trace on = ctx.trace();
  const engine::KvCache on_cache = ctx.cache();
  check_trace(on, on_cache, "decode");
  return res;
}

std::vector<double> layer0_kv_bound(const engine::Model& m, const engine::ProfileKernels& k, std::span<const float> x,
                                    std::size_t pos, std::size_t M) {
  const ModelConfig& c = m.config;
  const std::size_t D = c.hidden, kvd = c.kv_dim(), d = c.head_dim, h = d / 2;
  if (x.size() != D) throw std::invalid_argument("layer0_kv_bound: x must hold hidden values");
  if (!k.gemm || !k.norm) throw std::invalid_argument("layer0_kv_bound: the profile's kernels are not resolved");
  const Format f = m.storage;
  const engine::LayerWeights& w = m.layers[0];
  // y = rmsnorm(x) exactly (approx), and β_n: |ŷ − y| per element, for the norm path at M rows.
  const kernels::NormPath np = k.norm->path({M, D});
  const std::vector<double> xs = detail::to_double(x);
  const double eps = static_cast<double>(static_cast<float>(c.rms_eps));
  const ref::RmsNormResult orc =
      ref::rms_norm(xs, detail::to_double(w.attn_norm), 1, D, eps, c.norm_one_plus_weight, f, oracle_options(f));
  ref::RmsNormErrorInputs bi;
  bi.d = D;
  bi.sum_sq = orc.sum_sq[0];
  bi.eps = eps;
  bi.sum_terms = detail::reduction_terms(np.spec, np.order, D, max_abs_of(xs));
  bi.rsqrt_rel_error = np.rsqrt_rel_error;
  bi.one_plus_weight = c.norm_one_plus_weight;
  bi.out = f;
  const ref::RmsNormErrorTerms nt = ref::rms_norm_error_terms(bi);
  std::vector<double> y_abs(D), beta_n(D);  // |ŷ_i| <= y_abs_i + beta_n_i
  double max_in = 0.0;
  for (std::size_t i = 0; i < D; ++i) {
    y_abs[i] = std::nextafter(std::fabs(orc.approx[i]) * (1.0 + 0x1p-51), kInf);
    const double wf = c.norm_one_plus_weight ? std::fabs(1.0 + static_cast<double>(w.attn_norm[i]))
                                             : std::fabs(static_cast<double>(w.attn_norm[i]));
    beta_n[i] = nt.at(y_abs[i], wf);
    max_in = std::max(max_in, y_abs[i] + beta_n[i]);
  }
  // k̂, v̂ = fl_path(W · ŷ): |k̂_j − (W y)_j| <= proj_terms(Σ|W_ji| |ŷ_i|) + Σ|W_ji| β_n,i; also |(W y)_j| bounded.
  const kernels::GemmPath gp = k.gemm->path({M, kvd, D});
  auto project = [&](const std::vector<float>& W, std::vector<double>& err, std::vector<double>& abs_exact) {
    double max_w = 0.0;
    for (float v : W) max_w = std::max(max_w, std::fabs(static_cast<double>(v)));
    const ref::ErrorTerms pt = detail::reduction_terms(gp.spec, gp.order, D, std::max(max_in, max_w));
    err.assign(kvd, 0.0);
    abs_exact.assign(kvd, 0.0);
    for (std::size_t j = 0; j < kvd; ++j) {
      double abs_hat = 0.0, carried = 0.0, abs_y = 0.0;
      for (std::size_t i = 0; i < D; ++i) {
        const double aw = std::fabs(static_cast<double>(W[j * D + i]));
        abs_hat += aw * (y_abs[i] + beta_n[i]);
        carried += aw * beta_n[i];
        abs_y += aw * y_abs[i];
      }
      err[j] = (pt.at(abs_hat * (1.0 + 0x1p-40)) + carried * (1.0 + 0x1p-40)) * (1.0 + 0x1p-40);
      abs_exact[j] = abs_y * (1.0 + 0x1p-40);
    }
  };
  std::vector<double> ek, ak, ev, av;
  project(w.wk, ek, ak);
  project(w.wv, ev, av);
  // RoPE of k̂: its own error on its inputs plus the inputs' errors through |cos|, |sin|.
  std::vector<double> out(2 * kvd);
  for (std::size_t i = 0; i < h; ++i) {
    const ref::RopeAngle ang = ref::rope_angle(pos, i, d, c.rope_theta);
    const double ac = std::max(std::fabs(ang.cos.lo), std::fabs(ang.cos.hi)),
                 as = std::max(std::fabs(ang.sin.lo), std::fabs(ang.sin.hi));
    for (std::size_t hd = 0; hd < c.n_kv_heads; ++hd) {
      const std::size_t base = hd * d;
      const std::size_t ia = c.rope_interleaved ? base + 2 * i : base + i;
      const std::size_t ib = c.rope_interleaved ? base + 2 * i + 1 : base + i + h;
      const double a = ak[ia] + ek[ia], b = ak[ib] + ek[ib];  // >= |â|, |b̂|
      ref::RopeErrorInputs ri;
      ri.storage = f;
      ri.theta = c.rope_theta;
      ri.d = d;
      ri.i = i;
      ri.pos = pos;
      ri.abs_x_cos = a;
      ri.abs_x_sin = b;
      ri.exact = ang;
      ri.abs_y = (ac * a + as * b) * (1.0 + 0x1p-40);
      const double own = ref::rope_error_bound(ri);  // the same for both outputs of the pair (coefficients swap)
      ri.abs_x_cos = b;
      ri.abs_x_sin = a;
      const double own_b = ref::rope_error_bound(ri);
      out[ia] = (own + ac * ek[ia] + as * ek[ib]) * (1.0 + 0x1p-40);
      out[ib] = (own_b + ac * ek[ib] + as * ek[ia]) * (1.0 + 0x1p-40);
    }
  }
  std::copy(ev.begin(), ev.end(), out.begin() + static_cast<std::ptrdiff_t>(kvd));
  return out;
}

}  // namespace kvconf::conformance
