// The numerics of one attention kernel path, described for the error bound: how scores are formed and
// rounded, how the softmax is evaluated (one pass, online over KV blocks, split across KV partitions),
// where weights and partial outputs are rounded, and how PV accumulates. attention_pipeline_bound()
// turns a description plus the oracle's condition quantities into a rigorous per-element bound
// (docs/TOLERANCES.md §6–§7).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::ref {

struct AttentionPipeline {
  std::string name;          // "flash2 bc64 blocks=4", "splitkv s=3", "eager", ...
  Format in = Format::fp16;  // q, k, v
  // Scores: d̂ = q·k by qk_spec/qk_order over the head dim, then ŝ = fl_score(d̂ · scale) (exact when scale
  // is a power of two). Eager attention rounds d̂ itself to fp16 first: set qk_spec.out = fp16.
  AccumSpec qk_spec{Format::fp16, Format::fp32, Format::fp32};
  Order qk_order = Sequential{};
  Format score = Format::fp32;
  // |τ̂ − τ| <= scale_rel_error·τ for the scale the kernel effectively applies (τ = params.scale). 0 when it
  // multiplies by params.scale itself; PyTorch's math SDPA multiplies q and k each by fl32(√τ): 2u + 2u².
  double scale_rel_error = 0.0;
  // Softcap c·tanh(ŝ/c) evaluated in `score` format: a division (or multiplication by a rounded 1/c), a
  // tanh with relative error tanh_rel_error, and a multiplication, each rounded to `score`.
  double tanh_rel_error = 0.0;
  // Softmax arithmetic (subtraction of the max, exp, row sums, rescales, divisions) in `softmax` format.
  Format softmax = Format::fp32;
  double exp_rel_error = 0.0;  // |ê − e^x| <= exp_rel_error·e^x (+ underflow of `softmax`)
  double exp_abs_error = 0.0;  // plus this absolute error (an exp that flushes e^x < 2^-126 to 0: 2^-126)
  // Online softmax: the keys of one split are visited in kv_blocks blocks; each later block rescales the
  // running row sum and output accumulator by fl(exp(m_old − m_new)) (one more rounding per term).
  std::size_t kv_blocks = 1;
  // Split-KV: keys cut into `splits` partitions, each normalised by its own row sum and stored in
  // split_out; combined with weights fl(exp(lse_s − lse)) accumulated in `softmax` format.
  std::size_t splits = 1;
  Format split_out = Format::fp32;
  bool normalize_before_pv = true;  // p = e/l before PV (eager, paged) vs o = acc/l after (flash)
  // A black-box kernel may do either: the bound is then the larger of the two (normalize_before_pv ignored).
  bool normalize_either = false;
  double denominator_eps = 0.0;                 // l + eps in the normalisation (vLLM paged: 1e-6)
  std::optional<Format> p_cast = Format::fp16;  // weights rounded to this before PV
  // PV accumulation over the keys of one block (flash: acc carries across blocks, one rescale each).
  AccumSpec pv_spec{Format::fp16, Format::fp32, Format::fp32};
  Order pv_order = Sequential{};
  std::size_t pv_terms = 0;   // length of the longest PV reduction chain (0: the visible keys)
  Format out = Format::fp16;  // final rounding
};

// Condition quantities of one output element (query row, head, column), from the oracle.
struct AttentionElementStats {
  std::size_t n_visible = 0;  // visible keys
  std::size_t head_dim = 0;   // d (length of the q·k reductions)
  double max_abs_qk = 0.0;    // max_j Σ_i |q_i k_ji| (unscaled), rounded up
  double weighted_abs = 0.0;  // Σ_j p_j |v_j|  (upper bound)
  double spread = 0.0;        // Σ_j p_j |v_j − o| (upper bound)
  double abs_o = 0.0;         // |o| (upper bound)
  double sum_abs_v = 0.0;     // Σ_j |v_j| over visible keys (upper bound)
  double max_abs_v = 0.0;     // max_j |v_j|
};

// The description of a black-box kernel (libtorch, a plugin) that states only its formats: q·k and PV in fp32
// (acc) by any order and blocking (AnyOrder, the q·k operands possibly pre-scaled by √τ), the scale applied
// anywhere (scale_rel_error 2u + 2u²), the softmax in fp32 with an exp of relative error exp_rel_error
// (PyTorch's CPU flash kernel: exp_u20), online over any blocking (one rescale per visible key at worst), no
// split-KV partitions, normalisation before or after PV, P rounded to `in` before PV when `in` is 16-bit, one
// final rounding to `out`. docs/TOLERANCES.md §10.
AttentionPipeline black_box_pipeline(Format in, Format out, std::size_t n_visible_max, double exp_rel_error,
                                     double exp_abs_error);

// |ô − o| for one element computed by the pipeline, with params the call's mask/scale/softcap.
// +inf where the analysis is vacuous (never a finite wrong number).
double attention_pipeline_bound(const AttentionPipeline& p, const AttentionParams& params,
                                const AttentionElementStats& s);

// Stats of element (row i, head h, column c) from an oracle result; v: (n_kv, n_kv_heads, d_v) as passed
// to ref::attention, used for Σ|v_j| and max|v_j| over the visible keys. The oracle's double
// approximations (Σp|v|, Σp|v−o|, |o|) are rounded up by a relative (n + 2)·2^-50.
AttentionElementStats element_stats(const AttentionResult& r, std::span<const double> v, const AttentionShape& shape,
                                    const AttentionParams& params, std::size_t row, std::size_t head, std::size_t col);

}  // namespace kvconf::ref
