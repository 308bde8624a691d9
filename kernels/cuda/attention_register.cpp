// register_cuda_kernels(): the CUDA attention kernels cuda.attn.{simple,flash2,splitkv,invariant}.{f16,f32} with
// their claims, their supports() (the device reason first, so every suite skips with it where no GPU can run
// them) and the numerics of the path each call takes, as ref::AttentionPipeline, so the bounds of reference/
// apply (kernels/cuda/attention_*.cu document the orders). Compiled with and without CUDA: names are stable.
#include <algorithm>
#include <limits>
#include <string>

#include "attention_common.hpp"  // kernels/cpu: shape_reason, visible_keys, blocks_touched, base_pipeline, …
#include "cuda_attention.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels::cuda {
namespace {

using cpu::attn::base_pipeline;
using cpu::attn::blocks_touched;
using cpu::attn::KeyRange;
using cpu::attn::visible_keys;

Reason cuda_reason(const AttentionCall& c) {
  if (auto r = gpu_unavailable()) return r;
  if (Reason r = cpu::attn::shape_reason(c)) return r;
  auto dim_ok = [](std::size_t x) { return x == 64 || x == 128 || x == 256; };
  if (!dim_ok(c.shape.d) || !dim_ok(c.shape.d_v))
    return "the CUDA attention kernels support head dims 64, 128 and 256 (d = " + std::to_string(c.shape.d) +
           ", d_v = " + std::to_string(c.shape.d_v) + ")";
  constexpr std::size_t kIntMax = static_cast<std::size_t>(std::numeric_limits<int>::max());
  if (c.cap() > kIntMax / 2 || c.shape.n_q * c.shape.n_heads > kIntMax)
    return "the CUDA attention kernels index keys and blocks with int";
  return std::nullopt;
}

// Keys of split [s·K, (s+1)·K) visible in `keys`.
KeyRange split_range(KeyRange keys, std::size_t K, std::size_t s) {
  const std::size_t lo = std::max(keys.lo, s * K), hi = std::min(keys.hi, (s + 1) * K);
  return hi > lo ? KeyRange{lo, hi} : KeyRange{};
}

ref::AttentionPipeline simple_pipeline(Format f) {
  ref::AttentionPipeline p = base_pipeline(f);
  p.name = "cuda simple";
  p.kv_blocks = 1;
  p.splits = 1;
  p.normalize_before_pv = true;  // p = fl(e / l), then (f16) fl_fp16(p), then PV
  p.pv_terms = 0;                // one chain over the visible keys
  return p;
}

ref::AttentionPipeline flash2_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = cpu::attn::flash2_standard_pipeline(f, c);  // same Bc and order as A1
  p.name = "cuda " + p.name;
  return p;
}

ref::AttentionPipeline splitkv_decode_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = base_pipeline(f);
  const SplitKvPlan sp = splitkv_plan(c);
  const KeyRange keys = visible_keys(c.params, c.shape.n_kv, 0);
  std::size_t blocks = 1, nonempty = 0, terms = 1;
  for (std::size_t s = 0; s < sp.splits && !keys.empty(); ++s) {
    const KeyRange r = split_range(keys, sp.keys_per_split(), s);
    if (r.empty()) continue;
    ++nonempty;
    blocks = std::max(blocks, blocks_touched(r, sp.bn));
    terms = std::max(terms, r.size());
  }
  p.name = "cuda splitkv bn" + std::to_string(sp.bn) + " s=" + std::to_string(sp.splits) +
           " nonempty=" + std::to_string(nonempty) + " blocks=" + std::to_string(blocks);
  p.kv_blocks = blocks;
  p.splits = std::max<std::size_t>(nonempty, 1);  // empty splits are left out of the combine
  p.split_out = Format::fp32;
  p.normalize_before_pv = false;
  p.pv_terms = terms;  // the PV chain restarts in every split
  return p;
}

ref::AttentionPipeline invariant_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = base_pipeline(f);
  const std::size_t bc = flash_bc(c.shape.d), K = kInvariantSplitKeys;
  std::size_t blocks = 1, splits = 1, terms = 1;
  for (std::size_t i = 0; i < c.shape.n_q; ++i) {
    const KeyRange keys = visible_keys(c.params, c.shape.n_kv, i);
    if (keys.empty()) continue;
    const std::size_t s_lo = keys.lo / K, s_hi = (keys.hi - 1) / K;
    splits = std::max(splits, s_hi - s_lo + 1);
    for (std::size_t s = s_lo; s <= s_hi; ++s) {
      const KeyRange r = split_range(keys, K, s);
      blocks = std::max(blocks, blocks_touched(r, bc));
      terms = std::max(terms, r.size());
    }
  }
  p.name = "cuda invariant split" + std::to_string(K) + " bc" + std::to_string(bc) +
           " splits=" + std::to_string(splits) + " blocks=" + std::to_string(blocks);
  p.kv_blocks = blocks;
  p.splits = splits;
  p.split_out = Format::fp32;
  p.normalize_before_pv = false;
  p.pv_terms = terms;
  return p;
}

AttentionKernel make(AttnVariant v, Format f) {
  AttentionKernel k;
  k.info.backend = "cuda";
  k.info.in = f;
  k.info.acc = Format::fp32;
  k.info.out = f;
  k.info.partial = Format::fp32;
  k.info.deterministic = true;  // fixed orders, no atomics, one stream
  const std::string bounds_only =
      "; GPU exp/log/tanh are the device's double functions rounded to fp32 (not bit-specified): checked against "
      "the oracle and the other kernels by the bounds only";
  switch (v) {
    case AttnVariant::simple:
      k.info.name = "cuda.attn.simple." + format_suffix(f);
      k.info.cache_invariant = true;  // a row's arithmetic depends only on its visible keys
      k.info.mirrors = "plain CUDA attention, one (row, head) per block: max, sum, p = e/l, fp32 PV" + bounds_only;
      k.pipeline = [f](const AttentionCall&) { return simple_pipeline(f); };
      break;
    case AttnVariant::flash2:
      k.info.name = "cuda.attn.flash2." + format_suffix(f);
      k.info.cache_invariant = true;  // same kernel and Bc for every call, blocks aligned at key 0 (as A1)
      k.info.mirrors =
          "A1 order (FA2 standard forward, Bc 128 (d<=64) / 64, online softmax, P cast before PV)" + bounds_only;
      k.pipeline = [f](const AttentionCall& c) { return flash2_pipeline(f, c); };
      break;
    case AttnVariant::splitkv:
      k.info.name = "cuda.attn.splitkv." + format_suffix(f);
      k.info.cache_invariant = false;  // decode splits by capacity and block_n; prefill runs flash2
      k.info.mirrors =
          "A2 order (FA2 split-KV decode, num_splits_heuristic at 132 SMs, fp32 combine; prefill = "
          "flash2)" +
          bounds_only;
      k.pipeline = [f](const AttentionCall& c) {
        return c.shape.n_q == 1 ? splitkv_decode_pipeline(f, c) : flash2_pipeline(f, c);
      };
      break;
    case AttnVariant::invariant:
      k.info.name = "cuda.attn.invariant." + format_suffix(f);
      k.info.cache_invariant = true;  // one kernel, one Bc, splits of 256 absolute positions, fixed combine
      k.info.mirrors = "A7 order (fixed split 256 aligned at key 0, A1 inside, FA2 combine)" + bounds_only;
      k.pipeline = [f](const AttentionCall& c) { return invariant_pipeline(f, c); };
      break;
  }
  k.supports = [](const AttentionCall& c) { return cuda_reason(c); };
  const std::string who = k.info.name;
  k.run = [v, f, who](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                      std::span<const float> vc,
                      std::span<float> out) { run_attention(who.c_str(), v, f, c, q, kc, vc, out); };
  return k;
}

}  // namespace
}  // namespace kvconf::kernels::cuda

namespace kvconf::kernels {

void register_cuda_kernels(Registry& r) {
  using cuda::AttnVariant;
  for (const AttnVariant v : {AttnVariant::simple, AttnVariant::flash2, AttnVariant::splitkv, AttnVariant::invariant})
    for (const Format f : {Format::fp16, Format::fp32}) r.add(cuda::make(v, f));
}

}  // namespace kvconf::kernels
