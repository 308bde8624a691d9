// Unit tests of ref::attention_pipeline_bound: an emulated online-softmax attention (KV blocks visited in
// descending order, rescales, P cast to fp16) and a split-KV variant with a log-sum-exp combine stay
// within the bound against the MPFR oracle over many seeds; degenerate inputs and monotonicity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kvconf/numerics/rounding.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/oracle.hpp"
#include "test_support.hpp"

namespace kvconf::ref {
namespace {

using test::p2;

constexpr double kExpRel = 0x1p-24 + 0x1p-51;  // libm double exp rounded to float
float exp32(float x) { return static_cast<float>(std::exp(static_cast<double>(x))); }
float log32(float x) { return static_cast<float>(std::log(static_cast<double>(x))); }
float f16(float x) { return static_cast<float>(round_to(Format::fp16, static_cast<double>(x))); }

struct Partial {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  std::vector<float> acc;
};

// One online-softmax pass over keys [lo, hi) in blocks of bc aligned at key 0, visited in descending order.
// s: (n) fp32 scores; v: (n, dv).
Partial online(const std::vector<float>& s, const std::vector<float>& v, std::size_t dv, std::size_t lo, std::size_t hi,
               std::size_t bc) {
  Partial p;
  p.acc.assign(dv, 0.0f);
  if (lo >= hi) return p;
  const std::size_t first = lo / bc, last = (hi - 1) / bc;
  for (std::size_t b = last + 1; b-- > first;) {
    const std::size_t b0 = std::max(lo, b * bc), b1 = std::min(hi, (b + 1) * bc);
    float m_new = p.m;
    for (std::size_t j = b0; j < b1; ++j) m_new = std::max(m_new, s[j]);
    const float alpha = std::isinf(p.m) ? 0.0f : exp32(p.m - m_new);
    p.l = p.l * alpha;
    for (auto& a : p.acc) a = a * alpha;
    for (std::size_t j = b0; j < b1; ++j) {
      const float e = exp32(s[j] - m_new);
      p.l = p.l + e;
      const float P = f16(e);
      for (std::size_t c = 0; c < dv; ++c) p.acc[c] = std::fmaf(P, v[j * dv + c], p.acc[c]);
    }
    p.m = m_new;
  }
  return p;
}

struct Setup {
  std::size_t n, d = 64, dv = 16, bc = 64, splits = 1;
  double q_scale = 1.0;
};

// Max over columns of |ô − o| / bound for one random case; fails the test if any element exceeds its bound.
double run_case(const Setup& st, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  auto r16 = [&](double x) { return round_to(Format::fp16, x); };
  std::vector<double> q(st.d), k(st.n * st.d), v(st.n * st.dv);
  for (auto& x : q) x = r16(st.q_scale * g(rng));
  for (auto& x : k) x = r16(g(rng));
  for (auto& x : v) x = r16(g(rng));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(st.d)));

  // Emulated kernel.
  std::vector<float> s(st.n), vf(v.begin(), v.end());
  for (std::size_t j = 0; j < st.n; ++j) {
    float acc = 0.0f;
    for (std::size_t i = 0; i < st.d; ++i)
      acc = std::fmaf(static_cast<float>(q[i]), static_cast<float>(k[j * st.d + i]), acc);
    s[j] = acc * scale;
  }
  std::vector<float> out(st.dv);
  const std::size_t nb = (st.n + st.bc - 1) / st.bc;
  const std::size_t per = (nb + st.splits - 1) / st.splits;
  std::size_t max_blocks = 0;
  if (st.splits == 1) {
    const Partial p = online(s, vf, st.dv, 0, st.n, st.bc);
    const float inv = 1.0f / p.l;
    for (std::size_t c = 0; c < st.dv; ++c) out[c] = f16(p.acc[c] * inv);
    max_blocks = nb;
  } else {
    std::vector<float> lse(st.splits, -std::numeric_limits<float>::infinity());
    std::vector<std::vector<float>> o(st.splits, std::vector<float>(st.dv, 0.0f));
    for (std::size_t sp = 0; sp < st.splits; ++sp) {
      const std::size_t lo = std::min(st.n, sp * per * st.bc), hi = std::min(st.n, (sp + 1) * per * st.bc);
      if (lo >= hi) continue;
      const Partial p = online(s, vf, st.dv, lo, hi, st.bc);
      const float inv = 1.0f / p.l;
      for (std::size_t c = 0; c < st.dv; ++c) o[sp][c] = p.acc[c] * inv;
      lse[sp] = p.m + log32(p.l);
      max_blocks = std::max(max_blocks, (hi - lo + st.bc - 1) / st.bc);
    }
    const float lmax = *std::max_element(lse.begin(), lse.end());
    float sum = 0.0f;
    for (float x : lse) sum = sum + (std::isinf(x) ? 0.0f : exp32(x - lmax));
    const float lsum = log32(sum) + lmax;
    std::vector<float> acc(st.dv, 0.0f);
    for (std::size_t sp = 0; sp < st.splits; ++sp) {
      if (std::isinf(lse[sp])) continue;
      const float w = exp32(lse[sp] - lsum);
      for (std::size_t c = 0; c < st.dv; ++c) acc[c] = std::fmaf(w, o[sp][c], acc[c]);
    }
    for (std::size_t c = 0; c < st.dv; ++c) out[c] = f16(acc[c]);
  }

  // Oracle and bound.
  AttentionShape shape{1, st.n, 1, 1, st.d, st.dv};
  AttentionParams params;
  params.q_offset = static_cast<std::int64_t>(st.n) - 1;
  params.scale = scale;
  OracleOptions oo;
  oo.out = Format::fp16;
  const AttentionResult r = attention(q, k, v, shape, params, Format::fp16, oo);
  AttentionPipeline p;
  p.exp_rel_error = kExpRel;
  p.kv_blocks = max_blocks;
  p.splits = st.splits;
  p.normalize_before_pv = false;
  p.pv_terms = st.n;
  double worst = 0.0;
  for (std::size_t c = 0; c < st.dv; ++c) {
    const AttentionElementStats es = element_stats(r, v, shape, params, 0, 0, c);
    const double bound = attention_pipeline_bound(p, params, es);
    const double err = std::fabs(static_cast<double>(out[c]) - r.approx[c]) * (1.0 + 0x1p-50);
    EXPECT_TRUE(std::isfinite(bound));
    EXPECT_LE(err, bound) << "n=" << st.n << " splits=" << st.splits << " col " << c << " seed " << seed;
    worst = std::max(worst, err / bound);
  }
  return worst;
}

TEST(AttentionPipelineBound, OnlineSoftmaxWithinBoundOverSeeds) {
  for (std::size_t n : {1u, 37u, 300u, 1000u})
    for (double qs : {1.0, 8.0}) {
      double worst = 0.0;
      for (int i = 0; i < 20; ++i) worst = std::max(worst, run_case({n, 64, 16, 64, 1, qs}, test::test_seed() + i));
      std::printf("online  n=%4zu qscale=%g  max err/bound %.3g\n", n, qs, worst);
      ::testing::Test::RecordProperty("online.n" + std::to_string(n) + ".q" + std::to_string(int(qs)),
                                      std::to_string(worst));
    }
}

TEST(AttentionPipelineBound, SplitKvWithinBoundOverSeeds) {
  for (std::size_t n : {130u, 700u})
    for (std::size_t splits : {2u, 3u, 5u})
      for (double qs : {1.0, 8.0}) {
        double worst = 0.0;
        for (int i = 0; i < 20; ++i)
          worst = std::max(worst, run_case({n, 64, 16, 64, splits, qs}, test::test_seed() + 97 * i));
        std::printf("splitkv n=%4zu S=%zu qscale=%g  max err/bound %.3g\n", n, splits, qs, worst);
      }
}

TEST(AttentionPipelineBound, DegenerateAndMonotone) {
  AttentionPipeline p;
  p.exp_rel_error = kExpRel;
  AttentionParams params;
  params.scale = 0.125;
  AttentionElementStats s;
  EXPECT_EQ(attention_pipeline_bound(p, params, s), 0.0);  // no visible key: exact zero
  s.n_visible = 512;
  s.head_dim = 128;
  s.max_abs_qk = 40.0;
  s.weighted_abs = 0.8;
  s.spread = 0.7;
  s.abs_o = 0.05;
  s.sum_abs_v = 400.0;
  s.max_abs_v = 3.0;
  const double base = attention_pipeline_bound(p, params, s);
  ASSERT_TRUE(std::isfinite(base));
  p.kv_blocks = 8;
  const double blocks = attention_pipeline_bound(p, params, s);
  EXPECT_GT(blocks, base);
  p.splits = 4;
  EXPECT_GT(attention_pipeline_bound(p, params, s), blocks);
  params.softcap = 50.0;
  p.splits = 1;
  EXPECT_GT(attention_pipeline_bound(p, params, s), 0.0);
  params.exact_inv_sqrt_d = true;
  EXPECT_THROW(attention_pipeline_bound(p, params, s), std::invalid_argument);
  params.exact_inv_sqrt_d = false;
  params.scale = 0.0;
  EXPECT_THROW(attention_pipeline_bound(p, params, s), std::invalid_argument);
}

}  // namespace
}  // namespace kvconf::ref
