// The oracle's vectorisable row loops (oracle_kernels.hpp). AVX2 intrinsics where the host has AVX2 (the file is
// then compiled with -mavx2, never -mfma: reference/CMakeLists.txt), plain loops otherwise; both compute the same.
#include "oracle_kernels.hpp"

#include <cmath>
#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvconf::ref::detail {

namespace {

#if defined(__AVX2__)
// The sum of a vector's four int64 lanes (exact: integer sums in any order are the same sums).
std::int64_t lane_sum(__m256i v) {
  alignas(32) std::int64_t l[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
  return l[0] + l[1] + l[2] + l[3];
}
#endif

}  // namespace

void to_int(const double* x, double scale, std::int64_t* dst, std::size_t n, bool fits32) {
  std::size_t i = 0;
#if defined(__AVX2__)
  if (fits32) {
    const __m256d s = _mm256_set1_pd(scale);
    for (; i + 4 <= n; i += 4) {
      const __m128i v = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_loadu_pd(x + i), s));  // exact integers < 2^31
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_cvtepi32_epi64(v));
    }
  }
#endif
  (void)fits32;
  for (; i < n; ++i) dst[i] = static_cast<std::int64_t>(x[i] * scale);
}

void dot_i32(const std::int64_t* q, const std::int64_t* qa, const std::int64_t* k, std::size_t n, std::int64_t* D,
             std::int64_t* A) {
  std::int64_t d = 0, a = 0;
  std::size_t t = 0;
#if defined(__AVX2__)
  // Lanes hold int64 values below 2^31 in magnitude: _mm256_mul_epi32 multiplies their (sign-extended) low halves
  // exactly; abs_epi32 leaves |k| in the low half (|k| < 2^31), which _mm256_mul_epu32 reads. Integer sums in any
  // order are the same sums.
  __m256i vd = _mm256_setzero_si256(), va = _mm256_setzero_si256();
  for (; t + 4 <= n; t += 4) {
    const __m256i kv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + t));
    const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + t));
    const __m256i qav = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa + t));
    vd = _mm256_add_epi64(vd, _mm256_mul_epi32(qv, kv));
    va = _mm256_add_epi64(va, _mm256_mul_epu32(qav, _mm256_abs_epi32(kv)));
  }
  d = lane_sum(vd);
  a = lane_sum(va);
#endif
  for (; t < n; ++t) {
    d += q[t] * k[t];
    a += qa[t] * (k[t] < 0 ? -k[t] : k[t]);
  }
  *D = d;
  *A = a;
}

void dot_i32_from_double(const std::int64_t* q, const std::int64_t* qa, const double* k, double sk, std::size_t n,
                         std::int64_t* D, std::int64_t* A) {
  std::int64_t d = 0, a = 0;
  std::size_t t = 0;
#if defined(__AVX2__)
  // As dot_i32, with k[t]·sk converted to int32 on the way (exact integers below 2^31).
  const __m256d s = _mm256_set1_pd(sk);
  __m256i vd = _mm256_setzero_si256(), va = _mm256_setzero_si256();
  for (; t + 4 <= n; t += 4) {
    const __m128i k32 = _mm256_cvttpd_epi32(_mm256_mul_pd(_mm256_loadu_pd(k + t), s));
    const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + t));
    const __m256i qav = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa + t));
    vd = _mm256_add_epi64(vd, _mm256_mul_epi32(qv, _mm256_cvtepi32_epi64(k32)));
    va = _mm256_add_epi64(va, _mm256_mul_epu32(qav, _mm256_cvtepu32_epi64(_mm_abs_epi32(k32))));
  }
  d = lane_sum(vd);
  a = lane_sum(va);
#endif
  for (; t < n; ++t) {
    const auto kk = static_cast<std::int64_t>(k[t] * sk);
    d += q[t] * kk;
    a += qa[t] * (kk < 0 ? -kk : kk);
  }
  *D = d;
  *A = a;
}

// Vector path: E[t] = e0 + e1·2^21 + e2·2^42 with limbs < 2^21; each limb·V is at most 2^52 in magnitude (V an
// int32 value), so up to 2^10 = kEvChunk of them sum exactly in int64 lanes, and N[c] += acc0 + acc1·2^21 +
// acc2·2^42 is the exact Σ_t E[t]·V[t][c].
void accumulate_ev(const std::uint64_t* E, const std::int64_t* const* rows, std::size_t m, std::size_t dv, bool fits32,
                   i128* N, std::int64_t* AV) {
  std::size_t c0 = 0;  // columns [c0, dv) are summed by the scalar loop at the end
#if defined(__AVX2__)
  static_assert(kEvChunk <= 1024, "limb sums must stay below 2^62");
  if (fits32 && dv >= 8) {
    alignas(32) std::int64_t limb[3][kEvChunk];
    const std::uint64_t lm = (std::uint64_t{1} << 21) - 1;
    for (std::size_t t = 0; t < m; ++t) {
      limb[0][t] = static_cast<std::int64_t>(E[t] & lm);
      limb[1][t] = static_cast<std::int64_t>((E[t] >> 21) & lm);
      limb[2][t] = static_cast<std::int64_t>(E[t] >> 42);
    }
    const __m256i lo32 = _mm256_set1_epi64x(0xffffffff);
    for (; c0 + 8 <= dv; c0 += 8) {  // 8 columns: two vectors of 4, three limb accumulators each, and Σ|V|
      __m256i a[6], av[2];
      for (auto& x : a) x = _mm256_setzero_si256();
      av[0] = av[1] = _mm256_setzero_si256();
      for (std::size_t t = 0; t < m; ++t) {
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[t] + c0));
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[t] + c0 + 4));
        for (int l = 0; l < 3; ++l) {
          const __m256i e = _mm256_set1_epi64x(limb[l][t]);
          a[2 * l] = _mm256_add_epi64(a[2 * l], _mm256_mul_epi32(e, v0));
          a[2 * l + 1] = _mm256_add_epi64(a[2 * l + 1], _mm256_mul_epi32(e, v1));
        }
        if (AV) {  // |V| from the low halves (int32 values): abs, then the high halves cleared
          av[0] = _mm256_add_epi64(av[0], _mm256_and_si256(_mm256_abs_epi32(v0), lo32));
          av[1] = _mm256_add_epi64(av[1], _mm256_and_si256(_mm256_abs_epi32(v1), lo32));
        }
      }
      alignas(32) std::int64_t s[8][4];
      for (int l = 0; l < 6; ++l) _mm256_store_si256(reinterpret_cast<__m256i*>(s[l]), a[l]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(s[6]), av[0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(s[7]), av[1]);
      for (int c = 0; c < 8; ++c) {
        const int h = c / 4, k = c % 4;
        const std::size_t cc = c0 + static_cast<std::size_t>(c);
        N[cc] += static_cast<i128>(s[h][k]) + static_cast<i128>(s[2 + h][k]) * (i128{1} << 21) +
                 static_cast<i128>(s[4 + h][k]) * (i128{1} << 42);
        if (AV) AV[cc] += s[6 + h][k];
      }
    }
  }
#endif
  (void)fits32;
  for (std::size_t t = 0; t < m; ++t) {
    const auto e = static_cast<i128>(E[t]);
    const std::int64_t* v = rows[t];
    for (std::size_t c = c0; c < dv; ++c) N[c] += e * v[c];
    if (AV)
      for (std::size_t c = c0; c < dv; ++c) AV[c] += v[c] < 0 ? -v[c] : v[c];
  }
}

void add_abs(const std::int64_t* row, std::size_t n, i128* AV) {
  for (std::size_t c = 0; c < n; ++c) AV[c] += row[c] < 0 ? -row[c] : row[c];
}

namespace {

// Four keys over the columns: per column the same additions in the same order as one key at a time (the
// accumulators stay in registers in between); the restrict-qualified rows let the compiler vectorise across columns.
void condition_sums4(const double* p, const double* __restrict v0, const double* __restrict v1,
                     const double* __restrict v2, const double* __restrict v3, std::size_t dv,
                     const double* __restrict o, double* __restrict A, double* __restrict B) {
  const double p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
  for (std::size_t c = 0; c < dv; ++c) {
    double a = A[c], b = B[c];
    const double oc = o[c];
    a += p0 * std::fabs(v0[c]);
    b += p0 * std::fabs(v0[c] - oc);
    a += p1 * std::fabs(v1[c]);
    b += p1 * std::fabs(v1[c] - oc);
    a += p2 * std::fabs(v2[c]);
    b += p2 * std::fabs(v2[c] - oc);
    a += p3 * std::fabs(v3[c]);
    b += p3 * std::fabs(v3[c] - oc);
    A[c] = a;
    B[c] = b;
  }
}

void condition_sums1(double p, const double* __restrict v, std::size_t dv, const double* __restrict o,
                     double* __restrict A, double* __restrict B) {
  for (std::size_t c = 0; c < dv; ++c) {
    A[c] += p * std::fabs(v[c]);
    B[c] += p * std::fabs(v[c] - o[c]);
  }
}

}  // namespace

void condition_sums(const double* p, const double* const* rows, std::size_t m, std::size_t dv, const double* o,
                    double* A, double* B) {
  std::size_t t = 0;
  for (; t + 4 <= m; t += 4) condition_sums4(p + t, rows[t], rows[t + 1], rows[t + 2], rows[t + 3], dv, o, A, B);
  for (; t < m; ++t) condition_sums1(p[t], rows[t], dv, o, A, B);
}

}  // namespace kvconf::ref::detail
