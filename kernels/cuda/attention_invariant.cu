// cuda.attn.invariant.{f16,f32}: the cache-invariant kernel. ONE kernel, ONE launch shape and ONE key block size
// (flash_bc(d)) for n_q = 1 and n_q = n: one block per (query row, head); the row's visible keys [lo, hi) are cut
// at fixed absolute positions into splits of K = kInvariantSplitKeys = 256 keys (split s: [256s, 256(s+1))),
// each split a dev::flash_pass (blocks of bc aligned at key 0) normalised by its own sum, combined in ascending
// split order (the CPU emulation A7, kernels/cpu/attention_fixedsplit.cpp):
//   pass 1, splits s = lo/256 .. (hi−1)/256 ascending: flash_pass without PV → lse_s = fl(m_s + log_f32(l_s)),
//           kept in global scratch (n_q, heads, max_splits);
//   combine scalars: lse_max, sum = Σ exp_f32(fl(lse_s − lse_max)) ascending, logsum = fl(log_f32(sum) + lse_max);
//   pass 2, same splits ascending: flash_pass with PV (recomputing m_s, l_s: the same code on the same inputs,
//           so the same bits), o_s = fl(acc · fl(1/l_s)) (fp32), o = fmaf(exp_f32(fl(lse_s − logsum)), o_s, o);
//   out = fl_out(o).
// Nothing depends on n_q, the row's index in the call, the cache capacity or chunking: decode equals the prefill
// row bit for bit (the claim cache_invariant = true). Recomputing the split in pass 2 instead of storing o_s keeps
// the scratch at one float per split (prefill of n rows would otherwise need n·H·splits·d_v floats).
#include "attention_device.cuh"

namespace kvconf::kernels::cuda {
namespace {

using namespace dev;

template <class T, bool CastP>
__global__ void __launch_bounds__(kThreads) invariant_kernel(DevAttn a) {
  __shared__ Smem sm;
  const RowBlock<T> b = row_block<T>(a);
  float* lse = a.part_lse + static_cast<size_t>(blockIdx.x) * a.max_splits;  // (splits of this row)
  if (!start_row(a, b, sm)) return;
  const T* k = b.k;
  const T* v = b.v;
  const int g = b.g, lo = b.lo, hi = b.hi;
  const int K = a.keys_per_split;
  const int s_lo = lo / K, s_hi = (hi - 1) / K;
  float acc[kCols];
  // Pass 1: the splits' log-sum-exps.
  for (int s = s_lo; s <= s_hi; ++s) {
    const Pass r = flash_pass<T, CastP>(a, k, v, g, max(lo, s * K), min(hi, (s + 1) * K), a.bc, false, sm, acc);
    if (threadIdx.x == 0) lse[s - s_lo] = __fadd_rn(r.m, log_f32(r.l));
  }
  __syncthreads();  // thread 0's lse writes are visible to the block
  const int n_parts = s_hi - s_lo + 1;
  float lse_max = lse[0];
  for (int s = 1; s < n_parts; ++s) lse_max = lse[s] > lse_max ? lse[s] : lse_max;
  float sum = 0.0f;
  for (int s = 0; s < n_parts; ++s) sum = __fadd_rn(sum, exp_f32(__fsub_rn(lse[s], lse_max)));
  const float logsum = __fadd_rn(log_f32(sum), lse_max);
  // Pass 2: the splits' outputs, combined in ascending order.
  float o[kCols];
  for (int i = 0; i < kCols; ++i) o[i] = 0.0f;
  for (int s = s_lo; s <= s_hi; ++s) {
    const Pass r = flash_pass<T, CastP>(a, k, v, g, max(lo, s * K), min(hi, (s + 1) * K), a.bc, true, sm, acc);
    const float inv = __fdiv_rn(1.0f, r.l);
    const float w = exp_f32(__fsub_rn(lse[s - s_lo], logsum));
    for (int i = 0; i < kCols; ++i) o[i] = fmaf(w, __fmul_rn(acc[i], inv), o[i]);
  }
  for (int i = 0; i < kCols; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < a.dv) st(b.out, c, o[i]);
  }
}

}  // namespace

cudaError_t launch_invariant(const DevAttn& a, bool f16) {
  return launch(row_blocks(a), a, f16, invariant_kernel<__half, true>, invariant_kernel<float, false>);
}

}  // namespace kvconf::kernels::cuda
