// A7: fixed-split-size attention (notes/kernels.md §4.1, §4.3, §8 point 3): keys cut into splits of 256
// absolute positions aligned at key 0, the A1 online softmax (Bc from the head dim only) inside each split,
// every split normalised by its own sum in fp32 with its LSE, and FA2's fixed-order combine. The same code
// runs for n_q = 1 and n_q = n, so the result of a row depends only on its position and visible keys:
// cache-invariant by construction (not on n_q, rows in the call, capacity or chunking).
#include <algorithm>
#include <vector>

#include "attention_common.hpp"
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu::attn {
namespace {

constexpr std::size_t kSplitKeys = 256;  // SGLang's Triton decode split tile (notes §4.3); a multiple of Bc

// Keys of split s visible in `keys`.
KeyRange split_keys(KeyRange keys, std::size_t s) {
  const std::size_t lo = std::max(keys.lo, s * kSplitKeys), hi = std::min(keys.hi, (s + 1) * kSplitKeys);
  return hi > lo ? KeyRange{lo, hi} : KeyRange{};
}

void run_fixedsplit(const char* who, Format f, const AttentionCall& c, std::span<const float> q,
                    std::span<const float> k, std::span<const float> v, std::span<float> out) {
  const Dims D = check_call(who, c, q.size(), k.size(), v.size(), out.size());
  FlashState st(D, f, c, fa2_standard_bc(D.d));
  const std::size_t max_splits = (D.n_kv + kSplitKeys - 1) / kSplitKeys;
  std::vector<float> o_splits(std::max<std::size_t>(max_splits, 1) * D.dv);  // (splits, dv)
  std::vector<SplitPartial> parts;
  parts.reserve(max_splits);
  std::vector<float> tmp(D.dv);  // (dv)
  // A row without a visible key gets zeros from for_each_row, as combine_splits gives for no split.
  for_each_row(c, D, q, k, v, out, st.kt, [&](const RowTask& row) {
    st.args.v = row.v;
    parts.clear();
    for (std::size_t s = row.keys.lo / kSplitKeys; s <= (row.keys.hi - 1) / kSplitKeys; ++s)
      parts.push_back(
          split_pass(st.args, row.q, split_keys(row.keys, s), o_splits.data() + parts.size() * D.dv, st.scratch));
    combine_splits(parts, D.dv, f, row.out, tmp.data());
  });
}

ref::AttentionPipeline fixedsplit_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = base_pipeline(f);
  const std::size_t bc = fa2_standard_bc(c.shape.d);
  std::size_t blocks = 1, splits = 1, terms = 1;
  for (std::size_t i = 0; i < c.shape.n_q; ++i) {
    const KeyRange keys = visible_keys(c.params, c.shape.n_kv, i);
    if (keys.empty()) continue;
    const std::size_t s_lo = keys.lo / kSplitKeys, s_hi = (keys.hi - 1) / kSplitKeys;
    splits = std::max(splits, s_hi - s_lo + 1);
    for (std::size_t s = s_lo; s <= s_hi; ++s) {
      const KeyRange r = split_keys(keys, s);
      blocks = std::max(blocks, blocks_touched(r, bc));
      terms = std::max(terms, r.size());
    }
  }
  p.name = "fixedsplit " + std::to_string(kSplitKeys) + " bc" + std::to_string(bc) +
           " splits=" + std::to_string(splits) + " blocks=" + std::to_string(blocks);
  p.kv_blocks = blocks;
  p.splits = splits;
  p.split_out = Format::fp32;
  p.normalize_before_pv = false;
  p.pv_terms = terms;  // the PV chain restarts in every split
  return p;
}

}  // namespace

}  // namespace kvconf::kernels::cpu::attn

namespace kvconf::kernels::cpu {

// cpu.attn.a7_fixedsplit.{f16,bf16,f32} (one line in kernels.def).
void register_attention_fixedsplit(Registry& r) {
  attn::register_per_format(
      r,
      {.stem = "a7_fixedsplit",
       .cache_invariant = true,
       .mirrors = "A7: fixed split size 256 aligned at key 0 (TML / SGLang deterministic mode), A1 inside, FA2 combine",
       .run = attn::run_fixedsplit,
       .supports = attn::flash2_reason,
       .pipeline = attn::fixedsplit_pipeline});
}

}  // namespace kvconf::kernels::cpu
