// Oracle: exact dot products and projections (y = x Wᵀ), each correctly rounded once.
// int128 fixed point when the data's dynamic range fits (always for fp16/fp8), else exact MPFR
// products summed by mpfr_sum at a precision that makes the sum exact.
#include <cmath>
#include <vector>

#include "kvconf/reference/mpfr_format.hpp"
#include "kvconf/reference/oracle.hpp"
#include "kvconf/reference/oracle_detail.hpp"

namespace kvconf::ref {
namespace detail {

bool int_dot_fits(const Range& a, const Range& b, std::size_t n) {
  return a.span() <= 62 && b.span() <= 62 && a.span() + b.span() + ceil_log2(n) <= 125;
}

std::vector<std::int64_t> to_fixed_all(std::span<const double> x, int lo) {
  std::vector<std::int64_t> r(x.size());
  if (const double scale = fixed_scale(lo); scale != 0.0) {
    // Multiplying by the power of two 2^-lo is exact (the products are integers below 2^62).
    for (std::size_t i = 0; i < x.size(); ++i) r[i] = static_cast<std::int64_t>(x[i] * scale);
  } else {
    for (std::size_t i = 0; i < x.size(); ++i) r[i] = to_fixed(x[i], lo);
  }
  return r;
}

mpfr_prec_t exact_sum_prec(const Range& a, const Range& b, std::size_t n) {
  // Products are multiples of 2^(a.lo + b.lo) below 2^(a.hi + b.hi); n of them sum below
  // 2^(a.hi + b.hi + ceil_log2(n)).
  const long p = static_cast<long>(a.hi) + b.hi + ceil_log2(n) + 1 - (static_cast<long>(a.lo) + b.lo) + 1;
  return static_cast<mpfr_prec_t>(std::max<long>(p, 8));
}

void ExactDot::compute(mpfr_ptr r, const double* x, std::size_t sx, const double* y, std::size_t sy, std::size_t n,
                       double* abs_up) {
  if (prods.size() < n) {
    prods.reserve(n);
    while (prods.size() < n) prods.emplace_back(106);
    ptrs.resize(n);
  }
  for (std::size_t i = 0; i < n; ++i) {
    mpfr_set_d(prods[i].get(), x[i * sx], MPFR_RNDN);
    mpfr_mul_d(prods[i].get(), prods[i].get(), y[i * sy], MPFR_RNDN);  // exact: 53 + 53 <= 106 bits
    ptrs[i] = prods[i].get();
  }
  mpfr_sum(r, ptrs.data(), n, MPFR_RNDN);  // exact: prec(r) from exact_sum_prec
  if (abs_up) {
    for (std::size_t i = 0; i < n; ++i) mpfr_abs(prods[i].get(), prods[i].get(), MPFR_RNDN);
    Mpfr s(64);
    mpfr_sum(s.get(), ptrs.data(), n, MPFR_RNDU);
    *abs_up = mpfr_get_d(s.get(), MPFR_RNDU);
  }
}

// The exact value D·2^E (D an int128) rounded to f: through numerics' round_to on a double with a
// residual sign when that is unambiguous, else through MPFR.
double round_i128(Format f, RoundOptions o, i128 D, int E) {
  if (D == 0) return round_to(f, 0.0, o);
  const double hi = static_cast<double>(D);  // RN
  const int ex = std::ilogb(hi);
  if (ex + E > -1000 && ex + E < 1000) {
    const i128 r = D - static_cast<i128>(hi);
    bool tie = false;
    if (r != 0) {
      // |r| <= ulp(hi)/2; a residual of exactly half an ulp breaks Tailed's contract.
      const i128 ulp = static_cast<i128>(1) << (ex - 52);
      tie = (r < 0 ? -r : r) * 2 == ulp;
    }
    if (!tie) return round_to(f, Tailed{std::ldexp(hi, E), r == 0 ? 0 : (r > 0 ? 1 : -1)}, o);
  }
  Mpfr t(128);
  set_i128(t.get(), D);
  mpfr_mul_2si(t.get(), t.get(), E, MPFR_RNDN);
  return round_mpfr(f, t.get(), o);
}

}  // namespace detail

using detail::i128;

DotResult dot(std::span<const double> x, std::span<const double> y, Format in, const OracleOptions& o) {
  static constexpr char kFn[] = "kvconf::ref::dot";
  detail::check_size(kFn, "y", y.size(), x.size(), "x.size()");
  const detail::Range rx = detail::check_values(kFn, "x", x, in);
  const detail::Range ry = detail::check_values(kFn, "y", y, in);
  const std::size_t n = x.size();
  DotResult r;
  if (o.fast_paths && detail::int_dot_fits(rx, ry, n)) {
    i128 D = 0, A = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const i128 a = detail::to_fixed(x[i], rx.lo), b = detail::to_fixed(y[i], ry.lo);
      D += a * b;
      A += (a < 0 ? -a : a) * (b < 0 ? -b : b);
    }
    const int E = rx.lo + ry.lo;
    mpfr_set_prec(r.exact.get(), 128);
    detail::set_i128(r.exact.get(), D);
    mpfr_mul_2si(r.exact.get(), r.exact.get(), E, MPFR_RNDN);
    r.abs_sum = detail::i128_to_double(A, E, MPFR_RNDU);
  } else {
    mpfr_set_prec(r.exact.get(), detail::exact_sum_prec(rx, ry, n));
    detail::ExactDot w;
    w.compute(r.exact.get(), x.data(), 1, y.data(), 1, n, &r.abs_sum);
  }
  r.value = round_mpfr(o.out, r.exact.get(), o.round);
  r.approx = mpfr_get_d(r.exact.get(), MPFR_RNDN);
  return r;
}

ProjectionResult project(std::span<const double> x, std::span<const double> w, std::size_t m, std::size_t n_in,
                         std::size_t n_out, Format in, const OracleOptions& o) {
  static constexpr char kFn[] = "kvconf::ref::project";
  detail::check_size(kFn, "x", x.size(), detail::checked_mul(kFn, m, n_in), "m*n_in");
  detail::check_size(kFn, "w", w.size(), detail::checked_mul(kFn, n_out, n_in), "n_out*n_in");
  const detail::Range rx = detail::check_values(kFn, "x", x, in);
  const detail::Range rw = detail::check_values(kFn, "w", w, in);
  const std::size_t n_y = detail::checked_mul(kFn, m, n_out);
  ProjectionResult r;
  r.y.resize(n_y);
  r.approx.resize(n_y);
  r.abs_sum.resize(n_y);
  if (o.fast_paths && detail::int_dot_fits(rx, rw, n_in)) {
    const auto X = detail::to_fixed_all(x, rx.lo);  // (m, n_in)
    const auto W = detail::to_fixed_all(w, rw.lo);  // (n_out, n_in)
    const int E = rx.lo + rw.lo;
    for (std::size_t a = 0; a < m; ++a) {
      const std::int64_t* xa = X.data() + a * n_in;
      for (std::size_t b = 0; b < n_out; ++b) {
        const std::int64_t* wb = W.data() + b * n_in;
        i128 D = 0, A = 0;
        for (std::size_t i = 0; i < n_in; ++i) {
          D += static_cast<i128>(xa[i]) * wb[i];
          A += static_cast<i128>(xa[i] < 0 ? -xa[i] : xa[i]) * (wb[i] < 0 ? -wb[i] : wb[i]);
        }
        const std::size_t t = a * n_out + b;
        r.y[t] = detail::round_i128(o.out, o.round, D, E);
        r.approx[t] = detail::i128_to_double(D, E, MPFR_RNDN);
        r.abs_sum[t] = detail::i128_to_double(A, E, MPFR_RNDU);
      }
    }
    return r;
  }
  detail::ExactDot wk;
  Mpfr acc(detail::exact_sum_prec(rx, rw, n_in));
  for (std::size_t a = 0; a < m; ++a) {
    for (std::size_t b = 0; b < n_out; ++b) {
      const std::size_t t = a * n_out + b;
      wk.compute(acc.get(), x.data() + a * n_in, 1, w.data() + b * n_in, 1, n_in, &r.abs_sum[t]);
      r.y[t] = round_mpfr(o.out, acc.get(), o.round);
      r.approx[t] = mpfr_get_d(acc.get(), MPFR_RNDN);
    }
  }
  return r;
}

}  // namespace kvconf::ref
