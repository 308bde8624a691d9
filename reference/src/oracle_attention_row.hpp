// Internal to the attention oracle: the per-call Setup and the per-(row, head) evaluator RowEval,
// whose parts live in oracle_attention{,_scores,_levels}.cpp. The algorithm is described at the top
// of oracle_attention.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace kvconf::ref::attention_impl {

using detail::i128;
inline constexpr char kFn[] = "kvconf::ref::attention";
inline constexpr mpfr_prec_t kYPrec = 128;  // precision of ŷ for the fixed-point exp
inline constexpr mpfr_prec_t kFirstMpfrLevel = 128;

// Everything about one call that does not depend on the row.
struct Setup {
  AttentionShape sh;
  AttentionParams pr;
  OracleOptions op;
  std::span<const double> q, k, v;  // q: (n_q, H, d), k: (n_kv, Hk, d), v: (n_kv, Hk, d_v)
  std::size_t group = 1;            // n_heads / n_kv_heads
  int sgn = 1;                      // sign of the effective scale (0: all logits equal)
  // Exact scores. Int path: q = Q·2^lo_q, k = K·2^lo_k with integers |Q|, |K| < 2^62 (converted on
  // the fly by the exact multiplications q·sq, k·sk), q·k = D·2^E.
  bool int_qk = false;
  bool qk64 = false;      // |D| and Σ|Q K| fit int64 (else int128)
  double sq = 0, sk = 0;  // 2^-lo_q, 2^-lo_k
  int E = 0;
  mpfr_prec_t dprec = 0;  // general path: precision holding any D_j or D_j − D_m exactly
  // Values: V = v·sv integers (level 0).
  detail::Range rv;
  int F = 0;          // level-0 fraction bits; 0 = level 0 unavailable
  double sv = 0;      // 2^-rv.lo
  bool av64 = false;  // Σ_j |V_jc| fits int64

  const double* krow(std::size_t j, std::size_t g) const { return k.data() + (j * sh.n_kv_heads + g) * sh.d; }
  const double* vrow(std::size_t j, std::size_t g) const { return v.data() + (j * sh.n_kv_heads + g) * sh.d_v; }
};

struct Outputs {
  AttentionResult& res;
  std::size_t base = 0;  // (i, h) element offset into (n_q, H, d_v)
};

// One (query row, head): exact scores and all reusable scratch.
class RowEval {
 public:
  explicit RowEval(const Setup& s)
      : s_(s),
        Dprec_(std::max<mpfr_prec_t>(129, s.dprec + 1)),
        dD_(Dprec_),
        Dj_(Dprec_),
        tau_(64),
        cap_(53),
        a_(64),
        t_(64),
        th_(64),
        l_(64),
        x_(64),
        tm_(64),
        lm_(64),
        y_(kYPrec),
        ytmp_(kYPrec),
        KL_(192),
        S_(64),
        N_(64),
        tmp_(64),
        lo_(64),
        hi_(64),
        slo_(64),
        shi_(64),
        nlo_(64),
        nhi_(64),
        err_(64),
        err2_(64) {
    const std::size_t n = s.sh.n_kv, dv = s.sh.d_v;
    if (s.int_qk) {
      D_.resize(n);
      Dabs_.resize(n);
    } else {
      Dm_.reserve(n);
      for (std::size_t j = 0; j < n; ++j) Dm_.emplace_back(s.dprec);
      Dabs_d_.resize(n);
    }
    Et_.resize(n);
    p_.resize(n);
    Nc_.resize(dv);
    AVc_.resize(dv);
    AV64_.resize(dv);
    Qr_.resize(s.sh.d);
    Qa_.resize(s.sh.d);
    eptr_.resize(n);
    pptr_.resize(n);
    kept_.resize(n);
    pending_.reserve(dv);
    best_.resize(dv);
    o_.resize(dv);
    mpfr_set_d(cap_.get(), s.pr.softcap, MPFR_RNDN);
    if (!s.pr.exact_inv_sqrt_d) {
      // KL = |scale|·2^E·log2(e): ŷ_j = |ΔD_j|·KL (level 0, no softcap).
      mpfr_set_d(KL_.get(), std::fabs(s.pr.scale), MPFR_RNDN);
      mpfr_mul(KL_.get(), KL_.get(), detail::log2e_256(), MPFR_RNDN);
      mpfr_mul_2si(KL_.get(), KL_.get(), s.E, MPFR_RNDN);
      ys_ = detail::make_yscale(KL_.get());
    }
  }

  void run(std::size_t i, std::size_t h, AttentionResult& res);

 private:
  // --- exact scores --------------------------------------------------------------------------
  void scores();
  bool same_score(std::size_t a, std::size_t b) const {
    if (s_.sgn == 0) return true;
    if (s_.int_qk) return D_[a] == D_[b];
    return mpfr_equal_p(Dm_[a].get(), Dm_[b].get()) != 0;
  }
  void delta(std::size_t j, mpfr_ptr r) {  // r = D_j − D_m exactly
    if (s_.int_qk)
      detail::set_i128(r, D_[j] - D_[m_]);
    else
      mpfr_sub(r, Dm_[j].get(), Dm_[m_].get(), MPFR_RNDN);
  }
  void value(std::size_t j, mpfr_ptr r) {  // r = D_j exactly
    if (s_.int_qk)
      detail::set_i128(r, D_[j]);
    else
      mpfr_set(r, Dm_[j].get(), MPFR_RNDN);
  }

  // --- logit differences at working precision Pw -----------------------------------------------
  void begin_logits(mpfr_prec_t Pw);
  void softcapped(std::size_t j, mpfr_ptr t, mpfr_ptr l);  // t̂_j and ℓ̂_j at Pw
  // x_ := x̂_j <= 0; returns κ_j with |x̂_j − x_j| <= κ_j·2^-Pw (κ = 0: exact). The scale 2^-Pw is
  // kept apart because it underflows a double at high precision.
  double logit_diff(std::size_t j);

  // --- evaluation levels --------------------------------------------------------------------------
  bool level0(Outputs& out);
  void level_mpfr(mpfr_prec_t P, bool first, Outputs& out);
  void rational(Outputs& out);
  void finish_element(std::size_t c, double value, double approx, Outputs& out);
  bool settle(std::size_t c, double approx, Outputs& out);  // certify column c from [lo_, hi_]
  void conditions(Outputs& out);

  const Setup& s_;
  mpfr_prec_t Dprec_;
  // row state
  std::size_t i_ = 0, h_ = 0, g_ = 0, jl_ = 0, nv_ = 0, m_ = 0;
  int prec_used_ = 0;
  bool rational_used_ = false;
  double sum_exp_ = 0.0;
  std::vector<i128> D_, Dabs_;         // (nv) int path: exact dots and Σ|q k|
  std::vector<Mpfr> Dm_;               // (nv) general path: exact dots
  std::vector<double> Dabs_d_;         // (nv) general path: Σ|q k| rounded up
  std::vector<std::uint64_t> Et_;      // (nv) level-0 weights Ẽ_j
  std::vector<double> p_;              // (nv) approximate probabilities (conditions)
  std::vector<i128> Nc_, AVc_;         // (d_v) level-0 numerators Ñ_c and Σ_j |V_jc|
  std::vector<std::int64_t> AV64_;     // (d_v) Σ_j |V_jc| when it fits int64
  std::vector<std::int64_t> Qr_, Qa_;  // (d) the query row as integers, and |.|
  std::vector<Mpfr> e_, prods_;        // (nv) MPFR-level ê_j and products
  std::vector<mpfr_ptr> eptr_, pptr_;
  std::vector<std::size_t> kept_;     // (nv) indices of kept keys in the MPFR level
  std::vector<std::size_t> pending_;  // columns not yet certified
  std::vector<double> best_;          // (d_v) best available rounding of a pending column
  std::vector<double> o_;             // (d_v) approximations of o_c (conditions)
  // logit state
  mpfr_prec_t Pw_ = 0;
  bool tau_exact_ = true;
  Mpfr dD_, Dj_, tau_, cap_, a_, t_, th_, l_, x_, tm_, lm_, y_, ytmp_, KL_;
  Mpfr S_, N_, tmp_, lo_, hi_, slo_, shi_, nlo_, nhi_, err_, err2_;
  detail::YScale ys_;  // ŷ_j = |ΔD_j|·KL in integer arithmetic (level 0, case A)
};

}  // namespace kvconf::ref::attention_impl
