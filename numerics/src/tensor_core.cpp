// Tensor-core block-FMA model in exact integer arithmetic (see tensor_core.hpp for the contract).
//
// What the model is, as read in north-numerical-computing/MATLAB-tensor-core (read, not copied):
//  - models/tools/Generic_BFMA_TC.m: operand exponents a_exp = floor(log2|a|) clamped at the input
//    emin, significands a/2^a_exp, product significands in [0, 4) with exponent a_exp + b_exp; zero
//    products removed; fpbits_IEEE2() scales every significand to 23 fraction bits, adds one extra
//    alignment bit when the largest product at the maximum exponent has significand >= 2 (and c does
//    not have a larger exponent), shifts everything right to the maximum exponent with uint32 bitshift
//    (truncation of magnitudes, no sticky bit: stkbitenabled = 0 in every NVIDIA model), and the signed
//    sum is formed exactly; it is normalised once and rounded (RZ: the bits are simply cut; RNE:
//    ieeeround with guard and sticky bits), with subnormal outputs, and an exponent at the all-ones
//    code becomes Inf.
//  - models/tools/GEMM.m: blocks of params.fma products, K zero-padded to a multiple of it, recursive
//    accumulation c = d across blocks, c starting at C.
//  - models/V100TC.m, A100TC.m, H100TC.m: (fma, neab) = (4, 0), (8, 1), (16, 2); frmode 'rz' for fp32
//    output and 'rne' for fp16 output.
// Working through fpbits_IEEE2's cases, the quantum the terms are truncated to is always
// 2^(max(max_i(a_exp_i + b_exp_i), c_exp) − 23 − neab): the extra bit for a product significand in
// [2, 4) exactly compensates its normalisation shift. That closed form is what is implemented below.
#include "kvconf/numerics/tensor_core.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace kvconf {
namespace {

__extension__ typedef unsigned __int128 u128;  // GCC/Clang extension (exact wide integers)
__extension__ typedef __int128 i128;

// |x| = M·2^q with M odd (x finite, non-zero); e = floor(log2|x|).
struct Parts {
  bool neg;
  std::uint64_t M;
  int q;
  int e;
};

Parts split(double x) {
  int ex = 0;
  const double f = std::frexp(std::fabs(x), &ex);  // |x| = f·2^ex, f in [0.5, 1)
  auto M = static_cast<std::uint64_t>(std::ldexp(f, 53));
  int q = ex - 53;
  const int tz = std::countr_zero(M);
  M >>= tz;
  q += tz;
  return {std::signbit(x), M, q, ex - 1};
}

void check_params(const TensorCoreParams& p, Format in, Format acc) {
  if (p.k < 1 || p.k > 4096)
    throw std::invalid_argument("kvconf::tensor_core: k (products per block) must be in [1, 4096], got " +
                                std::to_string(p.k));
  if (p.neab < 0 || p.neab > 24)
    throw std::invalid_argument("kvconf::tensor_core: neab must be in [0, 24], got " + std::to_string(p.neab) +
                                " (negative neab, the fp8 path of Hopper/Ada, is not modelled)");
  if (in != Format::fp16 && in != Format::bf16 && in != Format::fp8_e4m3 && in != Format::fp8_e5m2)
    throw std::invalid_argument("kvconf::tensor_core: input format must be fp16, bf16 or fp8, got " +
                                std::string(name(in)) + " (tf32 inputs are not modelled)");
  if (acc != Format::fp32 && acc != Format::fp16)
    throw std::invalid_argument("kvconf::tensor_core: accumulator/output format must be fp32 or fp16, got " +
                                std::string(name(acc)));
}

void check_value(Format f, double x, const char* what, std::size_t i) {
  if (!representable(f, x))
    throw std::invalid_argument("kvconf::tensor_core: " + std::string(what) + "[" + std::to_string(i) +
                                "] = " + std::to_string(x) + " is not a value of " + std::string(name(f)));
}

double block_unchecked(const TensorCoreParams& p, Format in, Format acc, std::span<const double> a,
                       std::span<const double> b, double c) {
  const std::size_t m = a.size();
  // Special values: IEEE semantics of the exact sum (GEMM.m handles NaN/Inf before the block model).
  bool special = !std::isfinite(c);
  for (std::size_t i = 0; i < m && !special; ++i) special = !std::isfinite(a[i]) || !std::isfinite(b[i]);
  if (special) {
    double s = c;
    for (std::size_t i = 0; i < m; ++i) s += a[i] * b[i];  // only NaN/inf matter here
    return s;
  }

  const FormatInfo& fin = info(in);
  constexpr int kFp32Emin = -126;  // c's exponent is read from its binary32 encoding (fpbits_IEEE2)

  // Terms (products and c) as sign, integer magnitude and exponent; E = alignment exponent.
  struct Term {
    bool neg;
    u128 M;
    int q;
  };
  Term terms[4097];
  std::size_t nt = 0;
  int E = std::numeric_limits<int>::min();
  for (std::size_t i = 0; i < m; ++i) {
    if (a[i] == 0.0 || b[i] == 0.0) continue;  // zero products are removed before alignment
    const Parts pa = split(a[i]);
    const Parts pb = split(b[i]);
    const int ea = std::max(pa.e, fin.emin);
    const int eb = std::max(pb.e, fin.emin);
    E = std::max(E, ea + eb);
    terms[nt++] = {pa.neg != pb.neg, static_cast<u128>(pa.M) * pb.M, pa.q + pb.q};
  }
  if (c != 0.0) {
    const Parts pc = split(c);
    E = std::max(E, std::max(pc.e, kFp32Emin));
    terms[nt++] = {pc.neg, pc.M, pc.q};
  }
  if (nt == 0) return 0.0;

  // Truncate every term toward zero to a multiple of 2^Q and add exactly.
  const int Q = E - 23 - p.neab;
  i128 S = 0;
  for (std::size_t i = 0; i < nt; ++i) {
    const Term& t = terms[i];
    u128 T;
    if (t.q >= Q) {
      T = t.M << (t.q - Q);  // |term| < 2^(E+2), so T < 2^(25+neab): no overflow
    } else {
      const int sh = Q - t.q;
      T = (sh >= 128) ? 0 : (t.M >> sh);
    }
    S += t.neg ? -static_cast<i128>(T) : static_cast<i128>(T);
  }
  if (S == 0) return 0.0;  // the model returns d = 0 (positive zero)

  const FormatInfo& fo = info(acc);
  const bool neg = S < 0;
  const u128 mag = neg ? static_cast<u128>(-S) : static_cast<u128>(S);
  // floor(log2 |S·2^Q|) >= emax + 1: the model's exponent reaches the all-ones code (Inf).
  const int bitlen =
      128 - (static_cast<std::uint64_t>(mag >> 64) != 0 ? std::countl_zero(static_cast<std::uint64_t>(mag >> 64))
                                                        : 64 + std::countl_zero(static_cast<std::uint64_t>(mag)));
  if (bitlen - 1 + Q >= fo.emax + 1) return neg ? -HUGE_VAL : HUGE_VAL;

  // S·2^Q as a double plus the sign of what the double misses (exact: |S| < 2^128, Q >= −330).
  const double xs = static_cast<double>(S);
  const i128 resid = S - static_cast<i128>(xs);
  const int tail = (resid > 0) - (resid < 0);
  RoundOptions ro;
  ro.mode = tensor_core_rounding(p, acc);
  return round_to(acc, Tailed{std::ldexp(xs, Q), tail}, ro);
}

}  // namespace

Rounding tensor_core_rounding(const TensorCoreParams& p, Format acc) {
  if (p.rounding) return *p.rounding;
  return acc == Format::fp32 ? Rounding::toward_zero : Rounding::nearest_even;
}

double tensor_core_block_fma(const TensorCoreParams& p, Format in, Format acc, std::span<const double> a,
                             std::span<const double> b, double c) {
  check_params(p, in, acc);
  if (a.size() != b.size())
    throw std::invalid_argument("kvconf::tensor_core_block_fma: a and b differ in length (" + std::to_string(a.size()) +
                                " vs " + std::to_string(b.size()) + ")");
  if (a.size() > static_cast<std::size_t>(p.k))
    throw std::invalid_argument("kvconf::tensor_core_block_fma: block of " + std::to_string(a.size()) +
                                " products exceeds k = " + std::to_string(p.k));
  for (std::size_t i = 0; i < a.size(); ++i) {
    check_value(in, a[i], "a", i);
    check_value(in, b[i], "b", i);
  }
  check_value(acc, c, "c", 0);
  return block_unchecked(p, in, acc, a, b, c);
}

double tensor_core_dot(const TensorCoreParams& p, Format in, Format acc, std::span<const double> a,
                       std::span<const double> b, double c) {
  check_params(p, in, acc);
  if (a.size() != b.size())
    throw std::invalid_argument("kvconf::tensor_core_dot: a and b differ in length (" + std::to_string(a.size()) +
                                " vs " + std::to_string(b.size()) + ")");
  for (std::size_t i = 0; i < a.size(); ++i) {
    check_value(in, a[i], "a", i);
    check_value(in, b[i], "b", i);
  }
  check_value(acc, c, "c", 0);
  const auto k = static_cast<std::size_t>(p.k);
  for (std::size_t lo = 0; lo < a.size(); lo += k) {
    const std::size_t len = std::min(k, a.size() - lo);
    c = block_unchecked(p, in, acc, a.subspan(lo, len), b.subspan(lo, len), c);
  }
  return c;
}

}  // namespace kvconf
