// The oracle: exact dot products and projections, softmax, and attention for one query block over one
// KV head group, correctly rounded to any Format and certified (notes/numerics.md §3, §7.1).
//
// Contract shared by every function here:
// - Inputs are row-major spans of doubles holding values of the declared input Format. A value that
//   is NaN, infinite (softmax allows -inf as "masked"), or not representable in that Format is
//   rejected with std::invalid_argument naming the argument, the index and the value. The oracle
//   certifies finite mathematics only. Shapes are checked against span sizes the same way.
// - Products and sums of inputs are exact (int128 fixed point when the data's dynamic range allows,
//   exact MPFR products + mpfr_sum otherwise). exp, tanh, division and 1/sqrt(d) are evaluated in
//   MPFR (or a proven fixed-point exp) with a rigorous error bracket; the result is rounded to
//   OracleOptions::out only when both ends of the bracket round to the same value, otherwise the
//   working precision is raised (a Ziv loop, the idea behind mpfr_can_round) up to max_prec.
// - Results whose exact value is rational (a dot product; attention or softmax where all visible
//   scores tie or the tied groups of V have equal means; see attention()) are rounded from that
//   rational value exactly, so exact ties and exactly representable values are handled.
// - The sign of a zero result is not certified (an exact zero comes back as +0).
// - Limitation: under a directed rounding mode, an attention output irrationally close to a
//   representable value (e.g. one key dominating the others by a logit gap above ~2800, so that
//   o = v_dom + e^-gap·(...)) needs about gap·log2(e) bits and throws (or is flagged) past max_prec.
//   Softmax handles its analogue (p = 1/(1 + tiny)) exactly.
#pragma once

#include <mpfr.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kvconf/numerics/format.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::ref {

// An owned MPFR number (movable, not copyable).
class Mpfr {
 public:
  explicit Mpfr(mpfr_prec_t prec = 53) { mpfr_init2(v_, prec); }
  ~Mpfr() { mpfr_clear(v_); }
  Mpfr(Mpfr&& o) noexcept {
    mpfr_init2(v_, MPFR_PREC_MIN);
    mpfr_swap(v_, o.v_);
  }
  Mpfr& operator=(Mpfr&& o) noexcept {
    mpfr_swap(v_, o.v_);
    return *this;
  }
  Mpfr(const Mpfr&) = delete;
  Mpfr& operator=(const Mpfr&) = delete;

  mpfr_ptr get() { return v_; }
  mpfr_srcptr get() const { return v_; }
  double to_double(mpfr_rnd_t rnd = MPFR_RNDN) const { return mpfr_get_d(v_, rnd); }

 private:
  mpfr_t v_;
};

struct OracleOptions {
  Format out = Format::fp32;  // results are correctly rounded to this format
  RoundOptions round = {};    // rounding mode, ftz, saturate of that final rounding
  // Working-precision cap of the Ziv loop (bits). A result that cannot be certified at this
  // precision throws std::runtime_error, or is flagged (certified = 0) if throw_if_uncertified is
  // false; a flagged element holds the rounding of the double approximation (`approx`).
  mpfr_prec_t max_prec = 4096;
  bool throw_if_uncertified = true;
  // int128 fixed-point fast paths (exact dots; the level-0 attention evaluation). Off = MPFR only;
  // the results are identical (tests cross-check the two).
  bool fast_paths = true;
};

// ---------------------------------------------------------------------------------------------
// Exact dot product.

struct DotResult {
  double value = 0.0;    // Σ x_i y_i correctly rounded to options.out
  double approx = 0.0;   // the exact value rounded to the nearest double
  double abs_sum = 0.0;  // Σ |x_i y_i|, rounded up to a double
  Mpfr exact;            // the exact value (its precision is large enough to hold it)
};

// x: (n), y: (n), both values of `in`. Exact; always certified.
DotResult dot(std::span<const double> x, std::span<const double> y, Format in, const OracleOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Projection y = x Wᵀ (m = 1 is a matrix–vector product). Exact dots, one correct rounding each.

struct ProjectionResult {
  std::vector<double> y;        // (m, n_out) correctly rounded
  std::vector<double> approx;   // (m, n_out) exact value rounded to nearest double
  std::vector<double> abs_sum;  // (m, n_out) Σ_i |x_ri w_oi|, rounded up
};

// x: (m, n_in), w: (n_out, n_in).
ProjectionResult project(std::span<const double> x, std::span<const double> w, std::size_t m, std::size_t n_in,
                         std::size_t n_out, Format in, const OracleOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Softmax of one score vector. -inf marks a masked entry (probability +0); NaN and +inf throw.

struct SoftmaxResult {
  std::vector<double> p;                // (n) correctly rounded probabilities
  std::vector<double> approx;           // (n) high-precision value rounded to nearest double
  std::vector<std::uint8_t> certified;  // (n) 1 unless flagged (see OracleOptions)
  double max_score = 0.0;               // max visible score; -inf when all are masked
  double sum_exp = 0.0;                 // Σ_j exp(s_j − max) (double approximation); 0 if all masked
  std::size_t n_visible = 0;            // unmasked entries
  int precision_bits = 0;               // working precision of the last Ziv level (0: exact path only)
};

// scores: (n), finite values of `in` or -inf. All masked: every p = +0 and n_visible = 0.
SoftmaxResult softmax(std::span<const double> scores, Format in, const OracleOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Attention for one query block over one KV head group.
//
// q: (n_q, n_heads, d), k: (n_kv, n_kv_heads, d), v: (n_kv, n_kv_heads, d_v); out: (n_q, n_heads, d_v).
// Head h reads KV head h / (n_heads / n_kv_heads) (MHA: n_kv_heads = n_heads; GQA; MQA: 1).
// Query row i sits at absolute position pos = q_offset + i; key j at position j.
//   causal:            key j visible iff j <= pos (requires q_offset + n_q <= n_kv).
//   window w > 0:      causal: also pos − j < w; non-causal: |pos − j| < w (symmetric).
//                      A window >= the sequence length is legal and equals no window.
//   logits:            z_j = scale · (q · k_j)  (scale is treated as exact; or 1/sqrt(d) exactly when
//                      exact_inv_sqrt_d), then with softcap c > 0: z_j = c · tanh(z_j / c).
//   out:               o_c = Σ_j softmax(z)_j v_jc over the visible keys.
// A row with no visible key (n_kv = 0, or a non-causal window that misses every key) gives o = +0,
// n_visible = 0, max_score = -inf.
//
// Exactness: o_c is rational exactly when, grouping visible keys by equal score, every group has
// the same mean of v_·c (Lindemann–Weierstrass for distinct algebraic exponents; with a softcap the
// exponents are transcendental and this criterion is assumed — Schanuel's conjecture). Such
// elements (all scores equal → the plain mean of V; one visible key → that row of V) are rounded
// from the exact rational value. Every other element is certified by the Ziv loop.
struct AttentionShape {
  std::size_t n_q = 1, n_kv = 1, n_heads = 1, n_kv_heads = 1, d = 1, d_v = 1;
};

struct AttentionParams {
  std::int64_t q_offset = 0;  // absolute position of query row 0 (>= 0)
  bool causal = true;
  std::int64_t window = 0;        // sliding window (>= 0); 0 = none
  double scale = 1.0;             // logit scale, taken as exact (any finite value)
  bool exact_inv_sqrt_d = false;  // use 1/sqrt(d) computed in MPFR instead of `scale`
  double softcap = 0.0;           // attention-logit softcap c (>= 0); 0 = none
};

struct AttentionRowStats {  // per (query row, head)
  double max_score = 0.0;   // max visible logit (after scale and softcap); -inf if none visible
  double max_abs_qk = 0.0;  // max over visible j of Σ_i |q_i k_ji| (rounded up; unscaled)
  double sum_exp = 0.0;     // Σ_j exp(z_j − max_score) (double approximation)
  std::size_t n_visible = 0;
  int precision_bits = 0;       // 62-ish: certified by the int128 fixed-point level alone;
                                // otherwise the MPFR working precision of the last Ziv level
  bool exact_rational = false;  // some element of this row was rounded from its exact rational value
};

struct AttentionResult {
  std::vector<double> out;              // (n_q, n_heads, d_v) correctly rounded to options.out
  std::vector<double> approx;           // (n_q, n_heads, d_v) high-precision value, nearest double
  std::vector<double> sum_p_abs_v;      // (n_q, n_heads, d_v) Σ_j p_j |v_jc|   (double approximation)
  std::vector<double> sum_p_abs_dev;    // (n_q, n_heads, d_v) Σ_j p_j |v_jc − o_c| (double approx.)
  std::vector<std::uint8_t> certified;  // (n_q, n_heads, d_v) 1 unless flagged (see OracleOptions)
  std::vector<AttentionRowStats> rows;  // (n_q, n_heads)
};

AttentionResult attention(std::span<const double> q, std::span<const double> k, std::span<const double> v,
                          const AttentionShape& shape, const AttentionParams& params, Format in,
                          const OracleOptions& options = {});

}  // namespace kvconf::ref
