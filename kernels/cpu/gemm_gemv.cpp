// gemv_thread_strided and mmvf_threads (gemm_core.hpp): the G3 GEMV of llama.cpp's mul_mat_vec_f (and the
// cuBLAS-style GEMV model for M = 1), bit-identical to numerics' ThreadStrided{T, 2, warp_first} order.
//
// Thread t visits the pairs g = t, t+T, ...: with fp32 accumulation one FFMA chain takes x[2g]·w[2g] then
// x[2g+1]·w[2g+1]; with half2 accumulation lane 0 (even terms) and lane 1 (odd terms) are separate fp16
// HFMA chains, summed in fp32. Then the xor-butterfly inside each warp of 32 and, for T > 32, a second
// butterfly over the warp sums padded with +0 to 32 lanes (mmvf.cu @ 009626c9: buf_iw zeroed, warp_reduce_sum).
//
// AVX2: 8 consecutive threads per vector (their pairs are 16 contiguous values, split into even/odd lanes),
// 4 such vectors (one warp) advance together through the full visits; a partial last visit is done per
// thread in scalar code. The warp butterfly's lane-0 value is formed with vector adds of the same pairs.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "gemm_core.hpp"
#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::kernels::cpu {
namespace {

// Lane 0 of the xor butterfly over v[0..32) (offsets 16, 8, 4, 2, 1): v[l] + v[l+o] for l < o, in fp32.
float halving32_scalar(float* v) {
  for (std::size_t o = 16; o >= 1; o /= 2)
    for (std::size_t l = 0; l < o; ++l) v[l] = v[l] + v[l + o];
  return v[0];
}

#if defined(KVCONF_HAVE_F16C)
float halving32_avx(const float* v) {
  const __m256 a = _mm256_add_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 16));          // lanes 0..7,  offset 16
  const __m256 b = _mm256_add_ps(_mm256_loadu_ps(v + 8), _mm256_loadu_ps(v + 24));      // lanes 8..15, offset 16
  const __m256 c = _mm256_add_ps(a, b);                                                 // offset 8
  const __m128 d = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));  // offset 4
  const __m128 e = _mm_add_ps(d, _mm_movehl_ps(d, d));                                  // offset 2
  const __m128 f = _mm_add_ss(e, _mm_shuffle_ps(e, e, 1));                              // offset 1
  return _mm_cvtss_f32(f);
}

// [a, b] = 16 consecutive values → their even-indexed and odd-indexed ones, in order.
inline void even_odd(__m256 a, __m256 b, __m256& even, __m256& odd) {
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}
inline void even_odd(const float* p, __m256& even, __m256& odd) {
  even_odd(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), even, odd);
}

// Full visits v < V of the 32 threads [t0, t0 + 32): fp32 chains into acc[t]. xe, xo: x's even and odd terms
// (deinterleaved once per call), so only w is split per row.
void full_visits_f32(const float* xe, const float* xo, const float* w, std::size_t T, std::size_t V, std::size_t t0,
                     float* acc) {
  __m256 a[4];
  for (std::size_t s = 0; s < 4; ++s) {
    const std::size_t g = t0 + 8 * s;
    __m256 we, wo;
    even_odd(w + 2 * g, we, wo);
    a[s] = _mm256_fmadd_ps(_mm256_loadu_ps(xo + g), wo, _mm256_mul_ps(_mm256_loadu_ps(xe + g), we));
  }
  for (std::size_t v = 1; v < V; ++v)
    for (std::size_t s = 0; s < 4; ++s) {
      const std::size_t g = t0 + 8 * s + v * T;
      __m256 we, wo;
      even_odd(w + 2 * g, we, wo);
      a[s] = _mm256_fmadd_ps(_mm256_loadu_ps(xo + g), wo, _mm256_fmadd_ps(_mm256_loadu_ps(xe + g), we, a[s]));
    }
  for (std::size_t s = 0; s < 4; ++s) _mm256_storeu_ps(acc + t0 + 8 * s, a[s]);
}

// The same with half2 lanes: the 64 terms of 32 threads are 8 vectors in which every lane is one fp16 chain
// (thread t, lane l at element 2t + l), so no deinterleaving. Then either the lanes of each thread are
// summed in fp32 into acc[t] (adjacent pairs: hadd, then the 64-bit halves put back in thread order), or,
// when a partial visit follows (lo != nullptr), they are stored apart into lo[t], hi[t].
void full_visits_half2(const float* x, const float* w, std::size_t T, std::size_t V, std::size_t t0, float* acc,
                       float* lo, float* hi) {
  __m256 a[8];
  const std::size_t e0 = 2 * t0;
  for (std::size_t s = 0; s < 8; ++s)
    a[s] = round_fp16_x8(_mm256_mul_ps(_mm256_loadu_ps(x + e0 + 8 * s), _mm256_loadu_ps(w + e0 + 8 * s)));
  for (std::size_t v = 1; v < V; ++v) {
    const std::size_t e = e0 + 2 * T * v;
    for (std::size_t s = 0; s < 8; ++s)
      a[s] = fma_fp16_x8(_mm256_loadu_ps(x + e + 8 * s), _mm256_loadu_ps(w + e + 8 * s), a[s]);
  }
  for (std::size_t s = 0; s < 4; ++s) {
    if (lo != nullptr) {
      __m256 l0, l1;
      even_odd(a[2 * s], a[2 * s + 1], l0, l1);
      _mm256_storeu_ps(lo + t0 + 8 * s, l0);
      _mm256_storeu_ps(hi + t0 + 8 * s, l1);
    } else {
      const __m256 h = _mm256_hadd_ps(a[2 * s], a[2 * s + 1]);
      _mm256_storeu_ps(acc + t0 + 8 * s, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(h), 0xD8)));
    }
  }
}
#endif

// The tree over the thread results acc[0..T): halving per warp, then over the warp sums padded with +0.
float thread_tree(const float* acc, std::size_t T, bool simd) {
  float warp_sums[32] = {};
  float lanes[32];
  for (std::size_t wi = 0; wi * 32 < T; ++wi) {
#if defined(KVCONF_HAVE_F16C)
    if (simd) {
      warp_sums[wi] = halving32_avx(acc + 32 * wi);
      continue;
    }
#endif
    std::copy(acc + 32 * wi, acc + 32 * wi + 32, lanes);
    warp_sums[wi] = halving32_scalar(lanes);
  }
  if (T == 32) return warp_sums[0];
  return halving32_scalar(warp_sums);  // the warp sums padded with +0 to 32 lanes
}

// General row: every visit in scalar code (or the vector loop's full visits, then the partial last one).
float gemv_row(bool half2, std::size_t T, const float* x, const float* w, std::size_t k, std::size_t v0, float* acc,
               float* lo, float* hi, bool simd) {
  for (std::size_t t = 0; t < T; ++t) {
    if (v0 == 0) acc[t] = lo[t] = hi[t] = 0.0f;
    for (std::size_t g = t + v0 * T; 2 * g < k; g += T) {
      const std::size_t e = 2 * g;
      const bool first = g < T;  // the thread's first visit: each chain starts with its leaf
      if (half2) {
        lo[t] = first ? round_fp16(x[e] * w[e]) : fma_format(Format::fp16, x[e], w[e], lo[t]);
        if (e + 1 < k)
          hi[t] = first ? round_fp16(x[e + 1] * w[e + 1]) : fma_format(Format::fp16, x[e + 1], w[e + 1], hi[t]);
      } else {
        acc[t] = first ? x[e] * w[e] : std::fmaf(x[e], w[e], acc[t]);
        if (e + 1 < k) acc[t] = std::fmaf(x[e + 1], w[e + 1], acc[t]);
      }
    }
    if (half2) acc[t] = lo[t] + hi[t];  // the two lanes summed in fp32
  }
  return thread_tree(acc, T, simd);
}

}  // namespace

std::size_t mmvf_threads(std::size_t k) {
  std::size_t best = 32;
  std::size_t niter_best = (k + 2 * 32 - 1) / (2 * 32);
  for (std::size_t T = 64; T <= 256; T += 32) {
    const std::size_t niter = (k + 2 * T - 1) / (2 * T);
    if (niter < niter_best) {
      niter_best = niter;
      best = T;
    }
  }
  return best;
}

void gemv_thread_strided(bool half2, std::size_t T, std::span<const float> x, std::span<const float> w, std::size_t n,
                         std::size_t k, std::span<float> y) {
  if (T == 0 || T % 32 != 0 || T > 1024)
    throw std::invalid_argument("kvconf::kernels::cpu::gemv_thread_strided: T must be a multiple of 32 up to 1024");
  if (x.size() < k || w.size() < n * k || y.size() < n)
    throw std::invalid_argument("kvconf::kernels::cpu::gemv_thread_strided: spans do not match the shape");
  std::vector<float> acc(T), lo(T), hi(T);
  const std::size_t V = k / (2 * T);  // visits in which every thread has a full pair
  const bool simd = simd_enabled();
#if defined(KVCONF_HAVE_F16C)
  if (simd && V > 0) {
    std::vector<float> xe, xo;  // fp32 path: x's even and odd terms, once per call
    if (!half2) {
      xe.resize(V * T);
      xo.resize(V * T);
      for (std::size_t g = 0; g < V * T; ++g) xe[g] = x[2 * g], xo[g] = x[2 * g + 1];
    }
    for (std::size_t j = 0; j < n; ++j) {
      const float* wj = w.data() + j * k;
      const bool tail = 2 * T * V != k;  // a partial last visit follows, done per thread in scalar code
      for (std::size_t t0 = 0; t0 < T; t0 += 32) {
        if (half2) {
          full_visits_half2(x.data(), wj, T, V, t0, acc.data(), tail ? lo.data() : nullptr, hi.data());
        } else {
          full_visits_f32(xe.data(), xo.data(), wj, T, V, t0, acc.data());
        }
      }
      y[j] = tail ? gemv_row(half2, T, x.data(), wj, k, V, acc.data(), lo.data(), hi.data(), true)
                  : thread_tree(acc.data(), T, true);
    }
    return;
  }
#endif
  for (std::size_t j = 0; j < n; ++j)
    y[j] = gemv_row(half2, T, x.data(), w.data() + j * k, k, 0, acc.data(), lo.data(), hi.data(), simd);
}

}  // namespace kvconf::kernels::cpu
