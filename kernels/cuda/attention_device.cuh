// Private to kernels/cuda's .cu files: the device building blocks of the CUDA attention kernels — storage
// loads/stores, fp32 exp/log/tanh with a known error, a (query row, head) block's set-up, the score of one key, the
// PV chain over a key block, the FA2 online-softmax pass of one (query row, head) over a key range, the split
// combine, and the launch of a kernel's f16 or fp32 instance. Everything is compiled with --fmad=false (see
// CMakeLists.txt): every a·b + c below is either two roundings or an explicit fmaf, never a contraction the
// compiler chose; divisions and sqrt are IEEE (no fast math); fp32 subnormals are kept (no FTZ).
//
// One block of kThreads threads handles one (query row, head); thread t owns output columns t and t + 128.
// The orders written here are the ones the CPU emulations of kernels/cpu use (A1 flash_row, A2/A7 combine),
// but exp/log/tanh are the device's double functions rounded to fp32, not glibc's: the GPU and CPU results
// are compared by the bounds only (docs/GPU.md).
#pragma once

#include <cuda_fp16.h>
#include <math.h>

#include "attention_launch.hpp"

namespace kvconf::kernels::cuda::dev {

constexpr int kThreads = 128;                  // threads per block, every attention kernel
constexpr int kMaxHeadDim = 256;               // d and d_v are 64, 128 or 256 (supports())
constexpr int kCols = kMaxHeadDim / kThreads;  // output columns per thread
constexpr int kMaxBn = 256;                    // largest key block of the split-KV decode (bn = 256 for d <= 64)

// Loads of the storage format as float (exact), stores with one RNE rounding to the storage format.
__device__ __forceinline__ float ld(const float* p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void st(float* p, size_t i, float x) { p[i] = x; }
__device__ __forceinline__ void st(__half* p, size_t i, float x) { p[i] = __float2half_rn(x); }
// fl_fp16(x) as a float (the cast of P before PV in the f16 kernels).
__device__ __forceinline__ float round_half(float x) { return __half2float(__float2half_rn(x)); }

// exp, log, tanh in fp32: CUDA's double functions (max error 1 ulp of double, CUDA Programming Guide, "Double-
// Precision Floating-Point Functions") rounded once to float, so |error| <= 2^-24 + 2^-52(1 + 2^-24) relative,
// within kExpRelError = 2^-24 + 2^-51 of kernels/fast_fp.hpp that the pipelines declare. Slower than expf /
// __expf (2 ulp / much more), chosen so the bound the CPU emulations use holds as written.
__device__ __forceinline__ float exp_f32(float x) { return static_cast<float>(exp(static_cast<double>(x))); }
__device__ __forceinline__ float log_f32(float x) { return static_cast<float>(log(static_cast<double>(x))); }
__device__ __forceinline__ float tanh_f32(float x) { return static_cast<float>(tanh(static_cast<double>(x))); }

// Shared memory of one block.
struct Smem {
  float q[kMaxHeadDim];  // (d) the query row as float
  float s[kMaxBn];       // (block) scores of the current key block
  float p[kMaxBn];       // (block) exp weights of the current key block
  float red[kThreads];   // reductions
};

// Loads query row `row`, head h into sm.q (then __syncthreads()).
template <class T>
__device__ void load_q(const DevAttn& a, const T* q, int row, int h, Smem& sm) {
  for (int t = threadIdx.x; t < a.d; t += kThreads) sm.q[t] = ld(q, (static_cast<size_t>(row) * a.heads + h) * a.d + t);
  __syncthreads();
}

// The block of a one-block-per-(query row, head) kernel (blockIdx.x = row · heads + h): its query row and head, KV
// head g, the caches, its output row and the row's visible keys [lo, hi).
template <class T>
struct RowBlock {
  int row, h, g;
  const T* k;  // (cap, kv_heads, d)
  const T* v;  // (cap, kv_heads, dv)
  T* out;      // (dv)
  int lo, hi;
};

template <class T>
__device__ RowBlock<T> row_block(const DevAttn& a) {
  RowBlock<T> b;
  b.row = blockIdx.x / a.heads;
  b.h = blockIdx.x % a.heads;
  b.g = b.h / (a.heads / a.kv_heads);
  b.k = static_cast<const T*>(a.k);
  b.v = static_cast<const T*>(a.v);
  b.out = static_cast<T*>(a.out) + (static_cast<size_t>(b.row) * a.heads + b.h) * a.dv;
  b.lo = a.key_lo[b.row];
  b.hi = a.key_hi[b.row];
  return b;
}

// Writes zeros to this thread's columns of out (a row with no visible key: the oracle's convention).
template <class T>
__device__ void store_zero(const DevAttn& a, T* out) {
  for (int i = 0; i < kCols; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < a.dv) st(out, c, 0.0f);
  }
}

// Starts the block b: a row with no visible key gets zeros (store_zero) and false; otherwise its query row is loaded
// into sm.q (load_q) and true. Every thread of the block takes the same branch.
template <class T>
__device__ bool start_row(const DevAttn& a, const RowBlock<T>& b, Smem& sm) {
  if (b.hi <= b.lo) {
    store_zero(a, b.out);
    return false;
  }
  load_q(a, static_cast<const T*>(a.q), b.row, b.h, sm);
  return true;
}

// acc[i] = fmaf(p[j], v_{j0+j, c}, acc[i]) for j = 0 .. n−1 ascending (one fp32 chain per column) for this thread's
// columns c = threadIdx.x + i·kThreads < dv; v rows of KV head g.
template <class T>
__device__ void pv_block(const DevAttn& a, const T* v, int g, const float* p, int j0, int n, float (&acc)[kCols]) {
  for (int i = 0; i < kCols; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c >= a.dv) break;
    float x = acc[i];
    for (int j = 0; j < n; ++j) x = fmaf(p[j], ld(v, (static_cast<size_t>(j0 + j) * a.kv_heads + g) * a.dv + c), x);
    acc[i] = x;
  }
}

// Score of key j (KV head g) after the scale and softcap, in fp32:
//   s = q_0·k_0, then s = fmaf(q_t, k_t, s) for t = 1 .. d−1 (one sequential chain; products of fp16 values are
//   exact in fp32); s = fl(s · scale); softcap c > 0: s = fl(c · tanh_f32(fl(s / c)))  [order of the CPU
//   kernels' score_chains + scale_scores].
template <class T>
__device__ float score(const DevAttn& a, const T* k, const Smem& sm, int j, int g) {
  const T* kr = k + (static_cast<size_t>(j) * a.kv_heads + g) * a.d;
  float s = __fmul_rn(sm.q[0], ld(kr, 0));
  for (int t = 1; t < a.d; ++t) s = fmaf(sm.q[t], ld(kr, t), s);
  s = __fmul_rn(s, a.scale);
  if (a.softcap > 0.0f) s = __fmul_rn(tanh_f32(__fdiv_rn(s, a.softcap)), a.softcap);
  return s;
}

// Result of one online-softmax pass, identical in every thread of the block.
struct Pass {
  float m;  // running max (scaled scores)
  float l;  // row sum
};

// The FA2 online softmax (notes/kernels.md §2.1; the CPU flash_row of kernels/cpu/attention_flash2.cpp) of one
// query row (in sm.q), KV head g, over keys [lo, hi) (not empty): blocks of bc keys aligned at key 0, visited in
// descending order. Per block [j0, j1):
//   s_j (score()), block max mb (exact);
//   first block: m = mb; later blocks: m_new = max(m, mb), α = exp_f32(fl(m − m_new)), the four row-sum
//   partials and acc are multiplied by α (one rounding each), m = m_new;
//   p_j = exp_f32(fl(s_j − m));
//   row-sum partial q = (col mod 8) / 2 (col = j − block start: the four threads of an MMA quad) adds the fp32
//   p_j of its columns in ascending j (threads 0..3 hold partials 0..3);
//   CastP: p_j = fl_fp16(p_j) (after the row sum, before PV);
//   with_pv: acc[c] = fmaf(p_j, v_{j,c}, acc[c]) for j = j0 .. j1−1 ascending (thread-owned columns).
// At the end l = (l0 + l2) + (l1 + l3) (the quad all-reduce, xor 2 then xor 1).
// acc: this thread's columns c = threadIdx.x + i·kThreads, i < kCols (zeroed here).
template <class T, bool CastP>
__device__ Pass flash_pass(const DevAttn& a, const T* k, const T* v, int g, int lo, int hi, int bc, bool with_pv,
                           Smem& sm, float (&acc)[kCols]) {
  const int tid = threadIdx.x;
  for (int i = 0; i < kCols; ++i) acc[i] = 0.0f;
  float m = 0.0f;
  float l_part = 0.0f;  // partial `tid` of the row sum (threads 0..3)
  bool first = true;
  const int b_lo = lo / bc;
  for (int b = (hi - 1) / bc; b >= b_lo; --b) {
    const int start = b * bc;
    const int j0 = max(lo, start), j1 = min(hi, start + bc), n = j1 - j0;
    __syncthreads();  // the previous block's readers of sm.s / sm.p are done
    for (int j = tid; j < n; j += kThreads) sm.s[j] = score(a, k, sm, j0 + j, g);
    __syncthreads();
    float mb = sm.s[0];
    for (int j = 1; j < n; ++j) mb = sm.s[j] > mb ? sm.s[j] : mb;
    if (first) {
      m = mb;
    } else {
      const float m_new = mb > m ? mb : m;
      const float alpha = exp_f32(__fsub_rn(m, m_new));
      l_part = __fmul_rn(l_part, alpha);
      for (int i = 0; i < kCols; ++i) acc[i] = __fmul_rn(acc[i], alpha);
      m = m_new;
    }
    for (int j = tid; j < n; j += kThreads) sm.p[j] = exp_f32(__fsub_rn(sm.s[j], m));
    __syncthreads();
    if (tid < 4)
      for (int j = 0; j < n; ++j)
        if ((((j0 + j - start) & 7) >> 1) == tid) l_part = __fadd_rn(l_part, sm.p[j]);
    __syncthreads();
    if (CastP)
      for (int j = tid; j < n; j += kThreads) sm.p[j] = round_half(sm.p[j]);
    __syncthreads();
    if (with_pv) pv_block(a, v, g, sm.p, j0, n, acc);
    first = false;
  }
  __syncthreads();
  if (tid < 4) sm.red[tid] = l_part;
  __syncthreads();
  const float l = __fadd_rn(__fadd_rn(sm.red[0], sm.red[2]), __fadd_rn(sm.red[1], sm.red[3]));
  __syncthreads();
  return {m, l};
}

// The split combine (FA2 combine_attn_seqk_parallel, notes §2.2; the CPU combine_splits) of n_parts splits whose
// normalised outputs o_s (fp32, part_o + s·o_stride, dv columns) and lse_s (part_lse[s]; −inf = empty split,
// left out) are in global memory: lse_max = max lse_s; sum = Σ_s exp_f32(fl(lse_s − lse_max)) ascending from 0;
// logsum = fl(log_f32(sum) + lse_max); o = Σ_s fmaf(exp_f32(fl(lse_s − logsum)), o_s, o) ascending s from 0;
// out = fl_out(o). No non-empty split: out = 0. Every thread evaluates the scalars (identical values) and writes
// its own columns of out (row/head offset applied by the caller).
template <class T>
__device__ void combine(const DevAttn& a, const float* part_o, size_t o_stride, const float* part_lse, int n_parts,
                        T* out) {
  bool any = false;
  float lse_max = 0.0f;
  for (int s = 0; s < n_parts; ++s) {
    const float x = part_lse[s];
    if (x == -INFINITY) continue;
    lse_max = (!any || x > lse_max) ? x : lse_max;
    any = true;
  }
  float logsum = 0.0f;
  if (any) {
    float sum = 0.0f;
    for (int s = 0; s < n_parts; ++s)
      if (part_lse[s] != -INFINITY) sum = __fadd_rn(sum, exp_f32(__fsub_rn(part_lse[s], lse_max)));
    logsum = __fadd_rn(log_f32(sum), lse_max);
  }
  for (int i = 0; i < kCols; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c >= a.dv) break;
    float o = 0.0f;
    if (any)
      for (int s = 0; s < n_parts; ++s)
        if (part_lse[s] != -INFINITY) o = fmaf(exp_f32(__fsub_rn(part_lse[s], logsum)), part_o[s * o_stride + c], o);
    st(out, c, o);
  }
}

// The blocks of the one-block-per-(query row, head) kernels.
inline unsigned row_blocks(const DevAttn& a) { return static_cast<unsigned>(a.n_q) * static_cast<unsigned>(a.heads); }

// Launches f16_kernel (f16) or f32_kernel on `blocks` blocks of kThreads threads on the default stream; returns
// cudaGetLastError().
inline cudaError_t launch(unsigned blocks, const DevAttn& a, bool f16, void (*f16_kernel)(DevAttn),
                          void (*f32_kernel)(DevAttn)) {
  void (*const kernel)(DevAttn) = f16 ? f16_kernel : f32_kernel;
  kernel<<<blocks, kThreads>>>(a);
  return cudaGetLastError();
}

}  // namespace kvconf::kernels::cuda::dev
