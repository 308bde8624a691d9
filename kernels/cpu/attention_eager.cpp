// A6: HF eager attention (notes/kernels.md §2.5, modeling_llama.py @ 5dd4a635 eager_attention_forward):
//   S = Q·Kᵀ      batched GEMM, fp32 sequential FMA chain over the head dim, rounded to the format;
//   S = S·scale   PyTorch elementwise op: fp32 opmath, then one rounding to the format (fl_f(fl32(s·scale)));
//   softcap c     (Gemma-2) S/c, tanh, ·c: each an fp32 opmath op rounded to the format;
//   + mask        0 (exact) for visible keys; masked keys get weight exactly 0 (HF's finfo.min then exp
//                 underflows to 0 in fp32) and are skipped; a row with no visible key gives 0 (the oracle's
//                 convention; HF would give a uniform row);
//   softmax       fp32 per row over the full row (n_kv): max; e = exp_f32(fl(s − max)); row sum as PyTorch's
//                 warp-per-row softmax (PersistentSoftmax.cuh, rows <= 1024; the same model is used for
//                 longer rows, where PyTorch switches to a block reduction [memory]): lane t = key mod 32 sums
//                 its keys in ascending order, then the xor butterfly 16, 8, 4, 2, 1; p = fl(e / sum) in fp32,
//                 then .to(dtype) rounds p to the format;
//   O = P·V       batched GEMM with M = n_q, K = n_kv: M > 1 one sequential fp32 FMA chain over the visible
//                 keys; M = 1 split-K over the n_kv positions with s = clamp(ceil(n_kv/128), 2, 16) slices of
//                 ceil(n_kv/s) (cuBLAS's choice is undocumented; notes §1 G2), each slice a sequential chain
//                 from 0, partials added in slice order in fp32; then one rounding to the format.
// fp32 versions round nothing (every "rounding to the format" is the identity). For fp16/bf16 the scale and
// softcap steps are double roundings fl_f(fl32(·)) exactly as PyTorch evaluates them.
#include <algorithm>
#include <vector>

#include "attention_common.hpp"
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu::attn {
namespace {

std::size_t splitk_slices(std::size_t n_kv) {
  const std::size_t s = (n_kv + 127) / 128;
  return std::clamp<std::size_t>(s, 2, 16);
}

// Row sum of the persistent warp softmax: lane t = j mod 32 over absolute key index j, then the butterfly.
float warp_row_sum(const float* e, KeyRange keys) {
  float lane[32] = {};
  for (std::size_t j = keys.lo; j < keys.hi; ++j) lane[j & 31u] += e[j - keys.lo];
  for (std::size_t off = 16; off >= 1; off /= 2)
    for (std::size_t t = 0; t < off; ++t) lane[t] = lane[t] + lane[t + off];
  return lane[0];
}

void run_eager(const char* who, Format f, const AttentionCall& c, std::span<const float> q, std::span<const float> k,
               std::span<const float> v, std::span<float> out) {
  const Dims D = check_call(who, c, q.size(), k.size(), v.size(), out.size());
  const float scale = static_cast<float>(c.params.scale);
  const float cap = static_cast<float>(c.params.softcap);
  const std::size_t v_stride = D.kv_heads * D.dv;
  std::vector<float> s(std::max<std::size_t>(D.n_kv, 1));  // (n_kv) scores, then weights, of one row
  std::vector<float> acc(D.dv), part(D.dv);                // (dv)
  KeysT kt;
  const bool gemv = D.n_q == 1;
  const std::size_t slices = splitk_slices(D.n_kv);
  const std::size_t slice_len = (D.n_kv + slices - 1) / slices;
  for_each_row(c, D, q, k, v, out, kt, [&](const RowTask& row) {
    const auto& [qr, vg, keys, o] = row;
    const std::size_t n = keys.size();
    float* sr = s.data();
    score_chains(qr, kt, D.d, keys.lo, n, sr);
    round_n(f, sr, n);
    for (std::size_t j = 0; j < n; ++j) sr[j] *= scale;
    round_n(f, sr, n);
    if (cap > 0.0f) {
      for (std::size_t j = 0; j < n; ++j) sr[j] /= cap;
      round_n(f, sr, n);
      for (std::size_t j = 0; j < n; ++j) sr[j] = tanh_f32(sr[j]);
      round_n(f, sr, n);
      for (std::size_t j = 0; j < n; ++j) sr[j] *= cap;
      round_n(f, sr, n);
    }
    float m = sr[0];
    for (std::size_t j = 1; j < n; ++j) m = sr[j] > m ? sr[j] : m;
    for (std::size_t j = 0; j < n; ++j) sr[j] = exp_f32(sr[j] - m);
    const float sum = warp_row_sum(sr, keys);
    for (std::size_t j = 0; j < n; ++j) sr[j] /= sum;
    round_n(f, sr, n);
    if (!gemv) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      pv_chain(sr, vg + keys.lo * v_stride, v_stride, n, D.dv, acc.data());
    } else {
      bool first = true;
      for (std::size_t sl = 0; sl < slices; ++sl) {
        const std::size_t lo = std::max(keys.lo, sl * slice_len), hi = std::min(keys.hi, (sl + 1) * slice_len);
        if (hi <= lo) continue;  // a slice without visible keys adds exact zeros
        float* dst = first ? acc.data() : part.data();
        std::fill(dst, dst + D.dv, 0.0f);
        pv_chain(sr + (lo - keys.lo), vg + lo * v_stride, v_stride, hi - lo, D.dv, dst);
        if (!first)
          for (std::size_t col = 0; col < D.dv; ++col) acc[col] += part[col];
        first = false;
      }
    }
    std::copy(acc.begin(), acc.end(), o);
    round_n(f, o, D.dv);
  });
}

ref::AttentionPipeline eager_pipeline(Format f, const AttentionCall& c) {
  ref::AttentionPipeline p = base_pipeline(f);
  p.qk_spec.out = f;  // Q·Kᵀ rounded to the format before the scale
  p.score = f;
  p.kv_blocks = 1;
  p.splits = 1;
  p.normalize_before_pv = true;
  p.pv_spec.out = Format::fp32;
  if (c.shape.n_q == 1) {
    const std::size_t s = splitk_slices(c.shape.n_kv);
    p.name = "eager gemv splitk" + std::to_string(s);
    p.pv_order = SplitK{s};
    p.pv_terms = c.shape.n_kv;  // slices are cut over all n_kv positions (masked ones are exact zeros)
  } else {
    p.name = "eager gemm seq";
    p.pv_order = Sequential{};
    p.pv_terms = 0;
  }
  return p;
}

}  // namespace

}  // namespace kvconf::kernels::cpu::attn

namespace kvconf::kernels::cpu {

// cpu.attn.a6_eager.{f16,bf16,f32} (one line in kernels.def).
void register_attention_eager(Registry& r) {
  attn::register_per_format(
      r, {.stem = "a6_eager",
          .cache_invariant = false,
          .mirrors = "A6: HF eager attention (matmul, ·scale, softcap, fp32 softmax, matmul), PV GEMM path by M",
          .run = attn::run_eager,
          .supports = attn::shape_reason,
          .pipeline = attn::eager_pipeline});
}

}  // namespace kvconf::kernels::cpu
