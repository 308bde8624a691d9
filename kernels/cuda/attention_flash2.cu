// cuda.attn.flash2.{f16,f32} (FA2-style prefill, also the prefill path of splitkv) and the split-KV decode of
// cuda.attn.splitkv.{f16,f32}. Numerics of every row: dev::flash_pass (attention_device.cuh), i.e. the order of
// the CPU emulation A1 (kernels/cpu/attention_flash2.cpp): key blocks of bc aligned at key 0 in descending
// order, online softmax with fp32 running max and row-sum partials, P cast to fp16 before PV (f16), fp32 PV.
//   flash2:  one block per (query row, head); o = fl_out(acc · fl(1/l)). Cache-invariant: a row's arithmetic
//            depends only on its visible keys (blocks aligned at absolute key 0), not on n_q or capacity.
//   splitkv decode (n_q = 1): kernel 1, one block per (head, split s): keys [s·K, (s+1)·K) ∩ visible
//            (K = keys_per_split, blocks of bn aligned at key 0), o_s = fl(acc · fl(1/l)) in fp32 and
//            lse_s = fl(m + log_f32(l)) to scratch (empty split: lse_s = −inf); kernel 2, one block per head:
//            dev::combine in ascending split order, one cast to the output format.
#include "attention_device.cuh"

namespace kvconf::kernels::cuda {
namespace {

using namespace dev;

template <class T, bool CastP>
__global__ void __launch_bounds__(kThreads) flash2_kernel(DevAttn a) {
  __shared__ Smem sm;
  const RowBlock<T> b = row_block<T>(a);
  if (!start_row(a, b, sm)) return;
  float acc[kCols];
  const Pass r = flash_pass<T, CastP>(a, b.k, b.v, b.g, b.lo, b.hi, a.bc, true, sm, acc);
  const float inv = __fdiv_rn(1.0f, r.l);
  for (int i = 0; i < kCols; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < a.dv) st(b.out, c, __fmul_rn(acc[i], inv));
  }
}

// Kernel 1 of the decode: block (h, s) = (blockIdx.x / splits, blockIdx.x % splits), query row 0.
template <class T, bool CastP>
__global__ void __launch_bounds__(kThreads) splitkv_partial_kernel(DevAttn a) {
  __shared__ Smem sm;
  const int h = blockIdx.x / a.splits, s = blockIdx.x % a.splits;
  const int g = h / (a.heads / a.kv_heads);
  float* o_s = a.part_o + (static_cast<size_t>(h) * a.splits + s) * a.dv;  // (dv)
  float* lse_s = a.part_lse + static_cast<size_t>(h) * a.splits + s;
  const int lo = max(a.key_lo[0], s * a.keys_per_split);
  const int hi = min(a.key_hi[0], (s + 1) * a.keys_per_split);
  if (hi <= lo) {
    if (threadIdx.x == 0) *lse_s = -INFINITY;
    return;
  }
  load_q(a, static_cast<const T*>(a.q), 0, h, sm);
  float acc[kCols];
  const Pass r =
      flash_pass<T, CastP>(a, static_cast<const T*>(a.k), static_cast<const T*>(a.v), g, lo, hi, a.bc, true, sm, acc);
  const float inv = __fdiv_rn(1.0f, r.l);
  for (int i = 0; i < kCols; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < a.dv) o_s[c] = __fmul_rn(acc[i], inv);
  }
  if (threadIdx.x == 0) *lse_s = __fadd_rn(r.m, log_f32(r.l));
}

// Kernel 2 of the decode: block h combines the head's splits.
template <class T>
__global__ void __launch_bounds__(kThreads) splitkv_combine_kernel(DevAttn a) {
  const int h = blockIdx.x;
  T* out = static_cast<T*>(a.out) + static_cast<size_t>(h) * a.dv;  // (dv) of row 0
  combine(a, a.part_o + static_cast<size_t>(h) * a.splits * a.dv, static_cast<size_t>(a.dv),
          a.part_lse + static_cast<size_t>(h) * a.splits, a.splits, out);
}

}  // namespace

cudaError_t launch_flash2(const DevAttn& a, bool f16) {
  return launch(row_blocks(a), a, f16, flash2_kernel<__half, true>, flash2_kernel<float, false>);
}

cudaError_t launch_splitkv_decode(const DevAttn& a, bool f16) {
  const unsigned blocks = static_cast<unsigned>(a.heads) * static_cast<unsigned>(a.splits);
  if (const cudaError_t e =
          launch(blocks, a, f16, splitkv_partial_kernel<__half, true>, splitkv_partial_kernel<float, false>);
      e != cudaSuccess)
    return e;
  // Same stream: kernel 2 starts after kernel 1 has written every split.
  return launch(static_cast<unsigned>(a.heads), a, f16, splitkv_combine_kernel<__half>, splitkv_combine_kernel<float>);
}

}  // namespace kvconf::kernels::cuda
