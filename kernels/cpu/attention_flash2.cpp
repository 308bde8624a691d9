// A1: FlashAttention-2 standard forward kernel (notes/kernels.md §2.1, FA2 @ 0251105a), used for prefill and
// decode alike; also the FA2 online-softmax row and the split combine that A2 and A7 build on.
//
// Emulation notes. The real kernel folds scale·log2(e) into exp2f (or, in PyTorch's vendored copy,
// exp2f(fl(s·scale) − max_scaled)) and runs with --use_fast_math; GPU exp is not bit-specified, so we use
// fl(s·scale) and exp_f32(fl(s − m)) (libm exp in double, one fp32 rounding: relative error kExpRelError).
// Softcap (FA2 folds scale/c into one multiply) is modelled as the pipeline describes it: fl(s·scale), then
// fl(c·tanh_f32(fl(s/c))). The epilogue multiplies by inv_sum = fl(1/l): o = fl_out(fl(acc·inv_sum)).
// Cache invariance: a row's arithmetic depends only on its visible keys and on blocks aligned at key 0 (a
// block the GPU tile visits with no visible key for this row rescales by exp2(0) = 1, a no-op), so decode
// (n_q = 1) equals the prefill row for the same position bit for bit, whatever the capacity or chunking.
#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_common.hpp"
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu::attn {

FlashResult flash_row(const FlashArgs& a, const float* q_row, KeyRange keys, float* acc, FlashScratch& sc) {
  std::fill(acc, acc + a.dv, 0.0f);
  float* s = sc.s.data();  // (bc) scores of the block, then p
  float* p = sc.p.data();  // (bc)
  float m = 0.0f;
  float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // row-sum partials of the four threads of an MMA quad
  bool first = true;
  const std::size_t b_lo = keys.lo / a.bc;
  for (std::size_t b = (keys.hi - 1) / a.bc + 1; b-- > b_lo;) {  // descending blocks
    const std::size_t start = b * a.bc;
    const std::size_t j0 = std::max(keys.lo, start);
    const std::size_t j1 = std::min(keys.hi, start + a.bc);
    const std::size_t n = j1 - j0;
    score_chains(q_row, *a.kt, a.d, j0, n, s);
    scale_scores(s, n, a.scale, a.softcap);
    float mb = s[0];
    for (std::size_t j = 1; j < n; ++j) mb = s[j] > mb ? s[j] : mb;
    if (first) {
      m = mb;
    } else {
      const float m_new = mb > m ? mb : m;
      const float alpha = exp_f32(m - m_new);
      for (float& x : l) x *= alpha;
      for (std::size_t c = 0; c < a.dv; ++c) acc[c] *= alpha;
      m = m_new;
    }
    for (std::size_t j = 0; j < n; ++j) p[j] = exp_f32(s[j] - m);
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t col = j0 + j - start;
      l[(col & 7u) >> 1] += p[j];
    }
    if (a.p_cast) round_n(*a.p_cast, p, n);
    pv_chain(p, a.v + j0 * a.v_stride, a.v_stride, n, a.dv, acc);
    first = false;
  }
  return {m, (l[0] + l[2]) + (l[1] + l[3])};
}

SplitPartial split_pass(const FlashArgs& a, const float* q_row, KeyRange keys, float* acc_o, FlashScratch& sc) {
  const FlashResult r = flash_row(a, q_row, keys, acc_o, sc);
  const float inv = 1.0f / r.l;
  for (std::size_t c = 0; c < a.dv; ++c) acc_o[c] *= inv;
  return {r.m + log_f32(r.l), acc_o};
}

void combine_splits(std::span<const SplitPartial> parts, std::size_t dv, Format out_fmt, float* out, float* tmp) {
  if (parts.empty()) {
    std::fill(out, out + dv, 0.0f);
    return;
  }
  float lse_max = parts[0].lse;
  for (const SplitPartial& s : parts) lse_max = s.lse > lse_max ? s.lse : lse_max;
  float sum = 0.0f;
  for (const SplitPartial& s : parts) sum += exp_f32(s.lse - lse_max);
  const float logsum = log_f32(sum) + lse_max;
  std::fill(tmp, tmp + dv, 0.0f);
  for (const SplitPartial& s : parts) {
    const float w = exp_f32(s.lse - logsum);
    for (std::size_t c = 0; c < dv; ++c) tmp[c] = std::fma(w, s.o[c], tmp[c]);
  }
  std::copy(tmp, tmp + dv, out);
  round_n(out_fmt, out, dv);
}

Reason flash2_reason(const AttentionCall& c) {
  if (Reason r = shape_reason(c)) return r;
  if (c.shape.d > 256) return "FlashAttention-2 supports head dims up to 256";
  return std::nullopt;
}

void flash2_standard_run(const char* who, Format f, const AttentionCall& c, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, std::span<float> out) {
  const Dims D = check_call(who, c, q.size(), k.size(), v.size(), out.size());
  FlashState st(D, f, c, fa2_standard_bc(D.d));
  std::vector<float> acc(D.dv);  // (dv)
  for_each_row(c, D, q, k, v, out, st.kt, [&](const RowTask& row) {
    st.args.v = row.v;
    const FlashResult r = flash_row(st.args, row.q, row.keys, acc.data(), st.scratch);
    const float inv = 1.0f / r.l;
    for (std::size_t col = 0; col < D.dv; ++col) row.out[col] = acc[col] * inv;
    round_n(f, row.out, D.dv);
  });
}

ref::AttentionPipeline flash2_standard_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = base_pipeline(f);
  const std::size_t bc = fa2_standard_bc(c.shape.d);
  std::size_t blocks = 1;
  for (std::size_t i = 0; i < c.shape.n_q; ++i)
    blocks = std::max(blocks, blocks_touched(visible_keys(c.params, c.shape.n_kv, i), bc));
  p.name = "flash2 bc" + std::to_string(bc) + " blocks=" + std::to_string(blocks);
  p.kv_blocks = blocks;
  p.normalize_before_pv = false;  // o = acc · fl(1/l) after PV
  p.pv_terms = 0;                 // one chain over all visible keys (rescaled per block)
  return p;
}

}  // namespace kvconf::kernels::cpu::attn

namespace kvconf::kernels::cpu {

// cpu.attn.a1_flash2.{f16,bf16,f32} (one line in kernels.def).
void register_attention_flash2(Registry& r) {
  attn::register_per_format(
      r, {.stem = "a1_flash2",
          .cache_invariant = true,  // same kernel, same Bc, blocks aligned at key 0 in both paths
          .mirrors = "A1: FlashAttention-2 standard forward (flash_fwd_kernel.h @ 0251105a), Bc 128 (d<=64) / 64",
          .run = attn::flash2_standard_run,
          .supports = attn::flash2_reason,
          .pipeline = attn::flash2_standard_pipeline});
}

}  // namespace kvconf::kernels::cpu
