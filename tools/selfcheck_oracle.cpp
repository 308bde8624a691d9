// Self-checks of the MPFR oracle: closed forms, head mapping, decode-vs-prefill rows, and agreement
// with a straightforward Boost mpfr_float evaluation at 256 bits on well-conditioned inputs.
#include <cmath>
#include <random>
#include <string>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_naive.hpp"
#include "selfcheck.hpp"

namespace kvconf::tools {
namespace {

using ref::AttentionParams;
using ref::AttentionShape;

// Random fp16 values ~ N(0, sigma), rounded to fp16.
std::vector<double> fp16_data(std::size_t n, std::uint64_t seed, double sigma = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, sigma);
  std::vector<double> out(n);
  for (auto& x : out) x = round_to(Format::fp16, g(rng));
  return out;
}

ref::OracleOptions to_fp16() {
  ref::OracleOptions o;
  o.out = Format::fp16;
  return o;
}

CheckResult fail(std::uint64_t cases, std::string why) { return {false, cases, std::move(why)}; }

// Equal scores (q = 0) give the plain mean of V, correctly rounded from the exact rational.
CheckResult equal_scores_mean() {
  const AttentionShape s{1, 7, 1, 1, 8, 4};
  std::vector<double> q(8, 0.0);
  const auto k = fp16_data(7 * 8, 1), v = fp16_data(7 * 4, 2);
  AttentionParams p;
  p.causal = false;
  const auto r = ref::attention(q, k, v, s, p, Format::fp16, to_fp16());
  ref::Mpfr m(200);
  for (std::size_t c = 0; c < 4; ++c) {
    double sum = 0;
    for (std::size_t j = 0; j < 7; ++j) sum += v[j * 4 + c];  // exact: 7 fp16 values sum exactly in double
    // sum/7 has denominator 7·2^k, so it is never within 2^-200 (relative) of an fp16 midpoint: the
    // 200-bit quotient rounds to fp16 exactly as the rational does.
    mpfr_set_d(m.get(), sum, MPFR_RNDN);
    mpfr_div_ui(m.get(), m.get(), 7, MPFR_RNDN);
    const double expect = ref::round_mpfr(Format::fp16, m.get());
    if (r.out[c] != expect)
      return fail(c + 1, "column " + std::to_string(c) + ": oracle " + std::to_string(r.out[c]) + " vs mean " +
                             std::to_string(expect));
  }
  return {true, 4, "q = 0: every output equals the fp16-rounded mean of V's column"};
}

// One visible key (causal, query at position 0) gives that row of V exactly.
CheckResult one_visible_key() {
  const AttentionShape s{1, 5, 2, 1, 16, 16};
  const auto q = fp16_data(2 * 16, 3), k = fp16_data(5 * 16, 4), v = fp16_data(5 * 16, 5);
  AttentionParams p;
  p.causal = true;
  p.q_offset = 0;
  const auto r = ref::attention(q, k, v, s, p, Format::fp16, to_fp16());
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t c = 0; c < 16; ++c)
      if (r.out[h * 16 + c] != v[c])
        return fail(h * 16 + c + 1, "head " + std::to_string(h) + " column " + std::to_string(c) + " is not v[0]");
  return {true, 32, "causal query at position 0 returns row 0 of V in every head (MQA)"};
}

// GQA with 2 KV heads equals MHA with each KV head repeated; the decode row equals the last row of
// the causal prefill (the oracle's own cache-ON == cache-OFF identity).
CheckResult gqa_and_decode_row() {
  const std::size_t n = 24, d = 16, H = 4, Hk = 2;
  const auto q = fp16_data(n * H * d, 6), k = fp16_data(n * Hk * d, 7), v = fp16_data(n * Hk * d, 8);
  std::vector<double> k_rep(n * H * d), v_rep(n * H * d);
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < d; ++i) {
        k_rep[(j * H + h) * d + i] = k[(j * Hk + h / 2) * d + i];
        v_rep[(j * H + h) * d + i] = v[(j * Hk + h / 2) * d + i];
      }
  AttentionParams p;
  p.scale = 0.25;
  const auto gqa = ref::attention(q, k, v, {n, n, H, Hk, d, d}, p, Format::fp16, to_fp16());
  const auto mha = ref::attention(q, k_rep, v_rep, {n, n, H, H, d, d}, p, Format::fp16, to_fp16());
  if (gqa.out != mha.out) return fail(gqa.out.size(), "GQA 2:1 differs from MHA with repeated KV heads");
  AttentionParams dp = p;
  dp.q_offset = static_cast<std::int64_t>(n - 1);
  const std::span<const double> last_q(q.data() + (n - 1) * H * d, H * d);
  const auto dec = ref::attention(last_q, k, v, {1, n, H, Hk, d, d}, dp, Format::fp16, to_fp16());
  for (std::size_t i = 0; i < H * d; ++i)
    if (dec.out[i] != gqa.out[(n - 1) * H * d + i])
      return fail(gqa.out.size() + i, "decode row differs from the last prefill row");
  return {true, gqa.out.size() + H * d, "GQA == MHA with repeated heads; decode row == last causal prefill row"};
}

// Agreement with the straightforward Boost mpfr_float evaluation (256 bits), fp16 and fp32 outputs,
// with a softcap and a sliding window.
CheckResult matches_naive() {
  std::uint64_t cases = 0;
  for (Format out : {Format::fp16, Format::fp32}) {
    const AttentionShape s{4, 64, 2, 1, 32, 32};
    const auto q = fp16_data(4 * 2 * 32, 9, 0.5), k = fp16_data(64 * 32, 10), v = fp16_data(64 * 32, 11);
    AttentionParams p;
    p.q_offset = 60;
    p.window = 40;
    p.softcap = 30.0;
    p.scale = 0.125;
    ref::OracleOptions o;
    o.out = out;
    const auto r = ref::attention(q, k, v, s, p, Format::fp16, o);
    const auto naive = ref::naive::attention(q, k, v, s, p, out, {}, 256);
    for (std::size_t i = 0; i < r.out.size(); ++i, ++cases)
      if (r.out[i] != naive[i])
        return fail(cases + 1, std::string(name(out)) + " element " + std::to_string(i) + ": oracle " +
                                   std::to_string(r.out[i]) + " vs Boost " + std::to_string(naive[i]));
  }
  return {true, cases, "window 40, softcap 30, GQA 2:1: oracle == Boost mpfr_float(256 bits), fp16 and fp32 out"};
}

}  // namespace

void add_oracle_checks(std::vector<SelfCheck>& out) {
  out.push_back({"oracle.equal_scores", "equal scores give the plain mean of V", equal_scores_mean});
  out.push_back({"oracle.one_visible_key", "a single visible key gives that row of V", one_visible_key});
  out.push_back(
      {"oracle.gqa_decode_row", "GQA == MHA with repeated heads; decode == last prefill row", gqa_and_decode_row});
  out.push_back({"oracle.matches_naive", "oracle vs straightforward Boost mpfr_float attention", matches_naive});
}

}  // namespace kvconf::tools
