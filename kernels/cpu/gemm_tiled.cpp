// chain_gemm (gemm_core.hpp): sequential per-output chains over a k range, the inner loop of G1 (tiled,
// fp32 FFMA), G2 (split-K slices) and G4 (fp16 HFMA). K in ascending order with one FMA per step is what
// a fixed-order tiled kernel (BK = 64 chunks, k16 steps in order) computes with FFMA accumulation.
//
// AVX2: W is packed per call into groups of 4 panels of 8 columns, k-major (panel[kk][lane]), by 8×8
// register transposes; x rows are broadcast; 2 rows × 4 panels = 8 independent 8-lane chains run together.
// Scalar fallback: the same chains one output at a time (std::fmaf / fma_format), identical bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "gemm_core.hpp"
#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::kernels::cpu {
namespace {

void chain_scalar(ChainAcc acc, const float* x, const float* w, std::size_t m, std::size_t n, std::size_t k,
                  std::size_t k0, std::size_t k1, float* out) {
  for (std::size_t r = 0; r < m; ++r) {
    const float* xr = x + r * k;
    for (std::size_t j = 0; j < n; ++j) {
      const float* wj = w + j * k;
      float s = 0.0f;
      if (k1 > k0) {
        if (acc == ChainAcc::fp32) {
          s = xr[k0] * wj[k0];
          for (std::size_t kk = k0 + 1; kk < k1; ++kk) s = std::fmaf(xr[kk], wj[kk], s);
        } else {
          s = round_fp16(xr[k0] * wj[k0]);  // fp16 products are exact in fp32
          for (std::size_t kk = k0 + 1; kk < k1; ++kk) s = fma_format(Format::fp16, xr[kk], wj[kk], s);
        }
      }
      out[r * n + j] = s;
    }
  }
}

#if defined(KVCONF_HAVE_F16C)
constexpr std::size_t kLanes = 8;
constexpr std::size_t kPanels = 4;  // panels per group: 32 columns

// In-register transpose of 8 rows of 8 floats.
inline void transpose8(__m256& r0, __m256& r1, __m256& r2, __m256& r3, __m256& r4, __m256& r5, __m256& r6, __m256& r7) {
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r0 = _mm256_permute2f128_ps(u0, u4, 0x20);
  r1 = _mm256_permute2f128_ps(u1, u5, 0x20);
  r2 = _mm256_permute2f128_ps(u2, u6, 0x20);
  r3 = _mm256_permute2f128_ps(u3, u7, 0x20);
  r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
  r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
  r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
  r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// buf (kPanels panels × L × 8 floats): buf[(p·L + kk)·8 + l] = w[(j0 + 8p + l)·k + k0 + kk], 0 beyond n.
void pack_group(const float* w, std::size_t n, std::size_t k, std::size_t j0, std::size_t k0, std::size_t L,
                float* buf) {
  for (std::size_t p = 0; p < kPanels; ++p) {
    float* dst = buf + p * L * kLanes;
    const std::size_t jb = j0 + p * kLanes;
    if (jb + kLanes <= n) {
      const float* src = w + jb * k + k0;
      std::size_t kk = 0;
      for (; kk + kLanes <= L; kk += kLanes) {
        __m256 r0 = _mm256_loadu_ps(src + 0 * k + kk), r1 = _mm256_loadu_ps(src + 1 * k + kk);
        __m256 r2 = _mm256_loadu_ps(src + 2 * k + kk), r3 = _mm256_loadu_ps(src + 3 * k + kk);
        __m256 r4 = _mm256_loadu_ps(src + 4 * k + kk), r5 = _mm256_loadu_ps(src + 5 * k + kk);
        __m256 r6 = _mm256_loadu_ps(src + 6 * k + kk), r7 = _mm256_loadu_ps(src + 7 * k + kk);
        transpose8(r0, r1, r2, r3, r4, r5, r6, r7);
        float* d = dst + kk * kLanes;
        _mm256_storeu_ps(d + 0 * kLanes, r0);
        _mm256_storeu_ps(d + 1 * kLanes, r1);
        _mm256_storeu_ps(d + 2 * kLanes, r2);
        _mm256_storeu_ps(d + 3 * kLanes, r3);
        _mm256_storeu_ps(d + 4 * kLanes, r4);
        _mm256_storeu_ps(d + 5 * kLanes, r5);
        _mm256_storeu_ps(d + 6 * kLanes, r6);
        _mm256_storeu_ps(d + 7 * kLanes, r7);
      }
      for (; kk < L; ++kk)
        for (std::size_t l = 0; l < kLanes; ++l) dst[kk * kLanes + l] = src[l * k + kk];
    } else {
      for (std::size_t kk = 0; kk < L; ++kk)
        for (std::size_t l = 0; l < kLanes; ++l) dst[kk * kLanes + l] = jb + l < n ? w[(jb + l) * k + k0 + kk] : 0.0f;
    }
  }
}

struct Fp32Step {
  static __m256 first(__m256 x, __m256 w) { return _mm256_mul_ps(x, w); }
  static __m256 next(__m256 x, __m256 w, __m256 a) { return _mm256_fmadd_ps(x, w, a); }
};
struct Fp16Step {
  static __m256 first(__m256 x, __m256 w) { return round_fp16_x8(_mm256_mul_ps(x, w)); }
  static __m256 next(__m256 x, __m256 w, __m256 a) { return fma_fp16_x8(x, w, a); }
};

inline void store_lanes(float* dst, std::size_t valid, __m256 v) {
  if (valid >= kLanes) {
    _mm256_storeu_ps(dst, v);
  } else {
    alignas(32) float t[kLanes];
    _mm256_store_ps(t, v);
    std::memcpy(dst, t, valid * sizeof(float));
  }
}

// Rows [r, r + R) against the packed group starting at column j0.
template <class Step, std::size_t R>
void run_block(const float* x, std::size_t k, std::size_t k0, std::size_t L, const float* buf, std::size_t n,
               std::size_t j0, std::size_t r, float* out) {
  __m256 acc[R][kPanels];
  const float* xr[R];
  for (std::size_t q = 0; q < R; ++q) xr[q] = x + (r + q) * k + k0;
  for (std::size_t q = 0; q < R; ++q) {
    const __m256 xb = _mm256_broadcast_ss(xr[q]);
    for (std::size_t p = 0; p < kPanels; ++p) acc[q][p] = Step::first(xb, _mm256_loadu_ps(buf + p * L * kLanes));
  }
  for (std::size_t kk = 1; kk < L; ++kk) {
    __m256 wv[kPanels];
    for (std::size_t p = 0; p < kPanels; ++p) wv[p] = _mm256_loadu_ps(buf + (p * L + kk) * kLanes);
    for (std::size_t q = 0; q < R; ++q) {
      const __m256 xb = _mm256_broadcast_ss(xr[q] + kk);
      for (std::size_t p = 0; p < kPanels; ++p) acc[q][p] = Step::next(xb, wv[p], acc[q][p]);
    }
  }
  for (std::size_t q = 0; q < R; ++q)
    for (std::size_t p = 0; p < kPanels; ++p) {
      const std::size_t jb = j0 + p * kLanes;
      if (jb < n) store_lanes(out + (r + q) * n + jb, n - jb, acc[q][p]);
    }
}

template <class Step>
void chain_avx(const float* x, const float* w, std::size_t m, std::size_t n, std::size_t k, std::size_t k0,
               std::size_t k1, float* out) {
  const std::size_t L = k1 - k0;
  thread_local std::vector<float> buf;
  buf.resize(kPanels * L * kLanes);
  for (std::size_t j0 = 0; j0 < n; j0 += kPanels * kLanes) {
    pack_group(w, n, k, j0, k0, L, buf.data());
    std::size_t r = 0;
    for (; r + 2 <= m; r += 2) run_block<Step, 2>(x, k, k0, L, buf.data(), n, j0, r, out);
    if (r < m) run_block<Step, 1>(x, k, k0, L, buf.data(), n, j0, r, out);
  }
}
#endif

}  // namespace

void chain_gemm(ChainAcc acc, std::span<const float> x, std::span<const float> w, std::size_t m, std::size_t n,
                std::size_t k, std::size_t k0, std::size_t k1, std::span<float> out) {
  if (x.size() < m * k || w.size() < n * k || out.size() < m * n || k0 > k1 || k1 > k)
    throw std::invalid_argument("kvconf::kernels::cpu::chain_gemm: spans do not match the shape");
  if (k1 == k0) {
    std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(m * n), 0.0f);
    return;
  }
#if defined(KVCONF_HAVE_F16C)
  if (simd_enabled()) {
    if (acc == ChainAcc::fp32)
      chain_avx<Fp32Step>(x.data(), w.data(), m, n, k, k0, k1, out.data());
    else
      chain_avx<Fp16Step>(x.data(), w.data(), m, n, k, k0, k1, out.data());
    return;
  }
#endif
  chain_scalar(acc, x.data(), w.data(), m, n, k, k0, k1, out.data());
}

}  // namespace kvconf::kernels::cpu
