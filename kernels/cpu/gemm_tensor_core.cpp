// tensor_core_gemm_f16 (gemm_core.hpp): numerics' tensor-core block-FMA model (tensor_core.hpp; Khattak &
// Mikaitis, arXiv 2512.07004) for fp16 inputs and an fp32 accumulator with RZ blocks, specialised:
// operands are split once per call into (sign, 11-bit integer significand A, exponent e) with value
// A·2^(e−10); per block the alignment exponent E = max(max_i(max(e_a, −14) + max(e_b, −14)), e(c)) over the
// non-zero products and c != 0, every term is truncated toward zero to a multiple of 2^(E−23−neab) and the
// terms are added exactly in 64-bit integers (|sum| < 17·2^(27+neab)), then normalised once and cut to
// fp32 (RZ, subnormals kept); >= 2^128 is ±inf; a zero sum is +0. Operands that are not finite fall back to
// the reference model. Bit-identical to numerics::dot(TensorCore{p}) (tests/kernels/gemm_test.cpp).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "gemm_core.hpp"

namespace kvconf::kernels::cpu {
namespace {

// An fp16 value held in a float, as sign, integer significand and exponent: |v| = A·2^(e−10), A < 2^11.
struct Split {
  std::uint32_t A = 0;  // 0 for a zero
  int e = 0;            // floor(log2|v|)
  int ec = 0;           // max(e, −14): the model's exponent clamp at fp16's emin
  bool neg = false;
  bool finite = true;
};

Split split(float v) {
  Split s;
  const auto b = std::bit_cast<std::uint32_t>(v);
  s.neg = (b >> 31) != 0;
  const int E = static_cast<int>((b >> 23) & 0xff);
  if (E == 0xff) {
    s.finite = false;
    return s;
  }
  if (v == 0.0f) return s;
  // fp16 values are normal fp32 numbers (>= 2^-24): 24-bit significand with 13 trailing zero bits.
  s.e = E - 127;
  s.A = ((b & 0x7fffffu) | 0x800000u) >> 13;
  s.ec = std::max(s.e, -14);
  return s;
}

// |S|·2^Q cut to fp32 toward zero, with S's sign; the model's ±inf at >= 2^128.
float cut_to_fp32(std::int64_t S, int Q) {
  if (S == 0) return 0.0f;
  const double x = std::ldexp(static_cast<double>(S), Q);  // exact: |S| < 2^53
  if (std::fabs(x) >= 0x1p128)
    return x < 0 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  float f = static_cast<float>(x);  // nearest; step back toward zero if it went past x
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) - 1u);
  return f;
}

// One output: the chained blocks over k. a: the split x row; wrow: the w row (floats), split per block into b.
float dot_row(const TensorCoreParams& p, const Split* a, const float* wrow, std::size_t k, Split* b) {
  const auto kb = static_cast<std::size_t>(p.k);
  float c = 0.0f;
  for (std::size_t lo = 0; lo < k; lo += kb) {
    if (!std::isfinite(c)) break;  // ±inf (overflow) plus finite products stays as it is
    const std::size_t hi = std::min(lo + kb, k);
    for (std::size_t i = lo; i < hi; ++i) b[i] = a[i].A != 0 ? split(wrow[i]) : Split{};
    // Alignment exponent.
    int E = std::numeric_limits<int>::min();
    for (std::size_t i = lo; i < hi; ++i)
      if (a[i].A != 0 && b[i].A != 0) E = std::max(E, a[i].ec + b[i].ec);
    std::uint32_t cm = 0;
    int cq = 0;  // c = ±cm·2^cq
    const bool cneg = std::signbit(c);
    if (c != 0.0f) {
      const auto cb = std::bit_cast<std::uint32_t>(c);
      const int ce = static_cast<int>((cb >> 23) & 0xff);
      if (ce == 0) {
        cm = cb & 0x7fffffu;
        cq = -149;
        E = std::max(E, -126);
      } else {
        cm = (cb & 0x7fffffu) | 0x800000u;
        cq = ce - 127 - 23;
        E = std::max(E, ce - 127);
      }
    }
    if (E == std::numeric_limits<int>::min()) {  // no non-zero product and c = 0
      c = 0.0f;
      continue;
    }
    const int Q = E - 23 - p.neab;
    std::int64_t S = 0;
    const auto add_term = [&](std::uint64_t M, int q, bool neg) {
      std::uint64_t T = 0;
      if (q >= Q)
        T = M << (q - Q);  // at most 2 + neab bits of left shift: T < 2^(27+neab)
      else if (Q - q < 64)
        T = M >> (Q - q);
      S += neg ? -static_cast<std::int64_t>(T) : static_cast<std::int64_t>(T);
    };
    for (std::size_t i = lo; i < hi; ++i)
      if (a[i].A != 0 && b[i].A != 0)
        add_term(static_cast<std::uint64_t>(a[i].A) * b[i].A, a[i].e + b[i].e - 20, a[i].neg != b[i].neg);
    if (cm != 0) add_term(cm, cq, cneg);
    c = cut_to_fp32(S, Q);
  }
  return c;
}

}  // namespace

void tensor_core_gemm_f16(const TensorCoreParams& p, std::span<const float> x, std::span<const float> w, std::size_t m,
                          std::size_t n, std::size_t k, std::span<float> out) {
  if (p.rounding || p.neab < 0 || p.neab > 8 || p.k < 1 || p.k > 64)
    throw std::invalid_argument(
        "kvconf::kernels::cpu::tensor_core_gemm_f16: needs RZ blocks, 0 <= neab <= 8, 1 <= k <= 64");
  if (x.size() < m * k || w.size() < n * k || out.size() < m * n)
    throw std::invalid_argument("kvconf::kernels::cpu::tensor_core_gemm_f16: spans do not match the shape");
  std::vector<Split> xs(m * k), ws(k);
  bool finite = true;
  for (std::size_t i = 0; i < m * k; ++i) finite = (xs[i] = split(x[i])).finite && finite;
  for (std::size_t i = 0; i < n * k && finite; ++i) finite = std::isfinite(w[i]);
  std::vector<double> xd, wd;
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t j = 0; j < n; ++j) {
      if (finite) {
        out[r * n + j] = dot_row(p, xs.data() + r * k, w.data() + j * k, k, ws.data());
      } else {
        // NaN / inf operands: the reference model's IEEE semantics.
        xd.assign(x.begin() + static_cast<std::ptrdiff_t>(r * k), x.begin() + static_cast<std::ptrdiff_t>((r + 1) * k));
        wd.assign(w.begin() + static_cast<std::ptrdiff_t>(j * k), w.begin() + static_cast<std::ptrdiff_t>((j + 1) * k));
        out[r * n + j] = static_cast<float>(tensor_core_dot(p, Format::fp16, Format::fp32, xd, wd));
      }
    }
}

}  // namespace kvconf::kernels::cpu
