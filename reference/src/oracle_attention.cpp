// Oracle: attention for one query block over one KV head group (MHA/GQA/MQA, causal mask with a
// query offset, sliding window, tanh softcap, any scale), correctly rounded and certified.
//
// Per (query row, head), over the visible keys j (a contiguous range):
//  1. Exact scores. D_j = q·k_j exactly (int128 fixed point, or exact MPFR products + mpfr_sum).
//     The argmax m of the logits is found exactly (logits are monotone in scale·D_j).
//  2. Level 0 (int128 fixed point; notes/numerics.md §3.1). ŷ_j = (z_m − z_j)·log2(e) within 2^-120
//     (pure integer arithmetic when z = scale·D: ŷ = |D_j − D_m|·KL, see detail::apply_yscale; else
//     from the MPFR logit difference at 192 bits), then Ẽ_j = round(2^F·2^-ŷ_j) by the proven
//     fixed-point exp (|Ẽ_j − 2^F e_j| <= η = 3, e_j = exp(z_j − z_m); F = 62 unless V's range is wide),
//     then Σ̃ = Σ Ẽ_j and Ñ_c = Σ Ẽ_j V_jc exactly in int128 (V_jc = v_jc·2^-ev integers). So
//       2^F·S ∈ [Σ̃ − η n, Σ̃ + η n],   2^(F−ev)·N_c ∈ [Ñ_c − η Σ_j|V_jc|, Ñ_c + η Σ_j|V_jc|],
//     and o_c = N_c / S lies in the quotient interval. Certified when both ends round alike.
//  3. Elements not certified: the exact rational test (header comment in oracle.hpp); rational
//     elements are rounded from the exact value.
//  4. MPFR levels P = 128, 256, ... <= max_prec. With u = 2^-P and working precision Pw = P + 64 for
//     the logit differences (x̂_j, with a bound δx_j on |x̂_j − x_j|, zero when exact):
//       ê_j = RN_P(exp(x̂_j))   ⇒ |ê_j/e_j − 1| <= (1+u)e^{δx_j} − 1 <= ρ := 1.01(u + max δx);
//       keys with x̂_j < −(2P+64)ln2 − 1 are dropped (e_j < ω := 2^-(2P+64));
//       Ŝ = mpfr_sum(ê) = RN_P(T), T = Σ_kept ê   ⇒ S ∈ [Ŝ(1−u)/(1+ρ), Ŝ(1+u)/(1−ρ) + n_drop ω];
//       N̂_c = mpfr_sum(ê_j v_jc) (exact products) ⇒ |N_c − N̂_c| <= u|N̂_c| + ρ/(1−ρ)·W + n_drop ω vmax,
//         W = Σ_kept ê_j|v_jc| <= Ŝ(1+u)·vmax, vmax = max_j |v_jc|.
//     This is the a-priori bound of the MPFR evaluation (relative (n + d)-free: the sums are
//     correctly rounded by mpfr_sum, so only one rounding per exp and per sum enters); the quotient
//     interval is evaluated with directed rounding. Certified when both ends round alike.
// The integers K·2^-lo_k and V·2^-ev are made once per call, and the integer sums of steps 1–2 are exact in any
// order (oracle_attention_setup.cpp, oracle_kernels.hpp); the fused decode path also checks K and V while making
// them, at the format's own fixed point (setup_fused: the same numbers scaled by powers of two).
#include <algorithm>
#include <cmath>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "oracle_attention_row.hpp"
#include "oracle_kernels.hpp"

namespace kvconf::ref {
namespace attention_impl {

void RowEval::run(std::size_t i, std::size_t h, AttentionResult& res) {
  const AttentionShape& sh = s_.sh;
  i_ = i;
  h_ = h;
  g_ = h / s_.group;
  Outputs out{res, (i * sh.n_heads + h) * sh.d_v};
  AttentionRowStats& st = res.rows[i * sh.n_heads + h];
  // Visible keys: a contiguous range [jl, jh).
  const std::int64_t pos = s_.pr.q_offset + static_cast<std::int64_t>(i);
  const std::int64_t nkv = static_cast<std::int64_t>(sh.n_kv);
  std::int64_t jl = 0, jh = nkv;
  if (s_.pr.causal) jh = std::min(jh, pos + 1);
  if (s_.pr.window > 0) {
    jl = std::max<std::int64_t>(jl, pos - s_.pr.window + 1);
    if (!s_.pr.causal) jh = std::min(jh, pos + s_.pr.window);
  }
  if (jh <= jl) {  // fully masked row: o = +0
    st = AttentionRowStats{-HUGE_VAL, 0.0, 0.0, 0, 0, false};
    for (std::size_t c = 0; c < sh.d_v; ++c) {
      res.out[out.base + c] = 0.0;
      res.approx[out.base + c] = 0.0;
      res.sum_p_abs_v[out.base + c] = 0.0;
      res.sum_p_abs_dev[out.base + c] = 0.0;
    }
    return;
  }
  jl_ = static_cast<std::size_t>(jl);
  nv_ = static_cast<std::size_t>(jh - jl);
  prec_used_ = 0;
  rational_used_ = false;
  v_checked_ = false;
  scores();

  pending_.clear();
  bool first_done = false;
  if (s_.op.fast_paths) {
    for (std::size_t c = 0; c < sh.d_v; ++c) pending_.push_back(c);
    const std::vector<std::size_t> all = pending_;
    pending_.clear();
    // level0 pushes the columns it could not certify into pending_.
    if (level0(out))
      first_done = true;
    else
      pending_ = all;
  } else {
    for (std::size_t c = 0; c < sh.d_v; ++c) pending_.push_back(c);
  }
  if (s_.fused && !v_checked_) {  // level 0 stopped before reading V: test this head's rows of V here
    detail::ConvertCheck chk(s_.in);
    for (std::size_t j = 0; j < nv_; ++j) chk.add(s_.vrow(jl_ + j, g_), sh.d_v);
    if (int bits = 0; !chk.finish(&bits)) s_.invalid_or_abandon();
  }
  mpfr_prec_t P = std::min<mpfr_prec_t>(kFirstMpfrLevel, std::max<mpfr_prec_t>(s_.op.max_prec, 32));
  if (!first_done) {
    level_mpfr(P, true, out);
    P *= 2;
  }
  if (!pending_.empty()) rational(out);
  for (; !pending_.empty() && P <= s_.op.max_prec; P *= 2) level_mpfr(P, false, out);
  if (!pending_.empty()) {
    if (s_.op.throw_if_uncertified)
      throw std::runtime_error(std::string(kFn) + ": could not certify the rounding of out[" + std::to_string(i) +
                               ", " + std::to_string(h) + ", " + std::to_string(pending_.front()) +
                               "] within max_prec = " + std::to_string(s_.op.max_prec) + " bits");
    for (const std::size_t c : pending_) {
      res.out[out.base + c] = best_[c];
      res.certified[out.base + c] = 0;
    }
  }
  conditions(out);

  // Row statistics.
  st.n_visible = nv_;
  st.precision_bits = prec_used_;
  st.exact_rational = rational_used_;
  st.sum_exp = sum_exp_;
  if (s_.int_qk) {
    i128 mx = 0;
    for (std::size_t j = 0; j < nv_; ++j) mx = std::max(mx, Dabs_[j]);
    st.max_abs_qk = detail::i128_to_double(mx, s_.E, MPFR_RNDU);
  } else {
    st.max_abs_qk = *std::max_element(Dabs_d_.begin(), Dabs_d_.begin() + static_cast<std::ptrdiff_t>(nv_));
  }
  // max logit z_m (double approximation)
  begin_logits(128);
  if (s_.pr.softcap > 0) {
    st.max_score = mpfr_get_d(lm_.get(), MPFR_RNDN);
  } else {
    value(m_, Dj_.get());
    mpfr_set_prec(tmp_.get(), 128);
    mpfr_mul(tmp_.get(), Dj_.get(), tau_.get(), MPFR_RNDN);
    st.max_score = mpfr_get_d(tmp_.get(), MPFR_RNDN);
  }
}
}  // namespace attention_impl

using attention_impl::kFn;
using attention_impl::RowEval;
using attention_impl::Setup;

AttentionResult attention(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                          const AttentionShape& sh, const AttentionParams& pr, Format in, const OracleOptions& op) {
  using detail::checked_mul;
  if (sh.d < 1) throw std::invalid_argument(std::string(kFn) + ": d must be >= 1");
  if (sh.d_v < 1) throw std::invalid_argument(std::string(kFn) + ": d_v must be >= 1");
  if (sh.n_heads < 1 || sh.n_kv_heads < 1)
    throw std::invalid_argument(std::string(kFn) + ": n_heads and n_kv_heads must be >= 1");
  if (sh.n_heads % sh.n_kv_heads != 0)
    throw std::invalid_argument(std::string(kFn) + ": n_heads = " + std::to_string(sh.n_heads) +
                                " is not divisible by n_kv_heads = " + std::to_string(sh.n_kv_heads));
  if (pr.q_offset < 0)
    throw std::invalid_argument(std::string(kFn) + ": q_offset = " + std::to_string(pr.q_offset) + " is negative");
  if (pr.window < 0)
    throw std::invalid_argument(std::string(kFn) + ": window = " + std::to_string(pr.window) + " is negative");
  if (pr.causal && static_cast<std::uint64_t>(pr.q_offset) + sh.n_q > sh.n_kv)
    throw std::invalid_argument(std::string(kFn) + ": causal query positions q_offset + n_q = " +
                                std::to_string(static_cast<std::uint64_t>(pr.q_offset) + sh.n_q) +
                                " exceed n_kv = " + std::to_string(sh.n_kv));
  if (!std::isfinite(pr.scale)) throw std::invalid_argument(std::string(kFn) + ": scale is not finite");
  if (!std::isfinite(pr.softcap) || pr.softcap < 0)
    throw std::invalid_argument(std::string(kFn) + ": softcap must be finite and >= 0 (0 = none)");
  detail::check_size(kFn, "q", q.size(), checked_mul(kFn, checked_mul(kFn, sh.n_q, sh.n_heads), sh.d), "n_q*n_heads*d");
  detail::check_size(kFn, "k", k.size(), checked_mul(kFn, checked_mul(kFn, sh.n_kv, sh.n_kv_heads), sh.d),
                     "n_kv*n_kv_heads*d");
  detail::check_size(kFn, "v", v.size(), checked_mul(kFn, checked_mul(kFn, sh.n_kv, sh.n_kv_heads), sh.d_v),
                     "n_kv*n_kv_heads*d_v");
  const detail::Range rq = detail::check_values(kFn, "q", q, in);
  if (Setup s = attention_impl::setup_common(q, k, v, sh, pr, in, op); attention_impl::setup_fused(s, rq)) {
    try {
      return attention_impl::evaluate(s);
    } catch (const attention_impl::Abandon&) {
      // the standard way below
    }
  }
  const detail::Range rk = detail::check_values(kFn, "k", k, in);
  const detail::Range rv = detail::check_values(kFn, "v", v, in);
  Setup s = attention_impl::setup_common(q, k, v, sh, pr, in, op);
  attention_impl::setup_standard(s, rq, rk, rv);
  return attention_impl::evaluate(s);
}

}  // namespace kvconf::ref
