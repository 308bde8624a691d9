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
  FlashArgs a = flash_args(D, f, c, fa2_standard_bc(D.d));
  KeysT kt;
  a.kt = &kt;
  FlashScratch sc;
  sc.reserve(a.bc);
  const std::size_t max_splits = (D.n_kv + kSplitKeys - 1) / kSplitKeys;
  std::vector<float> o_splits(std::max<std::size_t>(max_splits, 1) * D.dv);  // (splits, dv)
  std::vector<SplitPartial> parts;
  parts.reserve(max_splits);
  std::vector<float> tmp(D.dv);  // (dv)
  std::size_t n_needed = 0;
  for (std::size_t i = 0; i < D.n_q; ++i) n_needed = std::max(n_needed, visible_keys(c.params, D.n_kv, i).hi);
  for (std::size_t g = 0; g < D.kv_heads; ++g) {
    kt.fill(k.data(), n_needed, D.kv_heads, g, D.d);
    a.v = v.data() + g * D.dv;
    for (std::size_t h = g * D.group; h < (g + 1) * D.group; ++h) {
      for (std::size_t i = 0; i < D.n_q; ++i) {
        const KeyRange keys = visible_keys(c.params, D.n_kv, i);
        const float* qr = q.data() + (i * D.heads + h) * D.d;
        parts.clear();
        if (!keys.empty())
          for (std::size_t s = keys.lo / kSplitKeys; s <= (keys.hi - 1) / kSplitKeys; ++s)
            parts.push_back(split_pass(a, qr, split_keys(keys, s), o_splits.data() + parts.size() * D.dv, sc));
        combine_splits(parts, D.dv, f, out.data() + (i * D.heads + h) * D.dv, tmp.data());
      }
    }
  }
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

static AttentionKernel a7_fixedsplit(Format f) {
  AttentionKernel k = cpu_attention_kernel("cpu.attn.a7_fixedsplit." + format_suffix(f), f, run_fixedsplit);
  k.info.cache_invariant = true;
  k.info.mirrors =
      "A7: fixed split size 256 aligned at key 0 (TML / SGLang deterministic mode), A1 inside, FA2 combine";
  k.supports = [](const AttentionCall& c) { return flash2_reason(c); };
  k.pipeline = [f](const AttentionCall& c) { return fixedsplit_pipeline(f, c); };
  return k;
}

}  // namespace kvconf::kernels::cpu::attn

namespace kvconf::kernels::cpu {

// cpu.attn.a7_fixedsplit.{f16,bf16,f32} (one line in kernels.def).
void register_attention_fixedsplit(Registry& r) {
  for (const Format f : {Format::fp16, Format::bf16, Format::fp32}) r.add(attn::a7_fixedsplit(f));
}

}  // namespace kvconf::kernels::cpu
