// Row reductions and the per-row pipeline of the CPU RMSNorm kernels (norm_rows.hpp). Native fp32 ops
// (compiled with -ffp-contract=off: a product and an addition stay two roundings); AVX2 where it pays.
#include "norm_rows.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <vector>

#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::kernels::cpu {
namespace {

// PyTorch's last_pow2 with the MAX_NUM_THREADS cap of set_block_dimension.
std::size_t pow2_floor_capped(std::size_t n) {
  if (n >= 512) return 512;
  return n == 0 ? 1 : std::bit_floor(n);
}

// In place: level-wise adjacent pairs (0,1), (2,3), ..., an odd last element carried up; returns v[0].
float pairwise_inplace(float* v, std::size_t n) {
  while (n > 1) {
    const std::size_t h = n / 2;
    std::size_t j = 0;
#if defined(KVCONF_HAVE_F16C)
    if (simd_enabled()) {
      for (; j + 8 <= h; j += 8) {
        // hadd gives [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]; reorder the 64-bit halves.
        const __m256 s = _mm256_hadd_ps(_mm256_loadu_ps(v + 2 * j), _mm256_loadu_ps(v + 2 * j + 8));
        _mm256_storeu_ps(v + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), 0xD8)));
      }
    }
#endif
    for (; j < h; ++j) v[j] = v[2 * j] + v[2 * j + 1];
    if (n % 2 != 0) {
      v[h] = v[n - 1];
      n = h + 1;
    } else {
      n = h;
    }
  }
  return v[0];
}

}  // namespace

R1Config r1_config(std::size_t rows, std::size_t d) {
  R1Config c;
  c.vectorized = d > 128;
  if (c.vectorized && d % 4 != 0) {
    c.unsupported =
        "PyTorch vectorises rows of length d > 128 with float4 loads; with d % 4 != 0 the rows are "
        "misaligned and take a per-row head path, which is not modelled";
    return c;
  }
  const std::size_t dim0 = c.vectorized ? d / 4 : d;
  const std::size_t dim0_pow2 = pow2_floor_capped(dim0);
  const std::size_t dim1_pow2 = pow2_floor_capped(rows);
  std::size_t bw = std::min<std::size_t>(dim0_pow2, 32);
  const std::size_t bh = std::min(dim1_pow2, 512 / bw);
  bw = std::min(dim0_pow2, 512 / bh);
  // PyTorch splits the row across the block's y threads too when each thread would get many values (a
  // no-op for block_height = 1), and then possibly across CTAs (global_reduce, from the GPU's SM count).
  const std::size_t values_per_thread = (d + bw - 1) / bw;
  if ((values_per_thread >= 16 * bh || values_per_thread >= 256) && (bh > 1 || values_per_thread >= 256))
    c.unsupported =
        "PyTorch would split each row across the block's y threads (block_y_reduce) or across CTAs "
        "for this shape; not modelled";
  c.threads = bw;
  return c;
}

ThreadStrided r1_order(const R1Config& c) {
  ThreadStrided o;
  o.threads = c.threads;
  o.vec = c.vectorized ? 4 : 1;
  o.split_lanes = c.vectorized;
  o.interleave = c.vectorized ? 1 : 4;
  o.tree = ThreadTree::block_first;
  return o;
}

float sum_sq_r1(const float* x, std::size_t d, const R1Config& c) {
  const std::size_t T = c.threads;
  if (c.vectorized && d % 4 != 0) throw std::invalid_argument("kvconf::kernels::cpu::sum_sq_r1: d % 4 != 0");
  // A[e], e < 4T: the chain of x[e + 4T·q]² over q. With float4 lanes e = 4t + lane; with vt0 = 4 slots
  // e = t + slot·T. Both are the same strided chains; only the per-thread combine below differs.
  const std::size_t span = 4 * T;
  thread_local std::vector<float> A, r;
  A.assign(span, 0.0f);
  r.assign(T, 0.0f);
  const std::size_t first = std::min(span, d);
  for (std::size_t e = 0; e < first; ++e) A[e] = x[e] * x[e];
  for (std::size_t base = span; base < d; base += span) {
    const std::size_t len = std::min(span, d - base);
    const float* xb = x + base;
    for (std::size_t e = 0; e < len; ++e) A[e] = A[e] + xb[e] * xb[e];
  }
  for (std::size_t t = 0; t < T; ++t) {
    if (c.vectorized)
      r[t] = ((A[4 * t] + A[4 * t + 1]) + A[4 * t + 2]) + A[4 * t + 3];
    else
      r[t] = ((A[t] + A[t + T]) + A[t + 2 * T]) + A[t + 3 * T];
  }
  // block_x_reduce: shared-memory halving down to 32 threads, then the shfl_down tree (offsets 1, 2, ...).
  std::size_t s = T;
  for (; s > 32; s /= 2)
    for (std::size_t l = 0; l < s / 2; ++l) r[l] = r[l] + r[l + s / 2];
  for (std::size_t o = 1; o < s; o *= 2)
    for (std::size_t l = 0; l + o < s; l += 2 * o) r[l] = r[l] + r[l + o];
  return r[0];
}

float sum_sq_r2(const float* x, std::size_t d, std::size_t chunk) {
  thread_local std::vector<float> buf;
  buf.resize(std::min(chunk, std::max<std::size_t>(d, 1)));
  float S = 0.0f;
  for (std::size_t lo = 0; lo < d; lo += chunk) {
    const std::size_t len = std::min(chunk, d - lo);
    for (std::size_t i = 0; i < len; ++i) buf[i] = x[lo + i] * x[lo + i];
    const float b = pairwise_inplace(buf.data(), len);
    S = lo == 0 ? b : S + b;
  }
  return S;
}

void rms_finish_row(float S, const float* x, const float* w, std::size_t d, const NormParams& p, Format out, float* y) {
  const float f = 1.0f / static_cast<float>(d);  // fl32(1/d): d is exact in fp32 for d < 2^24
  const float var = S * f;
  const float r = rsqrt_f32(var + p.eps);
  std::size_t i = 0;
#if defined(KVCONF_HAVE_F16C)
  if (simd_enabled() && out == Format::fp16) {
    const __m256 rv = _mm256_set1_ps(r), one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= d; i += 8) {
      const __m256 h = _mm256_mul_ps(_mm256_loadu_ps(x + i), rv);
      const __m256 wv = _mm256_loadu_ps(w + i);
      // fp16·fp16 products are exact in fp32, so one F16C rounding is the correctly rounded fp16 product.
      const __m256 v = p.one_plus_weight ? round_fp16_x8(_mm256_mul_ps(h, _mm256_add_ps(one, wv)))
                                         : round_fp16_x8(_mm256_mul_ps(wv, round_fp16_x8(h)));
      _mm256_storeu_ps(y + i, v);
    }
  }
#endif
  for (; i < d; ++i) {
    const float h = x[i] * r;
    if (p.one_plus_weight)
      y[i] = round_float(out, h * (1.0f + w[i]));
    else
      y[i] = mul_format(out, w[i], round_float(out, h));
  }
}

}  // namespace kvconf::kernels::cpu
