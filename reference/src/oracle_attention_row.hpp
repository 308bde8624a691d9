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
// Keys per call of detail::accumulate_ev: V rows converted per chunk into scratch (not pre), or read in place (pre).
inline constexpr std::size_t kRowChunk = 64;
inline constexpr std::size_t kPreChunk = 256;

// The fused decode path cannot decide this call (data its fixed point does not fit, or a value its one-pass test
// left undecided that the element-by-element check accepts): attention() evaluates the call the standard way.
struct Abandon {};

// Everything about one call that does not depend on the row.
struct Setup {
  AttentionShape sh;
  AttentionParams pr;
  OracleOptions op;
  Format in = Format::fp16;
  std::span<const double> q, k, v;  // q: (n_q, H, d), k: (n_kv, Hk, d), v: (n_kv, Hk, d_v)
  std::size_t group = 1;            // n_heads / n_kv_heads
  int sgn = 1;                      // sign of the effective scale (0: all logits equal)
  // Exact scores. Int path: q = Q·2^lo_q, k = K·2^lo_k with integers |Q|, |K| < 2^62 (converted on
  // the fly by the exact multiplications q·sq, k·sk), q·k = D·2^E.
  bool int_qk = false;
  bool qk64 = false;      // |D| and Σ|Q K| fit int64 (else int128)
  bool k32 = false;       // |K| < 2^31
  bool qk32 = false;      // qk64, |Q| and |K| < 2^31: the vectorised dot (detail::dot_i32)
  double sq = 0, sk = 0;  // 2^-lo_q, 2^-lo_k
  int E = 0;
  mpfr_prec_t dprec = 0;  // general path: precision holding any D_j or D_j − D_m exactly
  // Values: V = v·sv integers (level 0).
  detail::Range rv;
  int F = 0;          // level-0 fraction bits; 0 = level 0 unavailable
  double sv = 0;      // 2^-rv.lo
  bool av64 = false;  // Σ_j |V_jc| fits int64
  bool v32 = false;   // |V| < 2^31
  // K and V as integers, converted once per call when more than one (query row, head) reads each KV row (pre);
  // otherwise (one query row per KV head: decode) each row is converted where it is read, once.
  bool pre = false;
  std::vector<std::int64_t> Ki;   // (n_kv, Hk, d) K (pre && int_qk)
  std::vector<std::int64_t> Vi;   // (n_kv, Hk, d_v) V (pre && F > 0)
  std::vector<std::int64_t> AVp;  // (n_kv + 1, Hk, d_v) Σ_{j' < j} |V_j'c| (pre && F > 0 && av64)
  // Fused decode path (oracle_attention_setup.cpp): K and V validated while converted at the fixed point 2^Ls.
  bool fused = false;
  int Ls = 0;
  int span_q = 0;  // the query's range span (|Q| < 2^span_q)

  // A value failed the fused path's test: the full checks of q, k, v in this order (throwing the first error);
  // Abandon when they all pass.
  [[noreturn]] void invalid_or_abandon() const;

  const double* krow(std::size_t j, std::size_t g) const { return k.data() + (j * sh.n_kv_heads + g) * sh.d; }
  const double* vrow(std::size_t j, std::size_t g) const { return v.data() + (j * sh.n_kv_heads + g) * sh.d_v; }
  const std::int64_t* kirow(std::size_t j, std::size_t g) const { return Ki.data() + (j * sh.n_kv_heads + g) * sh.d; }
  const std::int64_t* virow(std::size_t j, std::size_t g) const {
    return Vi.data() + (j * sh.n_kv_heads + g) * sh.d_v;
  }
  const std::int64_t* avprow(std::size_t j, std::size_t g) const {
    return AVp.data() + (j * sh.n_kv_heads + g) * sh.d_v;
  }
};

// Set-up (oracle_attention_setup.cpp). setup_common fills what no range decides; setup_standard the rest from the
// inputs' ranges; setup_fused the rest for the fused decode path, returning false where it does not apply.
Setup setup_common(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                   const AttentionShape& sh, const AttentionParams& pr, Format in, const OracleOptions& op);
void setup_standard(Setup& s, const detail::Range& rq, const detail::Range& rk, const detail::Range& rv);
bool setup_fused(Setup& s, const detail::Range& rq);
AttentionResult evaluate(const Setup& s);

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
    pc_.resize(n);
    crow_.resize(n);
    vrows_.resize(s.pre ? kPreChunk : kRowChunk);
    if (s.int_qk && !s.pre) Kscr_.resize(s.sh.d);
    if (s.F > 0 && !s.pre) Vscr_.resize(kRowChunk * dv);
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
  bool v_checked_ = false;  // fused: this head's V rows have been through the test
  double sum_exp_ = 0.0;
  std::vector<i128> D_, Dabs_;         // (nv) int path: exact dots and Σ|q k|
  std::vector<Mpfr> Dm_;               // (nv) general path: exact dots
  std::vector<double> Dabs_d_;         // (nv) general path: Σ|q k| rounded up
  std::vector<std::uint64_t> Et_;      // (nv) level-0 weights Ẽ_j
  std::vector<double> p_;              // (nv) approximate probabilities (conditions)
  std::vector<i128> Nc_, AVc_;         // (d_v) level-0 numerators Ñ_c and Σ_j |V_jc|
  std::vector<std::int64_t> AV64_;     // (d_v) Σ_j |V_jc| when it fits int64
  std::vector<std::int64_t> Qr_, Qa_;  // (d) the query row as integers, and |.|
  std::vector<std::int64_t> Kscr_;     // (d) one K row as integers (not pre)
  std::vector<std::int64_t> Vscr_;     // (kRowChunk, d_v) V rows as integers (not pre)
  std::vector<const std::int64_t*> vrows_;  // the integer V rows of one chunk of keys
  std::vector<double> pc_;                  // (nv) non-zero p_j in key order (conditions)
  std::vector<const double*> crow_;         // (nv) their rows of v
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
