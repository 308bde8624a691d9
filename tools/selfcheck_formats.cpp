// Self-checks of numerics/: exhaustive fp16/bf16 conversions and sampled arithmetic vs MPFR.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "kvconf/numerics/number_text.hpp"
#include "kvconf/numerics/arith.hpp"
#include "kvconf/reference/mpfr_format.hpp"
#include "selfcheck.hpp"

namespace kvconf::tools {
namespace {

bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// Every pattern of `from`, converted to every format, vs MPFR's rounding.
CheckResult conversions(Format from) {
  CheckResult r;
  mpfr_t m;
  mpfr_init2(m, 64);
  const std::uint32_t count = 1u << info(from).bits;
  for (std::uint32_t bits = 0; bits < count; ++bits) {
    const double x = decode(from, bits);
    mpfr_set_d(m, x, MPFR_RNDN);
    for (Format to : kAllFormats) {
      const double mine = round_to(to, x);
      const double golden = ref::round_mpfr(to, m);
      ++r.cases;
      if (!same(mine, golden)) {
        mpfr_clear(m);
        r.detail = std::string(name(from)) + " pattern " + std::to_string(bits) + " -> " + std::string(name(to)) +
                   ": got " + num_exact(mine) + ", MPFR " + num_exact(golden);
        return r;
      }
    }
  }
  mpfr_clear(m);
  r.passed = true;
  r.detail = "all " + std::to_string(count) + " patterns x " + std::to_string(std::size(kAllFormats)) +
             " target formats bit-exact";
  return r;
}

// Random operand triples through every operation, vs MPFR evaluated at the format's precision.
CheckResult arithmetic(Format f, int samples_per_op) {
  CheckResult r;
  std::mt19937_64 rng(0x6b76636f6e66ull + static_cast<unsigned>(f));  // fixed seed: "kvconf"
  const std::uint32_t mask = (1u << info(f).bits) - 1;
  const auto draw = [&] {
    for (;;) {
      const double x = decode(f, static_cast<std::uint32_t>(rng()) & mask);
      if (std::isfinite(x)) return x;
    }
  };
  using ref::Op;
  for (Op op : {Op::add, Op::sub, Op::mul, Op::div, Op::sqrt, Op::fma}) {
    for (int i = 0; i < samples_per_op; ++i) {
      const double a = draw(), b = draw(), c = draw();
      double mine = 0;
      switch (op) {
        case Op::add:
          mine = add(f, a, b);
          break;
        case Op::sub:
          mine = sub(f, a, b);
          break;
        case Op::mul:
          mine = mul(f, a, b);
          break;
        case Op::div:
          mine = div(f, a, b);
          break;
        case Op::sqrt:
          mine = kvconf::sqrt(f, a);
          break;
        case Op::fma:
          mine = kvconf::fma(f, a, b, c);
          break;
      }
      const double golden = ref::op_mpfr(f, op, a, b, c);
      ++r.cases;
      if (!same(mine, golden)) {
        r.detail = std::string(name(f)) + " op " + std::to_string(static_cast<int>(op)) + " (" + num_exact(a) + ", " +
                   num_exact(b) + ", " + num_exact(c) + "): got " + num_exact(mine) + ", MPFR " + num_exact(golden);
        return r;
      }
    }
  }
  r.passed = true;
  r.detail = std::to_string(samples_per_op) + " random operand triples per op (+ - * / sqrt fma) bit-exact";
  return r;
}

}  // namespace

void add_format_checks(std::vector<SelfCheck>& out) {
  out.push_back({"formats.fp16.conversions", "all 65536 fp16 patterns to every format, vs MPFR",
                 [] { return conversions(Format::fp16); }});
  out.push_back({"formats.bf16.conversions", "all 65536 bf16 patterns to every format, vs MPFR",
                 [] { return conversions(Format::bf16); }});
  out.push_back({"formats.fp8.conversions", "all e4m3 and e5m2 patterns to every format, vs MPFR", [] {
                   CheckResult a = conversions(Format::fp8_e4m3);
                   if (!a.passed) return a;
                   CheckResult b = conversions(Format::fp8_e5m2);
                   b.cases += a.cases;
                   return b;
                 }});
  for (Format f : {Format::fp16, Format::bf16, Format::fp8_e4m3, Format::fp8_e5m2}) {
    out.push_back({"arith." + std::string(name(f)),
                   "correctly rounded + - * / sqrt fma in " + std::string(name(f)) + ", vs MPFR",
                   [f] { return arithmetic(f, 200000); }});
  }
}

}  // namespace kvconf::tools
