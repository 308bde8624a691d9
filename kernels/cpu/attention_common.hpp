// Private to the CPU attention kernels (attention_*.cpp): call checks, the oracle's visibility rule, K
// transposed per KV head (so score chains vectorise across keys), vector rounding helpers, the FA2 online
// softmax over one key range (attention_flash2.cpp), the split combine shared by A2 and A7, and the kernel
// description and per-format registration of A1, A6 and A7.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/kernels/kernel.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels::cpu::attn {

// ---------------------------------------------------------------------------------------------
// Shapes and checks.

struct Dims {
  std::size_t n_q = 0, n_kv = 0, cap = 0;  // query rows, filled cache rows, cache rows
  std::size_t heads = 0, kv_heads = 0, group = 0, d = 0, dv = 0;
};

// Checks the call against the spans (throws std::invalid_argument naming `who`); returns its dims.
// q: (n_q, heads, d), k: (cap, kv_heads, d), v: (cap, kv_heads, dv), out: (n_q, heads, dv).
Dims check_call(const char* who, const AttentionCall& c, std::size_t q, std::size_t k, std::size_t v, std::size_t out);

// Reasons shared by every attention kernel (malformed shapes become reasons so suites skip, not crash).
Reason shape_reason(const AttentionCall& c);

// Keys [lo, hi) visible to query row `row` (absolute position q_offset + row), as ref::attention defines
// them: causal j <= pos; window w > 0: pos − j < w, and |pos − j| < w when not causal. Empty: lo == hi == 0.
struct KeyRange {
  std::size_t lo = 0, hi = 0;
  bool empty() const { return hi <= lo; }
  std::size_t size() const { return empty() ? 0 : hi - lo; }
};
KeyRange visible_keys(const ref::AttentionParams& p, std::size_t n_kv, std::size_t row);

// ---------------------------------------------------------------------------------------------
// Arithmetic helpers (each element's operation order is exactly the loop's; loops only vectorise across
// independent elements).

inline float log_f32(float x) { return static_cast<float>(std::log(static_cast<double>(x))); }

// x[i] = fl_f(x[i]) for f in {fp16, bf16, fp32} (fp32: unchanged).
void round_n(Format f, float* x, std::size_t n);

// K of one KV head transposed, kt[t·ld + j] = k_cache[j, g, t] for keys j in [0, n): read only for rows
// below n (callers pass n <= n_kv, so unused cache rows are never touched). (d, ld)
class KeysT {
 public:
  void fill(const float* k_cache, std::size_t n, std::size_t kv_heads, std::size_t g, std::size_t d);
  const float* data() const { return data_.data(); }
  std::size_t ld() const { return ld_; }

 private:
  std::vector<float> data_;
  std::size_t ld_ = 0;
};

// One query row of one head, as for_each_row hands it to a kernel.
struct RowTask {
  const float* q = nullptr;  // (d) the query row of head h
  const float* v = nullptr;  // v_cache + g·dv: V of the head's KV head g, key j at v + j·kv_heads·dv
  KeyRange keys;             // the row's visible keys (not empty)
  float* out = nullptr;      // (dv) the output row
};

// The rows of a call in the kernels' order: for each KV head g, K of g is transposed into kt (the keys any row reads,
// never rows >= n_kv), then for each query head h of g's group and each query row i, row(RowTask) runs; a row without
// a visible key gets zeros instead (the oracle's convention).
template <class Row>
void for_each_row(const AttentionCall& c, const Dims& D, std::span<const float> q, std::span<const float> k,
                  std::span<const float> v, std::span<float> out, KeysT& kt, Row&& row) {
  std::size_t n_needed = 0;
  for (std::size_t i = 0; i < D.n_q; ++i) n_needed = std::max(n_needed, visible_keys(c.params, D.n_kv, i).hi);
  for (std::size_t g = 0; g < D.kv_heads; ++g) {
    kt.fill(k.data(), n_needed, D.kv_heads, g, D.d);
    for (std::size_t h = g * D.group; h < (g + 1) * D.group; ++h)
      for (std::size_t i = 0; i < D.n_q; ++i) {
        float* o = out.data() + (i * D.heads + h) * D.dv;
        const KeyRange keys = visible_keys(c.params, D.n_kv, i);
        if (keys.empty())
          std::fill(o, o + D.dv, 0.0f);
        else
          row(RowTask{q.data() + (i * D.heads + h) * D.d, v.data() + g * D.dv, keys, o});
      }
  }
}

// s[j] = q·k_{j0+j} for j in [0, n), each a sequential fp32 FMA chain over the head dim:
// s = q_0·k_0, then s = fma(q_t, k_t, s) for t = 1 .. d−1 (products of fp16/bf16 values are exact).
void score_chains(const float* q, const KeysT& kt, std::size_t d, std::size_t j0, std::size_t n, float* s);

// acc[c] = fma(p[j], v[j0 + j, c], acc[c]) for j = 0 .. n−1 in order, every c; v rows `v_stride` apart.
void pv_chain(const float* p, const float* v, std::size_t v_stride, std::size_t n, std::size_t dv, float* acc);

// Scores after the scale (and softcap), in fp32: s = fl(s·scale); softcap c > 0: s = fl(c·tanh_f32(fl(s/c))).
void scale_scores(float* s, std::size_t n, float scale, float softcap);

// ---------------------------------------------------------------------------------------------
// FA2 online softmax (notes/kernels.md §2.1) for one (query row, head) over keys [keys.lo, keys.hi) (not
// empty): blocks of bc keys aligned at key 0, visited in descending order; per block: fp32 scores, block
// max, for every block but the first α = exp_f32(fl(m_old − m_new)) rescales the four row-sum partials and
// acc; p = exp_f32(fl(s − m)); row-sum partial t (t = (col mod 8) / 2, col = key − block start: the four
// threads of an MMA quad) adds the fp32 p of its columns in ascending order; p rounded to p_cast (if any);
// acc[c] = fma(p, v, acc[c]) over the block's keys in ascending order. At the end l = (l0 + l2) + (l1 + l3)
// (the quad all-reduce, xor 2 then xor 1).
struct FlashArgs {
  const KeysT* kt = nullptr;  // K of the row's KV head, transposed
  const float* v = nullptr;   // v_cache + g·dv: row j at v + j·v_stride
  std::size_t v_stride = 0;   // kv_heads·dv
  std::size_t d = 0, dv = 0, bc = 64;
  float scale = 1.0f, softcap = 0.0f;
  std::optional<Format> p_cast;  // weights rounded to this before PV (nullopt: fp32 kernel)
};

// The FlashArgs of a call with KV blocks of bc keys (kt and v are set per KV head by the caller).
inline FlashArgs flash_args(const Dims& D, Format f, const AttentionCall& c, std::size_t bc) {
  FlashArgs a;
  a.d = D.d;
  a.dv = D.dv;
  a.bc = bc;
  a.v_stride = D.kv_heads * D.dv;
  a.scale = static_cast<float>(c.params.scale);
  a.softcap = static_cast<float>(c.params.softcap);
  if (f != Format::fp32) a.p_cast = f;
  return a;
}

struct FlashScratch {
  std::vector<float> s, p;  // (bc)
  void reserve(std::size_t bc) {
    s.resize(bc);
    p.resize(bc);
  }
};

// The FA2 state of a call's rows (A1, A2, A7): FlashArgs with blocks of bc keys reading K from kt (filled per KV head
// by for_each_row; args.v is set per row by the caller) and the rows' scratch. Not copyable: args.kt points at kt.
struct FlashState {
  KeysT kt;
  FlashArgs args;
  FlashScratch scratch;
  FlashState(const Dims& D, Format f, const AttentionCall& c, std::size_t bc) : args(flash_args(D, f, c, bc)) {
    args.kt = &kt;
    scratch.reserve(args.bc);
  }
  FlashState(const FlashState&) = delete;
  FlashState& operator=(const FlashState&) = delete;
};

struct FlashResult {
  float m = 0.0f;  // running max (scaled scores)
  float l = 0.0f;  // row sum after the quad all-reduce
};

// acc: (dv), overwritten with the unnormalised PV accumulator.
FlashResult flash_row(const FlashArgs& a, const float* q_row, KeyRange keys, float* acc, FlashScratch& sc);

// Number of bc-blocks intersecting [lo, hi) (0 when empty).
inline std::size_t blocks_touched(KeyRange r, std::size_t bc) {
  return r.empty() ? 0 : (r.hi - 1) / bc - r.lo / bc + 1;
}

// ---------------------------------------------------------------------------------------------
// Split-KV combine (FA2 combine_attn_seqk_parallel, notes §2.2), used by A2 and A7. Each non-empty split s
// holds o_s = fl(acc_s · fl(1/l_s)) in fp32 and lse_s = fl(m_s + log_f32(l_s)); empty splits (lse = −inf)
// contribute exact zeros and are left out. lse_max = max lse_s; sum = Σ_s exp_f32(fl(lse_s − lse_max)) in
// ascending s; logsum = fl(log_f32(sum) + lse_max); o = Σ_s fma(exp_f32(fl(lse_s − logsum)), o_s, o) in
// ascending s from 0 (nvcc contracts `o += w·o_s`); out = fl_out(o).
struct SplitPartial {
  float lse = 0.0f;
  const float* o = nullptr;  // (dv)
};
void combine_splits(std::span<const SplitPartial> parts, std::size_t dv, Format out_fmt, float* out, float* tmp);

// Splits' shared pass: flash_row over keys, then o = fl(acc·fl(1/l)) (fp32) and lse.
SplitPartial split_pass(const FlashArgs& a, const float* q_row, KeyRange keys, float* acc_o, FlashScratch& sc);

// ---------------------------------------------------------------------------------------------
// FA2 block sizes (flash_fwd_launch_template.h @ 0251105a, notes §2.1/§2.2; A100/H100 rows).
inline std::size_t fa2_standard_bc(std::size_t d) { return d <= 64 ? 128 : 64; }
inline std::size_t fa2_split_bn(std::size_t d) { return d <= 64 ? 256 : (d <= 128 ? 128 : 64); }

// The arithmetic of one call as a kernel file defines it: run(who, f, call, q, k_cache, v_cache, out).
using RunFn = void (*)(const char* who, Format f, const AttentionCall& c, std::span<const float> q,
                       std::span<const float> k, std::span<const float> v, std::span<float> out);
// A CPU attention kernel `name` in format f (fp32 accumulation and partials) whose run calls `run` under its name;
// the kernel file adds its claims, mirrors, supports() and pipeline.
AttentionKernel cpu_attention_kernel(std::string name, Format f, RunFn run);

// What a CPU attention kernel file states about its kernel cpu.attn.<stem>.<format suffix>; the rest is
// cpu_attention_kernel's.
struct CpuAttentionSpec {
  const char* stem = "";  // "a1_flash2"
  bool cache_invariant = false;
  const char* mirrors = "";
  RunFn run = nullptr;
  Reason (*supports)(const AttentionCall&) = nullptr;
  ref::AttentionPipeline (*pipeline)(Format, const AttentionCall&) = nullptr;
};
// Adds the spec's kernel in fp16, bf16 and fp32, in that order.
void register_per_format(Registry& r, const CpuAttentionSpec& s);

// A1's standard-kernel run and pipeline, shared by A2 and A4 for their prefill paths.
void flash2_standard_run(const char* who, Format f, const AttentionCall& c, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, std::span<float> out);
ref::AttentionPipeline flash2_standard_pipeline(Format f, const AttentionCall& c);
Reason flash2_reason(const AttentionCall& c);

// The pipeline fields every fp32-softmax kernel of format f shares (formats, exp/tanh errors).
ref::AttentionPipeline base_pipeline(Format f);

// FA2's split count for split-KV decode (flash_api.cpp num_splits_heuristic, notes/kernels.md §2.2).
int num_splits_heuristic(int batch_nheads_mblocks, int num_sms, int num_n_blocks, int max_splits);

// FA2's split-KV decode plan, shared by the CPU A2 emulation and the CUDA split-KV kernel so that both plan the same
// splits for every call, inside a batch too (attention_splitkv.cpp): block_n = fa2_split_bn(d); n_blocks =
// ceil(capacity / block_n) (flash_attn_with_kvcache passes the cache capacity as seqlen_k); S from the heuristic with
// 2 × kFa2SMs and batch · heads · m_blocks work items (GQA "ngroups swapped" when h > h_kv, no window and d % 8 == 0:
// h_kv heads of ceil(group / 64) row blocks); each split is ceil(n_blocks / S) blocks, split s covering keys
// [s·keys_per_split, (s+1)·keys_per_split). The SM count is fixed (H100 SXM) rather than read from a device, so plans,
// pipelines and results do not depend on the machine; on an A100 (108 SMs) real FA2 may pick another S.
inline constexpr int kFa2SMs = 132;
struct SplitKvPlan {
  std::size_t bn = 128;              // the split kernel's block_n
  std::size_t n_blocks = 1;          // ceil(capacity / bn)
  std::size_t splits = 1;            // S
  std::size_t blocks_per_split = 1;  // ceil(n_blocks / S)
  std::size_t keys_per_split() const { return blocks_per_split * bn; }
};
SplitKvPlan fa2_splitkv_plan(const AttentionCall& c);

}  // namespace kvconf::kernels::cpu::attn
