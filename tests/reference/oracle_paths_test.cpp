// The attention oracle's evaluation paths give the same result in every field: one call over several query rows
// (K and V converted once per call), one call per row (converted where read; for fp16/fp8 the fused decode path that
// checks K and V while converting), GQA against MHA with repeated KV heads, and calls the fused path abandons.
// Also: the fused path reports a bad input exactly as the up-front check does.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"
#include "test_support.hpp"

namespace {

using kvconf::Format;
namespace ref = kvconf::ref;
using kvconf::test::randn;

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

// Element e of a and b (same layout (n_q, H, d_v), rows (n_q, H)) agree bitwise in every field.
void expect_same_element(const ref::AttentionResult& a, std::size_t ea, std::size_t ra, const ref::AttentionResult& b,
                         std::size_t eb, std::size_t rb, std::size_t dv, const std::string& id) {
  for (std::size_t c = 0; c < dv; ++c) {
    ASSERT_EQ(bits(a.out[ea + c]), bits(b.out[eb + c])) << id << " out, column " << c;
    ASSERT_EQ(bits(a.approx[ea + c]), bits(b.approx[eb + c])) << id << " approx, column " << c;
    ASSERT_EQ(bits(a.sum_p_abs_v[ea + c]), bits(b.sum_p_abs_v[eb + c])) << id << " sum_p_abs_v, column " << c;
    ASSERT_EQ(bits(a.sum_p_abs_dev[ea + c]), bits(b.sum_p_abs_dev[eb + c])) << id << " sum_p_abs_dev, column " << c;
    ASSERT_EQ(a.certified[ea + c], b.certified[eb + c]) << id << " certified, column " << c;
  }
  const ref::AttentionRowStats &s = a.rows[ra], &t = b.rows[rb];
  ASSERT_EQ(bits(s.max_score), bits(t.max_score)) << id << " max_score";
  ASSERT_EQ(bits(s.max_abs_qk), bits(t.max_abs_qk)) << id << " max_abs_qk";
  ASSERT_EQ(bits(s.sum_exp), bits(t.sum_exp)) << id << " sum_exp";
  ASSERT_EQ(s.n_visible, t.n_visible) << id;
  ASSERT_EQ(s.precision_bits, t.precision_bits) << id << " precision_bits";
  ASSERT_EQ(s.exact_rational, t.exact_rational) << id;
}

struct Data {
  const char* id;
  Format in, out;
  double k_scale;  // K·k_scale
  bool wide_v;     // V = m·2^s, odd |m| < 2^10, s in [-30, 19]: a span of 59 bits, so that Σ_j |V_jc| needs int128
  bool causal;
  std::int64_t window;
};

TEST(OracleAttentionPaths, EveryPathGivesTheSameFields) {
  const Data cases[] = {
      {"fp16", Format::fp16, Format::fp16, 1.0, false, false, 0},
      {"fp16_large_k", Format::fp16, Format::fp32, 300.0, false, false, 0},  // |K|·2^24 >= 2^31: fused abandons
      {"e4m3", Format::fp8_e4m3, Format::bf16, 1.0, false, false, 0},
      {"e5m2", Format::fp8_e5m2, Format::fp16, 1.0, false, false, 0},
      {"bf16", Format::bf16, Format::fp32, 1.0, false, false, 0},
      {"fp32_wide_v", Format::fp32, Format::fp64, 1.0, true, false, 0},
      {"fp16_causal_window", Format::fp16, Format::fp32, 1.0, false, true, 5},
  };
  const std::size_t n_q = 5, n_kv = 23, H = 2, d = 20, dv = 19;
  std::uint64_t seed = 500;
  for (const Data& c : cases) {
    std::vector<double> q = randn(n_q * H * d, c.in, seed++), k = randn(n_kv * H * d, c.in, seed++, c.k_scale);
    std::vector<double> v = randn(n_kv * H * dv, c.in, seed++);
    std::mt19937_64 g(seed++);
    if (c.wide_v)
      for (auto& x : v)
        x = std::ldexp(static_cast<double>(2 * (g() % 512) + 1) * (g() % 2 ? 1 : -1), static_cast<int>(g() % 50) - 30);
    ref::AttentionParams pr;
    pr.causal = c.causal;
    pr.window = c.window;
    pr.q_offset = c.causal ? static_cast<std::int64_t>(n_kv - n_q) : 0;
    pr.scale = 0.3;
    ref::OracleOptions o;
    o.out = c.out;
    const auto all = ref::attention(q, k, v, {n_q, n_kv, H, H, d, dv}, pr, c.in, o);
    for (std::size_t i = 0; i < n_q; ++i) {  // row i alone: the same keys, the same K and V
      ref::AttentionParams p1 = pr;
      p1.q_offset = pr.q_offset + static_cast<std::int64_t>(i);
      const std::vector<double> qi(q.begin() + static_cast<std::ptrdiff_t>(i * H * d),
                                   q.begin() + static_cast<std::ptrdiff_t>((i + 1) * H * d));
      const auto one = ref::attention(qi, k, v, {1, n_kv, H, H, d, dv}, p1, c.in, o);
      for (std::size_t h = 0; h < H; ++h)
        expect_same_element(all, (i * H + h) * dv, i * H + h, one, h * dv, h, dv,
                            std::string(c.id) + " row " + std::to_string(i) + " head " + std::to_string(h));
    }
    // GQA (two query heads per KV head: converted once per call) against MHA with the KV heads repeated.
    std::vector<double> k2, v2;
    for (std::size_t j = 0; j < n_kv; ++j)
      for (std::size_t h = 0; h < 2 * H; ++h) {
        const std::size_t g0 = h / 2;
        k2.insert(k2.end(), k.begin() + static_cast<std::ptrdiff_t>((j * H + g0) * d),
                  k.begin() + static_cast<std::ptrdiff_t>((j * H + g0 + 1) * d));
        v2.insert(v2.end(), v.begin() + static_cast<std::ptrdiff_t>((j * H + g0) * dv),
                  v.begin() + static_cast<std::ptrdiff_t>((j * H + g0 + 1) * dv));
      }
    const std::vector<double> q1(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(2 * H * d));
    ref::AttentionParams p0 = pr;
    p0.q_offset = c.causal ? static_cast<std::int64_t>(n_kv - 1) : 0;
    const auto gqa = ref::attention(q1, k, v, {1, n_kv, 2 * H, H, d, dv}, p0, c.in, o);
    const auto mha = ref::attention(q1, k2, v2, {1, n_kv, 2 * H, 2 * H, d, dv}, p0, c.in, o);
    for (std::size_t h = 0; h < 2 * H; ++h)
      expect_same_element(gqa, h * dv, h, mha, h * dv, h, dv, std::string(c.id) + " GQA head " + std::to_string(h));
  }
}

// The first bad element in the order q, k, v, with the up-front check's own message.
TEST(OracleAttentionPaths, FusedDecodeReportsBadInputsAsTheCheckDoes) {
  const std::size_t n_kv = 40, H = 3, d = 16, dv = 9;
  const auto q = randn(H * d, Format::fp16, 71), k0 = randn(n_kv * H * d, Format::fp16, 72);
  const auto v0 = randn(n_kv * H * dv, Format::fp16, 73);
  ref::AttentionParams pr;
  pr.q_offset = static_cast<std::int64_t>(n_kv - 1);
  pr.scale = 0.25;
  const auto message = [&](const std::vector<double>& k, const std::vector<double>& v) {
    try {
      ref::attention(q, k, v, {1, n_kv, H, H, d, dv}, pr, Format::fp16);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const auto check = [](const char* arg, const std::vector<double>& x) {
    try {
      ref::detail::check_values("kvconf::ref::attention", arg, x, Format::fp16);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  std::vector<double> k = k0, v = v0;
  v[5] = 0.1;                     // head 0's V
  k[(30 * H + 2) * d + 3] = 1e9;  // head 2's K, read after head 0 is done
  EXPECT_EQ(message(k, v), check("k", k));
  EXPECT_NE(check("k", k), "accepted");
  k = k0;
  EXPECT_EQ(message(k, v), check("v", v));
  v = v0;
  v[(17 * H + 1) * dv + 8] = std::nan("");
  EXPECT_EQ(message(k, v), check("v", v));
  v = v0;
  k[(39 * H + 1) * d + 15] = -HUGE_VAL;  // the last element of K
  EXPECT_EQ(message(k, v), check("k", k));
  EXPECT_EQ(message(k0, v0), "no exception");
}

}  // namespace
