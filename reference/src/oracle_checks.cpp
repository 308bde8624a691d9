// Input validation of the oracle in one branch-free pass (oracle_kernels.hpp: FastCheck, fast_check_values) and the
// fused decode path's test while converting (ConvertCheck). Compiled with -mavx2 where the host has AVX2
// (reference/CMakeLists.txt); the generic vectors lower to SSE2 otherwise. The verdicts do not depend on which.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "oracle_kernels.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvconf::ref::detail {

int fixed_point_lsb(Format f) {
  const FormatInfo& fi = info(f);
  return fi.emin - fi.man_bits;
}

int format_hi(Format f) { return std::ilogb(info(f).max_finite) + 1; }

namespace {

// Generic vectors (GCC/Clang): 4 lanes, lowered to SSE2 pairs without AVX2.
typedef double v4d __attribute__((vector_size(32)));
typedef std::uint64_t v4u __attribute__((vector_size(32)));

constexpr std::uint64_t kAbs = 0x7fffffffffffffffULL;
constexpr std::uint64_t kMant = (std::uint64_t{1} << 52) - 1;

// (Vectors go by reference: passing 32-byte vectors by value changes the ABI without AVX, -Wpsabi.)
void load4(const double* x, v4d& r) { std::memcpy(&r, x, sizeof r); }

// Pass 0 for formats too wide for one fixed point: the smallest non-zero and the largest |x[i]| (NaN ignored).
void min_max_abs(std::span<const double> x, double* mn, double* mx) {
  const v4d inf = {HUGE_VAL, HUGE_VAL, HUGE_VAL, HUGE_VAL};
  v4d lo = inf, hi = {0, 0, 0, 0};
  const std::size_t n4 = x.size() / 4 * 4;
  const auto step = [&](const v4d& xv) {
    const v4d ax = (v4d)((v4u)xv & kAbs);
    const v4u z = (v4u)(ax == 0.0);
    const v4d nz = (v4d)(((v4u)inf & z) | ((v4u)ax & ~z));  // zeros ignored
    const v4u l = (v4u)(nz < lo), g = (v4u)(ax > hi);     // NaN compares false: ignored
    lo = (v4d)(((v4u)nz & l) | ((v4u)lo & ~l));
    hi = (v4d)(((v4u)ax & g) | ((v4u)hi & ~g));
  };
  for (std::size_t i = 0; i < n4; i += 4) {
    v4d xv;
    load4(x.data() + i, xv);
    step(xv);
  }
  if (n4 < x.size()) {
    v4d t = {0, 0, 0, 0};
    for (std::size_t i = n4; i < x.size(); ++i) t[i - n4] = x[i];
    step(t);
  }
  *mn = std::min(std::min(lo[0], lo[1]), std::min(lo[2], lo[3]));
  *mx = std::max(std::max(hi[0], hi[1]), std::max(hi[2], hi[3]));
}

}  // namespace

// The test, for one fixed point 2^L (L >= the format's smallest subnormal exponent min_lsb, |x| < 2^(L+52)):
//   s = |x|·2^-L (exact: a power-of-two scale, no overflow below 2^(L+52), and s >= 1 or s = 0 for the values that
//   pass), t = s + 2^52 (exact iff s is an integer below 2^52; then t's significand field holds s).
//   - t − 2^52 == s for every element  ⇔  each |x| is a multiple of 2^L (hence of 2^min_lsb), NaN fails;
//   - OR of t's exponent fields == 0x433  ⇔  every s < 2^52 (+inf and overflow fail here);
//   - OR of |x|'s low 52 − man_bits significand bits == 0  ⇔  each x has at most p significant bits;
//   - |x| <= max_finite: from hi <= hi_fmt when every p-bit value below 2^hi_fmt is finite (IEEE formats), else
//     compared per element (fp8 e4m3, whose top code is NaN).
// These are the scalar check's conditions (finite, |v| <= max_finite, lsb >= min_lsb, at most p bits), so the
// accepted sets agree; an element that is representable but not a multiple of 2^L makes the test undecided.
// The OR of the significand fields is the OR of the integers s: its lowest set bit is the smallest lsb and its
// bit length the largest hi, which is range_of(x) exactly.
FastCheck::FastCheck(Format f, int L) : f_(f), L_(L) {
  const FormatInfo& fi = info(f);
  hi_fmt_ = format_hi(f);
  full_top_ = fi.max_finite == std::ldexp(2.0 - std::ldexp(1.0, -fi.man_bits), hi_fmt_ - 1);
  maxf_ = fi.max_finite;
  S_ = std::ldexp(1.0, -L);
}

namespace {

struct Step {  // FastCheck's state in registers
  v4d S, T, M;
  v4u bad, ort, ora;
  bool cmp_max;
  explicit Step(const FastCheck& c, const std::uint64_t* b, const std::uint64_t* t, const std::uint64_t* a,
                double maxf, bool full_top)
      : S{c.scale(), c.scale(), c.scale(), c.scale()},
        T{0x1p52, 0x1p52, 0x1p52, 0x1p52},
        M{maxf, maxf, maxf, maxf},
        bad{b[0], b[1], b[2], b[3]},
        ort{t[0], t[1], t[2], t[3]},
        ora{a[0], a[1], a[2], a[3]},
        cmp_max(!full_top) {}
  void operator()(const v4d& xv) {
    const v4u a = (v4u)xv & kAbs;
    const v4d ax = (v4d)a;
    const v4d s = ax * S;
    const v4d t = s + T;
    bad |= (v4u)((t - T) != s);
    if (cmp_max) bad |= (v4u)(ax > M);
    ort |= (v4u)t;
    ora |= a;
  }
  void at(const double* x) {
    v4d xv;
    load4(x, xv);
    (*this)(xv);
  }
  void tail(const double* x, std::size_t n) {  // n < 4; zeros pass and add nothing
    v4d t = {0, 0, 0, 0};
    for (std::size_t i = 0; i < n; ++i) t[i] = x[i];
    (*this)(t);
  }
  void store(std::uint64_t* b, std::uint64_t* t, std::uint64_t* a) const {
    for (int i = 0; i < 4; ++i) b[i] = bad[i], t[i] = ort[i], a[i] = ora[i];
  }
};

}  // namespace

void FastCheck::add(const double* x, std::size_t n) {
  Step st(*this, bad_, t_or_, a_or_, maxf_, full_top_);
  const std::size_t n4 = n / 4 * 4;
  for (std::size_t i = 0; i < n4; i += 4) st.at(x + i);
  if (n4 < n) st.tail(x + n4, n - n4);
  st.store(bad_, t_or_, a_or_);
}

bool FastCheck::finish(Range* r) const {
  const std::uint64_t bad = bad_[0] | bad_[1] | bad_[2] | bad_[3];
  const std::uint64_t t_or = t_or_[0] | t_or_[1] | t_or_[2] | t_or_[3];
  const std::uint64_t a_or = a_or_[0] | a_or_[1] | a_or_[2] | a_or_[3];
  const std::uint64_t low_mask = (std::uint64_t{1} << (52 - info(f_).man_bits)) - 1;
  if (bad != 0 || (t_or >> 52) != 0x433 || (a_or & low_mask) != 0) return false;
  const std::uint64_t s_or = t_or & kMant;
  if (s_or == 0) {  // all zero (or nothing seen)
    *r = Range{0, 0};
    return true;
  }
  const int lo = L_ + std::countr_zero(s_or), hi = L_ + static_cast<int>(std::bit_width(s_or));
  if (hi > hi_fmt_) return false;
  *r = Range{lo, hi};
  return true;
}


bool fast_check_values(std::span<const double> x, Format f, Range* r) {
  if (f == Format::fp64) return false;  // subnormal doubles: the scalar check
  const FormatInfo& fi = info(f);
  const int min_lsb = fixed_point_lsb(f);
  int L = min_lsb;
  if (format_hi(f) - min_lsb > 52) {  // one fixed point for the data's own range
    double mn = 0, mx = 0;
    min_max_abs(x, &mn, &mx);
    if (!(mx < HUGE_VAL)) return false;
    if (mn < HUGE_VAL) {
      L = std::max(min_lsb, std::ilogb(mn) - fi.man_bits);
      if (mx > 0 && std::ilogb(mx) + 1 - L > 52) return false;
    }
  }
  if (L < -1022 || L > 1022) return false;
  FastCheck c(f, L);
  c.add(x.data(), x.size());
  return c.finish(r);
}

// ---- ConvertCheck ---------------------------------------------------------------------------------------------
//
// For each value x, y = x·2^-L (exact for the values that pass: a power-of-two scale far from overflow and
// underflow) and i = y truncated to int32 (out of range or NaN: INT_MIN). The value passes when i converted back
// equals y (y is an integer in [-2^31, 2^31): x is a multiple of 2^L, the format's smallest subnormal, and i is
// exact); the OR of the values' low 52 − man_bits significand bits is 0 (each has at most p significant bits); and
// |x| <= max_finite: compared per value for formats whose top binade holds a NaN (fp8 e4m3), else from the bit
// length of the largest |i| (L + bits <= hi_fmt, as in FastCheck). These are check_values' conditions for a value
// to be representable, plus the int32 range.
ConvertCheck::ConvertCheck(Format f) : f_(f) {
  const FormatInfo& fi = info(f);
  L_ = fixed_point_lsb(f);
  hi_fmt_ = format_hi(f);
  full_top_ = fi.max_finite == std::ldexp(2.0 - std::ldexp(1.0, -fi.man_bits), hi_fmt_ - 1);
  maxf_ = fi.max_finite;
  S_ = std::ldexp(1.0, -L_);
}

namespace {

// One value at a time (the tails, and hosts without AVX2).
struct ConvertScalar {
  double S, maxf;
  bool cmp_max;
  bool bad = false;
  std::uint64_t x_or = 0;
  std::uint32_t i_or = 0;
  std::int64_t operator()(double x) {
    const double y = x * S;
    std::int64_t v = 0;
    if (y >= -0x1p31 && y < 0x1p31 && y == std::trunc(y))
      v = static_cast<std::int64_t>(y);
    else
      bad = true;
    if (cmp_max && !(std::fabs(x) <= maxf)) bad = true;
    x_or |= std::bit_cast<std::uint64_t>(x);
    i_or |= static_cast<std::uint32_t>(v < 0 ? -v : v);
    return v;
  }
};

#if defined(__AVX2__)
struct ConvertAvx2 {  // four values at a time
  __m256d S, M;
  bool cmp_max;
  __m256d bad = _mm256_setzero_pd(), x_or = _mm256_setzero_pd();
  __m128i i_or = _mm_setzero_si128();
  // The int32 lanes i; *a = |i|.
  __m128i operator()(__m256d x, __m128i* a) {
    const __m256d y = _mm256_mul_pd(x, S);
    const __m128i i = _mm256_cvttpd_epi32(y);
    bad = _mm256_or_pd(bad, _mm256_cmp_pd(_mm256_cvtepi32_pd(i), y, _CMP_NEQ_UQ));
    if (cmp_max) bad = _mm256_or_pd(bad, _mm256_cmp_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), x), M, _CMP_NLE_UQ));
    x_or = _mm256_or_pd(x_or, x);
    *a = _mm_abs_epi32(i);
    i_or = _mm_or_si128(i_or, *a);
    return i;
  }
  void merge_into(bool* b, std::uint64_t* xo, std::uint32_t* io) const {
    alignas(32) std::uint64_t x[4];
    alignas(16) std::uint32_t i[4];
    _mm256_store_pd(reinterpret_cast<double*>(x), x_or);
    _mm_store_si128(reinterpret_cast<__m128i*>(i), i_or);
    *b = *b || _mm256_movemask_pd(bad) != 0;
    *xo |= x[0] | x[1] | x[2] | x[3];
    *io |= i[0] | i[1] | i[2] | i[3];
  }
};
#endif

}  // namespace

void ConvertCheck::dot_i32(const std::int64_t* q, const std::int64_t* qa, const double* k, std::size_t n,
                           std::int64_t* D, std::int64_t* A) {
  ConvertScalar sc{S_, maxf_, !full_top_};
  std::uint64_t d = 0, a = 0;  // wrapping sums: a value that fails may give any result, never UB
  std::size_t t = 0;
#if defined(__AVX2__)
  ConvertAvx2 cv{_mm256_set1_pd(S_), _mm256_set1_pd(maxf_), !full_top_};
  __m256i vd = _mm256_setzero_si256(), va = _mm256_setzero_si256();
  for (; t + 4 <= n; t += 4) {
    __m128i ak;
    const __m128i ik = cv(_mm256_loadu_pd(k + t), &ak);
    const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + t));
    const __m256i qav = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qa + t));
    vd = _mm256_add_epi64(vd, _mm256_mul_epi32(qv, _mm256_cvtepi32_epi64(ik)));
    va = _mm256_add_epi64(va, _mm256_mul_epu32(qav, _mm256_cvtepu32_epi64(ak)));
  }
  alignas(32) std::uint64_t ld[4], la[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(ld), vd);
  _mm256_store_si256(reinterpret_cast<__m256i*>(la), va);
  d = ld[0] + ld[1] + ld[2] + ld[3];
  a = la[0] + la[1] + la[2] + la[3];
  cv.merge_into(&bad_, &x_or_, &i_or_);
#endif
  for (; t < n; ++t) {
    const std::int64_t kk = sc(k[t]);
    d += static_cast<std::uint64_t>(q[t] * kk);
    a += static_cast<std::uint64_t>(qa[t] * (kk < 0 ? -kk : kk));
  }
  bad_ = bad_ || sc.bad;
  x_or_ |= sc.x_or;
  i_or_ |= sc.i_or;
  *D = static_cast<std::int64_t>(d);
  *A = static_cast<std::int64_t>(a);
}

void ConvertCheck::to_int(const double* x, std::size_t n, std::int64_t* dst) {
  ConvertScalar sc{S_, maxf_, !full_top_};
  std::size_t t = 0;
#if defined(__AVX2__)
  ConvertAvx2 cv{_mm256_set1_pd(S_), _mm256_set1_pd(maxf_), !full_top_};
  for (; t + 4 <= n; t += 4) {
    __m128i a;
    const __m128i i = cv(_mm256_loadu_pd(x + t), &a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + t), _mm256_cvtepi32_epi64(i));
  }
  cv.merge_into(&bad_, &x_or_, &i_or_);
#endif
  for (; t < n; ++t) dst[t] = sc(x[t]);
  bad_ = bad_ || sc.bad;
  x_or_ |= sc.x_or;
  i_or_ |= sc.i_or;
}

void ConvertCheck::add(const double* x, std::size_t n) {
  ConvertScalar sc{S_, maxf_, !full_top_};
  for (std::size_t t = 0; t < n; ++t) sc(x[t]);
  bad_ = bad_ || sc.bad;
  x_or_ |= sc.x_or;
  i_or_ |= sc.i_or;
}

bool ConvertCheck::finish(int* bits) const {
  const std::uint64_t low_mask = (std::uint64_t{1} << (52 - info(f_).man_bits)) - 1;
  if (bad_ || (x_or_ & low_mask) != 0) return false;
  *bits = static_cast<int>(std::bit_width(i_or_));
  return !full_top_ || L_ + *bits <= hi_fmt_;
}

}  // namespace kvconf::ref::detail
