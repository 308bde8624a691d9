// Attention oracle, the per-call set-up: integer scales from the inputs' ranges, the level-0 fixed point, K and V
// as integers once per call, and the fused decode path that validates K and V while converting them.
#include <algorithm>
#include <cmath>
#include <string>

#include "oracle_attention_row.hpp"
#include "oracle_kernels.hpp"

namespace kvconf::ref::attention_impl {

Setup setup_common(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                   const AttentionShape& sh, const AttentionParams& pr, Format in, const OracleOptions& op) {
  Setup s;
  s.sh = sh;
  s.pr = pr;
  s.op = op;
  s.in = in;
  s.q = q;
  s.k = k;
  s.v = v;
  s.group = sh.n_heads / sh.n_kv_heads;
  s.sgn = pr.exact_inv_sqrt_d ? 1 : (pr.scale > 0) - (pr.scale < 0);
  return s;
}

void setup_standard(Setup& s, const detail::Range& rq, const detail::Range& rk, const detail::Range& rv) {
  const AttentionShape& sh = s.sh;
  s.sq = detail::fixed_scale(rq.lo);
  s.sk = detail::fixed_scale(rk.lo);
  if (s.op.fast_paths && detail::int_dot_fits(rq, rk, sh.d) && s.sq != 0 && s.sk != 0) {
    s.int_qk = true;
    s.qk64 = rq.span() + rk.span() + detail::ceil_log2(sh.d) <= 62;
    s.k32 = rk.span() <= 31;
    s.qk32 = s.qk64 && s.k32 && rq.span() <= 31;
    s.E = rq.lo + rk.lo;
  } else {
    s.dprec = detail::exact_sum_prec(rq, rk, sh.d) + 1;
  }
  s.rv = rv;
  s.sv = detail::fixed_scale(rv.lo);
  const int L = detail::ceil_log2(sh.n_kv + 1);
  const int F = std::min(62, 124 - rv.span() - L);
  if (s.op.fast_paths && rv.span() <= 62 && F >= 40 && s.sv != 0) {
    s.F = F;
    s.av64 = rv.span() + L <= 62;
    s.v32 = rv.span() <= 31;
  }
  // K and V to integers once per call (exact: scales 2^-lo); |V| prefix sums over keys give Σ_j |V_jc| of any
  // visible range by one subtraction.
  s.pre = sh.n_q * s.group > 1;
  if (s.pre && s.int_qk) {
    s.Ki.resize(s.k.size());
    detail::to_int(s.k.data(), s.sk, s.Ki.data(), s.k.size(), s.k32);
  }
  if (s.pre && s.F > 0) {
    s.Vi.resize(s.v.size());
    detail::to_int(s.v.data(), s.sv, s.Vi.data(), s.v.size(), s.v32);
    if (s.av64) {
      const std::size_t row = sh.n_kv_heads * sh.d_v;
      s.AVp.assign((sh.n_kv + 1) * row, 0);
      for (std::size_t t = 0; t < sh.n_kv * row; ++t)
        s.AVp[t + row] = s.AVp[t] + (s.Vi[t] < 0 ? -s.Vi[t] : s.Vi[t]);
    }
  }
}

// The fused decode path: one query row per KV head (each row of K and V is read by one (row, head) pair) that sees
// every key, in a format whose whole range fits one fixed point (fp16, fp8). K and V are not checked in a pass of
// their own: each row is tested (detail::FastCheck) as it is converted for the scores and the level-0 sums, which
// together read every element once. The integers are x·2^-Ls with Ls the format's smallest subnormal exponent
// instead of each tensor's own 2^-lo, so they are the standard path's times 2^(lo − Ls): the exact scores D_j and
// sums Ñ_c scale by a power of two, E and ev absorb it (the logit scale τ·2^E and the value scale 2^ev), and every
// bracket, rounding and statistic is the same number, since scaling by 2^k commutes with each rounding and the
// magnitudes stay far from overflow and underflow. The other range-dependent choices are the standard path's:
// F = 62 (the format's whole span s_f and L = ceil_log2(n_kv + 1) give 124 − s_f − L >= 62, so the data's smaller
// span gives 62 too), the int path for the scores (spans <= 40), and rational() takes the format's span, which
// only raises the precision of its exact sums. Whether the data fit (|x|·2^-Ls < 2^31 for the int32 products,
// int64 score sums) is known after each head's pass: data that do not fit, and values the test does not accept,
// abandon the path (invalid_or_abandon), and attention() evaluates the call the standard way.
bool setup_fused(Setup& s, const detail::Range& rq) {
  const AttentionShape& sh = s.sh;
  if (!s.op.fast_paths || sh.n_q != 1 || s.group != 1 || sh.n_kv == 0 || s.in == Format::fp64) return false;
  const std::int64_t pos = s.pr.q_offset, nkv = static_cast<std::int64_t>(sh.n_kv);
  std::int64_t jl = 0, jh = nkv;  // the visible range, as RowEval::run computes it
  if (s.pr.causal) jh = std::min(jh, pos + 1);
  if (s.pr.window > 0) {
    jl = std::max<std::int64_t>(jl, pos - s.pr.window + 1);
    if (!s.pr.causal) jh = std::min(jh, pos + s.pr.window);
  }
  if (jl != 0 || jh != nkv) return false;
  const FormatInfo& fi = info(s.in);
  const int Ls = detail::fixed_point_lsb(s.in), hi_fmt = std::ilogb(fi.max_finite) + 1;
  if (hi_fmt - Ls + detail::ceil_log2(sh.n_kv + 1) > 62 || rq.span() > 31) return false;
  s.sq = detail::fixed_scale(rq.lo);
  s.sk = s.sv = detail::fixed_scale(Ls);
  if (s.sq == 0 || s.sk == 0) return false;
  s.int_qk = s.qk64 = s.k32 = s.qk32 = true;
  s.E = rq.lo + Ls;
  s.rv = detail::Range{Ls, hi_fmt};
  s.F = 62;
  s.av64 = s.v32 = true;
  s.pre = false;
  s.fused = true;
  s.Ls = Ls;
  s.span_q = rq.span();
  return true;
}

void Setup::invalid_or_abandon() const {
  detail::check_values(kFn, "q", q, in);
  detail::check_values(kFn, "k", k, in);
  detail::check_values(kFn, "v", v, in);
  throw Abandon{};
}

AttentionResult evaluate(const Setup& s) {
  const AttentionShape& sh = s.sh;
  AttentionResult res;
  const std::size_t n_out = sh.n_q * sh.n_heads * sh.d_v;
  res.out.assign(n_out, 0.0);
  res.approx.assign(n_out, 0.0);
  res.sum_p_abs_v.assign(n_out, 0.0);
  res.sum_p_abs_dev.assign(n_out, 0.0);
  res.certified.assign(n_out, 1);
  res.rows.assign(sh.n_q * sh.n_heads, AttentionRowStats{});
  if (n_out == 0) return res;
  RowEval ev(s);
  for (std::size_t i = 0; i < sh.n_q; ++i)
    for (std::size_t h = 0; h < sh.n_heads; ++h) ev.run(i, h, res);
  return res;
}

}  // namespace kvconf::ref::attention_impl
