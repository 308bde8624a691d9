// cuda.attn.simple.{f16,f32}: the plain one-row-per-block attention kernel. One block of 128 threads per
// (query row i, head h), KV head g = h / (H / H_kv); keys [lo, hi) visible to the row (host-computed). Three
// passes over the keys, each recomputing the scores s_j with the same code (so the same bits):
//   1. m = max_j s_j                     (thread t takes keys lo + t + 128r; exact, any order)
//   2. l = Σ_j exp_f32(fl(s_j − m))      thread t adds its keys lo + t + 128r in ascending r (fp32, from 0),
//                                        then a fixed tree over the 128 partials: red[t] += red[t + off] for
//                                        off = 64, 32, …, 1
//   3. p_j = fl(exp_f32(fl(s_j − m)) / l) (IEEE fp32 division), f16: p_j = fl_fp16(p_j);
//      acc[c] = fmaf(p_j, v_{j,c}, acc[c]) for j = lo .. hi−1 ascending (one fp32 chain per column), in chunks
//      of 128 keys whose weights are staged in shared memory;
//   out = fl_out(acc). No visible key: out = 0.
// A row's result depends only on its q, its visible keys and their K/V rows: decode (n_q = 1) gives the bits of
// the same row in a prefill, whatever the capacity (cache_invariant).
#include "attention_device.cuh"

namespace kvconf::kernels::cuda {
namespace {

using namespace dev;

template <class T, bool CastP>
__global__ void __launch_bounds__(kThreads) simple_kernel(DevAttn a) {
  __shared__ Smem sm;
  const int tid = threadIdx.x;
  const RowBlock<T> b = row_block<T>(a);
  if (!start_row(a, b, sm)) return;
  const T* k = b.k;
  const int g = b.g, lo = b.lo, hi = b.hi;

  // 1. max
  float mt = -INFINITY;
  for (int j = lo + tid; j < hi; j += kThreads) {
    const float s = score(a, k, sm, j, g);
    mt = s > mt ? s : mt;
  }
  sm.red[tid] = mt;
  __syncthreads();
  float m = sm.red[0];
  for (int t = 1; t < kThreads; ++t) m = sm.red[t] > m ? sm.red[t] : m;
  __syncthreads();

  // 2. row sum
  float lt = 0.0f;
  for (int j = lo + tid; j < hi; j += kThreads) lt = __fadd_rn(lt, exp_f32(__fsub_rn(score(a, k, sm, j, g), m)));
  sm.red[tid] = lt;
  __syncthreads();
  for (int off = kThreads / 2; off >= 1; off /= 2) {
    if (tid < off) sm.red[tid] = __fadd_rn(sm.red[tid], sm.red[tid + off]);
    __syncthreads();
  }
  const float l = sm.red[0];

  // 3. weights and PV
  float acc[kCols];
  for (int i = 0; i < kCols; ++i) acc[i] = 0.0f;
  for (int j0 = lo; j0 < hi; j0 += kThreads) {
    const int n = min(kThreads, hi - j0);
    __syncthreads();  // the previous chunk's readers of sm.p are done
    if (tid < n) {
      float p = __fdiv_rn(exp_f32(__fsub_rn(score(a, k, sm, j0 + tid, g), m)), l);
      if (CastP) p = round_half(p);
      sm.p[tid] = p;
    }
    __syncthreads();
    pv_block(a, b.v, g, sm.p, j0, n, acc);
  }
  for (int i = 0; i < kCols; ++i) {
    const int c = tid + i * kThreads;
    if (c < a.dv) st(b.out, c, acc[i]);
  }
}

}  // namespace

cudaError_t launch_simple(const DevAttn& a, bool f16) {
  return launch(row_blocks(a), a, f16, simple_kernel<__half, true>, simple_kernel<float, false>);
}

}  // namespace kvconf::kernels::cuda
