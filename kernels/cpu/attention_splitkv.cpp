// A2: FlashAttention-2 split-KV ("flash-decoding", notes/kernels.md §2.2, FA2 @ 0251105a). Prefill (n_q > 1)
// runs the standard kernel (A1). Decode (n_q = 1) runs the split kernel, as flash_attn_with_kvcache does
// when new K/V are appended in the call (force_split_kernel): block_n = 256 / 128 / 64 for head dims
// <= 64 / <= 128 / 256, n_blocks = ceil(capacity / block_n) (FA2 passes the cache capacity as seqlen_k),
// split count from num_splits_heuristic over batch · heads · m_blocks tiles (AttentionCall::batch: a sequence
// splits differently inside a batched decode step) with an emulated H100 (132 SMs, the caller passes 2·SMs), splits
// of ceil(n_blocks / S) blocks aligned at key 0. Each split is an A1 pass normalised by its own sum (fp32)
// with lse = m + log_f32(l); empty splits have lse = −inf and contribute 0; combine_splits() then casts
// once. With S = 1 FA2 runs the split kernel without the combine and writes fl_out(acc·inv_sum), which is
// what combine_splits() gives for one split. Not cache-invariant: block_n and the splits differ from the
// prefill's Bc = 64/128 blocks.
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_common.hpp"
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu::attn {
namespace {

KeyRange split_keys(KeyRange keys, const SplitKvPlan& sp, std::size_t s) {
  const std::size_t lo = std::max(keys.lo, s * sp.keys_per_split());
  const std::size_t hi = std::min(keys.hi, (s + 1) * sp.keys_per_split());
  return hi > lo ? KeyRange{lo, hi} : KeyRange{};
}

void run_decode(const char* who, Format f, const AttentionCall& c, std::span<const float> q, std::span<const float> k,
                std::span<const float> v, std::span<float> out) {
  const Dims D = check_call(who, c, q.size(), k.size(), v.size(), out.size());
  const SplitKvPlan sp = fa2_splitkv_plan(c);
  FlashState st(D, f, c, sp.bn);
  std::vector<float> o_splits(sp.splits * D.dv);  // (splits, dv)
  std::vector<SplitPartial> parts;
  std::vector<float> tmp(D.dv);  // (dv)
  // n_q = 1: one row per head. A row without a visible key gets zeros from for_each_row, as combine_splits gives for no
  // split.
  for_each_row(c, D, q, k, v, out, st.kt, [&](const RowTask& row) {
    st.args.v = row.v;
    parts.clear();
    for (std::size_t s = 0; s < sp.splits; ++s) {
      const KeyRange r = split_keys(row.keys, sp, s);
      if (r.empty()) continue;  // lse = −inf: weight exp(−inf) = 0, adds exact zeros
      parts.push_back(split_pass(st.args, row.q, r, o_splits.data() + parts.size() * D.dv, st.scratch));
    }
    combine_splits(parts, D.dv, f, row.out, tmp.data());
  });
}

ref::AttentionPipeline decode_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = base_pipeline(f);
  const SplitKvPlan sp = fa2_splitkv_plan(c);
  const KeyRange keys = visible_keys(c.params, c.shape.n_kv, 0);
  std::size_t blocks = 1, nonempty = 0, terms = 1;
  for (std::size_t s = 0; s < sp.splits && !keys.empty(); ++s) {
    const KeyRange r = split_keys(keys, sp, s);
    if (r.empty()) continue;
    ++nonempty;
    blocks = std::max(blocks, blocks_touched(r, sp.bn));
    terms = std::max(terms, r.size());
  }
  p.name = "splitkv bn" + std::to_string(sp.bn) + " s=" + std::to_string(sp.splits) +
           " nonempty=" + std::to_string(nonempty) + " blocks=" + std::to_string(blocks);
  p.kv_blocks = blocks;
  p.splits = std::max<std::size_t>(nonempty, 1);  // empty splits contribute exact zeros
  p.split_out = Format::fp32;
  p.normalize_before_pv = false;
  p.pv_terms = terms;
  return p;
}

}  // namespace

static AttentionKernel a2_splitkv(Format f) {
  AttentionKernel k;
  k.info.name = "cpu.attn.a2_splitkv." + format_suffix(f);
  k.info.in = f;
  k.info.acc = Format::fp32;
  k.info.out = f;
  k.info.partial = Format::fp32;
  k.info.cache_invariant = false;
  k.info.mirrors = "A2: FlashAttention-2 split-KV decode (flash_attn_with_kvcache) + standard kernel for prefill";
  k.supports = [](const AttentionCall& c) { return flash2_reason(c); };
  k.pipeline = [f](const AttentionCall& c) {
    return c.shape.n_q == 1 ? decode_pipeline(f, c) : flash2_standard_pipeline(f, c);
  };
  const std::string who = k.info.name;
  k.run = [f, who](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                   std::span<const float> vc, std::span<float> out) {
    if (c.shape.n_q == 1)
      run_decode(who.c_str(), f, c, q, kc, vc, out);
    else
      flash2_standard_run(who.c_str(), f, c, q, kc, vc, out);
  };
  return k;
}

SplitKvPlan fa2_splitkv_plan(const AttentionCall& c) {
  const ref::AttentionShape& s = c.shape;
  SplitKvPlan p;
  p.bn = fa2_split_bn(s.d);
  p.n_blocks = std::max<std::size_t>(1, (c.cap() + p.bn - 1) / p.bn);
  // seqlen_q == 1 with GQA packs the q heads of one KV head into the rows of one tile ("ngroups swapped",
  // flash_api.cpp L431/L1319) when there is no window and the head dim is a multiple of 8.
  const bool swapped = s.n_heads > s.n_kv_heads && c.params.window == 0 && s.d % 8 == 0;
  const std::size_t heads = swapped ? s.n_kv_heads : s.n_heads;
  const std::size_t rows = swapped ? s.n_heads / s.n_kv_heads : 1;
  const std::size_t m_blocks = (rows + 63) / 64;
  // FA2 passes batch · heads · m_blocks: the same sequence splits differently inside a batched decode step.
  p.splits = static_cast<std::size_t>(
      num_splits_heuristic(static_cast<int>(std::max<std::size_t>(c.batch, 1) * heads * m_blocks), 2 * kFa2SMs,
                           static_cast<int>(p.n_blocks), 128));
  p.blocks_per_split = (p.n_blocks + p.splits - 1) / p.splits;
  return p;
}

// flash_api.cpp num_splits_heuristic (L281–315, notes §2.2): one split when the grid already fills 80 % of
// the SMs; otherwise the smallest eligible split count whose wave efficiency is within 85 % of the best
// (a count is eligible when it changes ceil(n_blocks / s)).
int num_splits_heuristic(int batch_nheads_mblocks, int num_sms, int num_n_blocks, int max_splits) {
  if (static_cast<float>(batch_nheads_mblocks) >= 0.8f * static_cast<float>(num_sms)) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  auto ceildiv = [](int a, int b) { return (a + b - 1) / b; };
  auto eligible = [&](int s) { return s == 1 || ceildiv(num_n_blocks, s) != ceildiv(num_n_blocks, s - 1); };
  std::vector<float> eff(static_cast<std::size_t>(std::max(max_splits, 0)), 0.0f);
  float best = 0.0f;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) continue;
    const float waves = static_cast<float>(batch_nheads_mblocks * s) / static_cast<float>(num_sms);
    eff[static_cast<std::size_t>(s - 1)] = waves / std::ceil(waves);
    best = std::max(best, eff[static_cast<std::size_t>(s - 1)]);
  }
  for (int s = 1; s <= max_splits; ++s)
    if (eligible(s) && eff[static_cast<std::size_t>(s - 1)] >= 0.85 * best) return s;
  return 1;
}

}  // namespace kvconf::kernels::cpu::attn

namespace kvconf::kernels::cpu {

// cpu.attn.a2_splitkv.{f16,f32} (one line in kernels.def).
void register_attention_splitkv(Registry& r) {
  for (const Format f : {Format::fp16, Format::fp32}) r.add(attn::a2_splitkv(f));
}

}  // namespace kvconf::kernels::cpu
