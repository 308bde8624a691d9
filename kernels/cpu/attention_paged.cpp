// A4: vLLM PagedAttention v1/v2 decode (notes/kernels.md §2.6; csrc/attention/attention_kernels.cuh @
// 04d1abd3, dtype_float16.cuh / dtype_float32.cuh / attention_generic.cuh for the vector ops). Prefill
// (n_q > 1) runs the A1 standard kernel (vLLM historically used FA/xformers for prefill). fp16 only.
//
// Decode model (128 threads = 4 warps, KV page = 16 tokens, thread group of 2 per key, partition 512):
//  QK   per key, Qk_dot: thread g of the pair holds the 4-element vectors g, g+2, g+4, ... of q and k, so
//       lane e of thread g runs an fp32 chain over the elements 8i + 4g + e (first a product, then FMAs);
//       each thread sums its lanes ((c0 + c1) + c2) + c3 (sum(Float4_)); the pair adds (xor-1 shuffle);
//       logit = fl(scale · qk).
//  max  exact (warp / block max).
//  sum  e_j = exp_f32(fl(logit_j − max)); thread t = (j − partition start) mod 128 adds its tokens in
//       ascending order; block_sum: per warp the xor butterfly 16..1, then the four warp sums as
//       (w0 + w2) + (w1 + w3).
//  P    p_j = fl(e_j · fl(1 / fl(sum + 1e-6f))) (normalised before PV), rounded to fp16 (from_float).
//  PV   for output element c: warp w takes the pages ≡ w (mod 4) of the partition in ascending order, lane
//       half h its tokens 8h .. 8h+7; per page dot(logits_vec, v_vec) with fp16 vectors (generic dot =
//       sum(mul)): eight fp16 products fl16(p·v), fp16 adds ((P0 + P2) + P4) + P6 and ((P1 + P3) + P5) + P7
//       (half2 lanes), then the two lanes added in fp32; accs += that in fp32; then the half pair (xor 1),
//       then the warps (w0 + w2) + (w1 + w3) (upper warps add into lower, halving); tokens past the context
//       in the last page have v zeroed and p = 0 (exact +0 products).
//  v1   when the context fits one partition or num_seqs·num_heads > 512 (and context <= 8192): one pass,
//       output fl16(acc).
//  v2   otherwise: each 512-token partition as above writes its max, raw exp sum and an fp16 output
//       (tmp_out); reduce: M = max of maxes; r_j = fl(exp_sum_j · exp_f32(fl(max_j − M))); global sum by
//       block_sum over partitions (thread t = j mod 128); inv = fl(1 / fl(global + 1e-6f));
//       acc = fma(fl(tmp_out_j · r_j), inv, acc) over j ascending (nvcc contracts `acc += a·b·c`); fl16(acc).
// GPU __expf / __fdividef / __logf are approximate; we use exp_f32 and correctly rounded division.
// No window or softcap (the kernel has neither): supports() says so.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "attention_common.hpp"
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu::attn {
namespace {

constexpr std::size_t kPage = 16;        // BLOCK_SIZE (tokens per KV page)
constexpr std::size_t kThreads = 128;    // NUM_THREADS
constexpr std::size_t kWarps = 4;        // NUM_WARPS
constexpr std::size_t kPartition = 512;  // _PARTITION_SIZE
constexpr float kEps = 1e-6f;

// block_sum<4>: per-thread partials (128), warp butterflies, then (w0 + w2) + (w1 + w3).
float block_sum(const float* partial) {
  float w[kWarps];
  for (std::size_t warp = 0; warp < kWarps; ++warp) {
    float lane[32];
    std::copy(partial + warp * 32, partial + warp * 32 + 32, lane);
    for (std::size_t off = 16; off >= 1; off /= 2)
      for (std::size_t t = 0; t < off; ++t) lane[t] = lane[t] + lane[t + off];
    w[warp] = lane[0];
  }
  return (w[0] + w[2]) + (w[1] + w[3]);
}

// Qk_dot for one key: 8 lane chains (lane L = 4g + e handles elements 8i + L), thread sums, pair add.
inline float qk_dot(const float* q, const float* k, std::size_t d) {
  float a[8];
  for (std::size_t L = 0; L < 8; ++L) a[L] = q[L] * k[L];
  for (std::size_t i = 8; i < d; i += 8)
    for (std::size_t L = 0; L < 8; ++L) a[L] = std::fma(q[i + L], k[i + L], a[L]);
  const float t0 = ((a[0] + a[1]) + a[2]) + a[3];
  const float t1 = ((a[4] + a[5]) + a[6]) + a[7];
  return t0 + t1;
}

struct PagedScratch {
  std::vector<float> logit;         // (partition tokens) logits, then p
  std::vector<float> acc;           // (warps, 2, dv) fp32 accumulators per warp and lane half
  std::vector<float> prod, lo, hi;  // (dv) fp16 products and half2-lane sums of one page half
  float partial[kThreads] = {};
};

// One partition [t0, t1) of a context of seq_len tokens (t1 <= seq_len): writes the fp32 PV result (before
// the final cast) into res and returns {max, raw exp sum}.
struct PartResult {
  float max = 0.0f, exp_sum = 0.0f;
};
PartResult partition(const float* q, const float* kg, const float* vg, std::size_t stride_k, std::size_t stride_v,
                     std::size_t d, std::size_t dv, float scale, std::size_t t0, std::size_t t1, PagedScratch& sc,
                     float* res) {
  const std::size_t n = t1 - t0;
  float* lg = sc.logit.data();
  for (std::size_t j = 0; j < n; ++j) lg[j] = scale * qk_dot(q, kg + (t0 + j) * stride_k, d);
  float m = lg[0];
  for (std::size_t j = 1; j < n; ++j) m = lg[j] > m ? lg[j] : m;
  std::fill(sc.partial, sc.partial + kThreads, 0.0f);
  for (std::size_t j = 0; j < n; ++j) {
    lg[j] = exp_f32(lg[j] - m);
    sc.partial[j % kThreads] += lg[j];
  }
  const float exp_sum = block_sum(sc.partial);
  const float inv = 1.0f / (exp_sum + kEps);
  for (std::size_t j = 0; j < n; ++j) lg[j] *= inv;
  round_n(Format::fp16, lg, n);

  // PV: pages of the partition, page_rel mod 4 = warp, half h = tokens 8h .. 8h+7 of the page.
  std::fill(sc.acc.begin(), sc.acc.end(), 0.0f);
  const std::size_t pages = (n + kPage - 1) / kPage;
  float* prod = sc.prod.data();
  float* lo = sc.lo.data();
  float* hi = sc.hi.data();
  for (std::size_t pg = 0; pg < pages; ++pg) {
    const std::size_t warp = pg % kWarps;
    for (std::size_t h = 0; h < 2; ++h) {
      const std::size_t base = pg * kPage + 8 * h;  // token offset in the partition
      for (std::size_t e = 0; e < 8; ++e) {
        float* lane = (e % 2 == 0) ? lo : hi;
        const std::size_t j = base + e;
        if (j < n) {
          const float p = lg[j];
          const float* vr = vg + (t0 + j) * stride_v;
          for (std::size_t c = 0; c < dv; ++c) prod[c] = p * vr[c];  // exact, then one fp16 rounding
          round_n(Format::fp16, prod, dv);
        } else {
          std::fill(prod, prod + dv, 0.0f);  // past the context: v zeroed, p = 0
        }
        if (e < 2) {
          std::copy(prod, prod + dv, lane);
        } else {
          // fp16 add of two fp16 values: fl16(fl32(a + b)) = fl16(a + b) (24 >= 2·11 + 2, Figueroa 1995).
          for (std::size_t c = 0; c < dv; ++c) lane[c] = lane[c] + prod[c];
          round_n(Format::fp16, lane, dv);
        }
      }
      float* a = sc.acc.data() + (warp * 2 + h) * dv;
      for (std::size_t c = 0; c < dv; ++c) a[c] += lo[c] + hi[c];
    }
  }
  for (std::size_t c = 0; c < dv; ++c) {
    float w[kWarps];
    for (std::size_t warp = 0; warp < kWarps; ++warp)
      w[warp] = sc.acc[(warp * 2) * dv + c] + sc.acc[(warp * 2 + 1) * dv + c];
    res[c] = (w[0] + w[2]) + (w[1] + w[3]);
  }
  return {m, exp_sum};
}

struct PagedPlan {
  std::size_t seq_len = 0, partitions = 1;
  bool v1 = true;
};

PagedPlan plan(const AttentionCall& c) {
  PagedPlan p;
  p.seq_len = visible_keys(c.params, c.shape.n_kv, 0).hi;  // no window: keys [0, seq_len)
  p.partitions = std::max<std::size_t>(1, (p.seq_len + kPartition - 1) / kPartition);
  const std::size_t num_seqs = 1;
  p.v1 = p.seq_len <= 8192 && (p.partitions == 1 || num_seqs * c.shape.n_heads > 512);
  return p;
}

void run_decode(const char* who, const AttentionCall& c, std::span<const float> q, std::span<const float> k,
                std::span<const float> v, std::span<float> out) {
  const Dims D = check_call(who, c, q.size(), k.size(), v.size(), out.size());
  const PagedPlan pl = plan(c);
  const float scale = static_cast<float>(c.params.scale);
  PagedScratch sc;
  sc.logit.resize(pl.v1 ? std::max<std::size_t>(pl.seq_len, 1) : kPartition);
  sc.acc.resize(kWarps * 2 * D.dv);
  sc.prod.resize(D.dv);
  sc.lo.resize(D.dv);
  sc.hi.resize(D.dv);
  std::vector<float> res(D.dv);                      // (dv)
  std::vector<float> tmp_out(pl.partitions * D.dv);  // (partitions, dv) fp16 values
  std::vector<float> maxes(pl.partitions), sums(pl.partitions);
  const std::size_t stride_k = D.kv_heads * D.d, stride_v = D.kv_heads * D.dv;
  for (std::size_t h = 0; h < D.heads; ++h) {
    const std::size_t g = h / D.group;
    float* o = out.data() + h * D.dv;  // (dv)
    if (pl.seq_len == 0) {
      std::fill(o, o + D.dv, 0.0f);
      continue;
    }
    const float* qh = q.data() + h * D.d;
    const float* kg = k.data() + g * D.d;
    const float* vg = v.data() + g * D.dv;
    if (pl.v1) {
      partition(qh, kg, vg, stride_k, stride_v, D.d, D.dv, scale, 0, pl.seq_len, sc, res.data());
      std::copy(res.begin(), res.end(), o);
      round_n(Format::fp16, o, D.dv);
      continue;
    }
    for (std::size_t pj = 0; pj < pl.partitions; ++pj) {
      const std::size_t t0 = pj * kPartition, t1 = std::min(pl.seq_len, t0 + kPartition);
      const PartResult r = partition(qh, kg, vg, stride_k, stride_v, D.d, D.dv, scale, t0, t1, sc, res.data());
      maxes[pj] = r.max;
      sums[pj] = r.exp_sum;
      std::copy(res.begin(), res.end(), tmp_out.begin() + static_cast<std::ptrdiff_t>(pj * D.dv));
      round_n(Format::fp16, tmp_out.data() + pj * D.dv, D.dv);
    }
    // Reduce kernel.
    float gmax = maxes[0];
    for (const float x : maxes) gmax = x > gmax ? x : gmax;
    std::fill(sc.partial, sc.partial + kThreads, 0.0f);
    for (std::size_t pj = 0; pj < pl.partitions; ++pj) {
      sums[pj] = sums[pj] * exp_f32(maxes[pj] - gmax);  // rescaled exp sums
      sc.partial[pj % kThreads] += sums[pj];
    }
    const float inv = 1.0f / (block_sum(sc.partial) + kEps);
    std::fill(res.begin(), res.end(), 0.0f);
    for (std::size_t pj = 0; pj < pl.partitions; ++pj) {
      const float* t = tmp_out.data() + pj * D.dv;
      for (std::size_t col = 0; col < D.dv; ++col) res[col] = std::fma(t[col] * sums[pj], inv, res[col]);
    }
    std::copy(res.begin(), res.end(), o);
    round_n(Format::fp16, o, D.dv);
  }
}

ref::AttentionPipeline decode_pipeline(const AttentionCall& c) {
  ref::AttentionPipeline p = base_pipeline(Format::fp16);
  const PagedPlan pl = plan(c);
  // QK: 8 interleaved fp32 chains of d/8 terms, then 3 + 1 adds; Blocked{d/8} (8 chains of d/8 terms added
  // sequentially) has at least the same depth for every term, so its bound covers this tree.
  p.qk_order = Blocked{std::max<std::size_t>(1, c.shape.d / 8)};
  p.kv_blocks = 1;  // two-pass softmax: exact max, no rescaling
  p.splits = pl.v1 ? 1 : pl.partitions;
  p.split_out = Format::fp16;  // tmp_out is fp16
  p.normalize_before_pv = true;
  p.denominator_eps = static_cast<double>(kEps);
  // PV: fp16 products and fp16 adds inside groups of 4 tokens (one half2 lane of a page-half dot), then
  // fp32 chains and trees. The descriptor has no two-level accumulation; Blocked{4} with an fp16
  // accumulator is a sound (loose) description: every term sees at most the roundings it allows.
  p.pv_spec.acc = Format::fp16;
  p.pv_spec.fma = false;
  p.pv_order = Blocked{4};
  p.pv_terms = pl.v1 ? 0 : std::min(pl.seq_len, kPartition);
  p.name = pl.v1 ? "paged v1 ctx=" + std::to_string(pl.seq_len)
                 : "paged v2 ctx=" + std::to_string(pl.seq_len) + " parts=" + std::to_string(pl.partitions);
  return p;
}

Reason paged_reason(const AttentionCall& c) {
  if (Reason r = flash2_reason(c)) return r;
  if (c.params.window > 0) return "vLLM PagedAttention v1/v2 has no sliding window";
  if (c.params.softcap > 0) return "vLLM PagedAttention v1/v2 has no logit softcap";
  if (c.shape.d % 8 != 0) return "vLLM PagedAttention needs a head dim that is a multiple of 8";
  return std::nullopt;
}

}  // namespace

static AttentionKernel a4_paged(Format f) {
  if (f != Format::fp16) throw std::invalid_argument("a4_paged: the emulation is fp16 only");
  AttentionKernel k;
  k.info.name = "cpu.attn.a4_paged.f16";
  k.info.in = Format::fp16;
  k.info.acc = Format::fp32;
  k.info.out = Format::fp16;
  k.info.partial = Format::fp16;  // fp16 page-dot partial sums; v2: fp16 per-partition outputs
  k.info.cache_invariant = false;
  k.info.mirrors = "A4: vLLM PagedAttention v1/v2 decode (attention_kernels.cuh @ 04d1abd3); A1 for prefill";
  k.supports = [](const AttentionCall& c) { return paged_reason(c); };
  k.pipeline = [](const AttentionCall& c) {
    return c.shape.n_q == 1 ? decode_pipeline(c) : flash2_standard_pipeline(Format::fp16, c);
  };
  const std::string who = k.info.name;
  k.run = [who](const AttentionCall& c, std::span<const float> q, std::span<const float> kc, std::span<const float> vc,
                std::span<float> out) {
    if (c.shape.n_q == 1)
      run_decode(who.c_str(), c, q, kc, vc, out);
    else
      flash2_standard_run(who.c_str(), Format::fp16, c, q, kc, vc, out);
  };
  return k;
}

}  // namespace kvconf::kernels::cpu::attn

namespace kvconf::kernels::cpu {

// cpu.attn.a4_paged.f16 (one line in kernels.def).
void register_attention_paged(Registry& r) { r.add(attn::a4_paged(Format::fp16)); }

}  // namespace kvconf::kernels::cpu
