// kvconf.oracle and kvconf.bounds underneath: the MPFR oracle (exact dot products and projections, certified
// attention) and the black-box bounds a Python kernel is judged by, on the caller's own inputs, so a user can write
// an assertion of their own. Inputs are float64 arrays holding values of `format` (the oracle checks this).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <span>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "kvconf/kernels/black_box.hpp"
#include "kvconf/reference/attention_pipeline.hpp"
#include "kvconf/reference/bounds.hpp"
#include "kvconf/reference/oracle.hpp"

namespace kvconf::python {
namespace {

using Doubles = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::span<const double> span_of(const Doubles& a) { return {a.data(), a.size()}; }

void expect_size(const char* arg, std::size_t have, std::size_t want, const std::string& shape) {
  if (have != want)
    throw std::invalid_argument(std::string(arg) + " holds " + std::to_string(have) + " values, expected " +
                                std::to_string(want) + " " + shape);
}

// q (n_q, H, d), k (n_kv, Hkv, d), v (n_kv, Hkv, d_v): the visible rows only (the oracle has no capacity).
void expect_attention(const kernels::AttentionCall& c, const Doubles& q, const Doubles& k, const Doubles& v) {
  const auto& s = c.shape;
  expect_size("q", q.size(), s.n_q * s.n_heads * s.d, "(n_q, n_heads, d)");
  expect_size("k", k.size(), s.n_kv * s.n_kv_heads * s.d, "(n_kv, n_kv_heads, d)");
  expect_size("v", v.size(), s.n_kv * s.n_kv_heads * s.d_v, "(n_kv, n_kv_heads, d_v)");
}

ref::AttentionResult attention(const Doubles& q, const Doubles& k, const Doubles& v, const kernels::AttentionCall& c,
                               Format f) {
  expect_attention(c, q, k, v);
  ref::OracleOptions o;
  o.out = f;
  return ref::attention(span_of(q), span_of(k), span_of(v), c.shape, c.params, f, o);
}

}  // namespace

void bind_oracle(nb::module_& m) {
  // (correctly rounded to `out`, nearest double of the exact value, Σ|x_i y_i| rounded up)
  m.def(
      "oracle_dot",
      [](const Doubles& x, const Doubles& y, const std::string& format, const std::string& out) {
        if (x.size() != y.size())
          throw std::invalid_argument("x and y hold " + std::to_string(x.size()) + " and " + std::to_string(y.size()) +
                                      " values, expected the same length");
        ref::OracleOptions o;
        o.out = out == "f64" ? Format::fp64 : format_arg(out, "out");
        const ref::DotResult r = ref::dot(span_of(x), span_of(y), format_arg(format, "format"), o);
        return std::make_tuple(r.value, r.approx, r.abs_sum);
      },
      nb::arg("x"), nb::arg("y"), nb::arg("format"), nb::arg("out"));
  // x (m, k), w (n, k): (y correctly rounded to format, nearest doubles, Σ|x w| per element), each (m·n).
  m.def(
      "oracle_gemm",
      [](const Doubles& x, const Doubles& w, std::size_t mm, std::size_t n, std::size_t k, const std::string& format) {
        expect_size("x", x.size(), mm * k, "(m, k)");
        expect_size("w", w.size(), n * k, "(n, k)");
        const Format f = format_arg(format, "format");
        ref::OracleOptions o;
        o.out = f;
        ref::ProjectionResult r = ref::project(span_of(x), span_of(w), mm, k, n, f, o);
        return std::make_tuple(std::move(r.y), std::move(r.approx), std::move(r.abs_sum));
      },
      nb::arg("x"), nb::arg("w"), nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("format"));
  // (out correctly rounded to format, nearest doubles), each (n_q, n_heads, d_v).
  m.def(
      "oracle_attention",
      [](const Doubles& q, const Doubles& k, const Doubles& v, const kernels::AttentionCall& c,
         const std::string& format) {
        ref::AttentionResult r = attention(q, k, v, c, format_arg(format, "format"));
        return std::make_tuple(std::move(r.out), std::move(r.approx));
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("call"), nb::arg("format"));

  // |ŷ − x·w| for one element of a black-box GEMM in `format` (fp32 products and sums, any order, one rounding to
  // format): k the reduction length, sum_abs = Σ|x_i w_i| (oracle_gemm's third result).
  m.def(
      "bound_gemm",
      [](std::size_t k, double sum_abs, const std::string& format) {
        const Format f = format_arg(format, "format");
        const kernels::GemmPath p = kernels::black_box_gemm_path(f, f);
        return ref::dot_error_bound(p.spec, p.order, k, sum_abs);
      },
      nb::arg("k"), nb::arg("sum_abs"), nb::arg("format"));
  // The per-element bound (n_q, n_heads, d_v) of a black-box attention kernel in `format` with the given exp budget
  // and scale (exp2_scale: folded with log2 e) (docs/TOLERANCES.md §10), on these inputs.
  m.def(
      "bound_attention",
      [](const Doubles& q, const Doubles& k, const Doubles& v, const kernels::AttentionCall& c,
         const std::string& format, double exp_rel_error, double exp_abs_error, bool exp2_scale) {
        const Format f = format_arg(format, "format");
        const ref::AttentionResult r = attention(q, k, v, c, f);
        kernels::KernelInfo info;
        info.in = info.out = f;
        const ref::AttentionPipeline p =
            kernels::black_box_attention_pipeline(info, c, exp_rel_error, exp_abs_error, {}, exp2_scale);
        const auto& s = c.shape;
        std::vector<double> b(s.n_q * s.n_heads * s.d_v);
        for (std::size_t i = 0; i < s.n_q; ++i)
          for (std::size_t h = 0; h < s.n_heads; ++h)
            for (std::size_t col = 0; col < s.d_v; ++col)
              b[(i * s.n_heads + h) * s.d_v + col] =
                  ref::attention_pipeline_bound(p, c.params, ref::element_stats(r, span_of(v), s, c.params, i, h, col));
        return b;
      },
      nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("call"), nb::arg("format"), nb::arg("exp_rel_error"),
      nb::arg("exp_abs_error"), nb::arg("exp2_scale") = false);
  // An AttentionCall of the caller's own (the oracle and bounds on their shapes).
  m.def(
      "attention_call",
      [](std::size_t n_q, std::size_t n_kv, std::size_t n_heads, std::size_t n_kv_heads, std::size_t d, std::size_t d_v,
         std::int64_t q_offset, bool causal, std::int64_t window, double scale, double softcap, std::size_t capacity) {
        if (n_kv_heads == 0 || n_heads % n_kv_heads != 0)
          throw std::invalid_argument("n_heads=" + std::to_string(n_heads) + ", n_kv_heads=" +
                                      std::to_string(n_kv_heads) + ": expected n_heads a multiple of n_kv_heads");
        if (q_offset < 0 || window < 0 || softcap < 0)
          throw std::invalid_argument("q_offset, window and softcap: expected >= 0");
        if (causal && static_cast<std::size_t>(q_offset) + n_q > n_kv)
          throw std::invalid_argument("causal call: expected q_offset + n_q <= n_kv");
        if (capacity != 0 && capacity < n_kv) throw std::invalid_argument("capacity: expected 0 or >= n_kv");
        kernels::AttentionCall c;
        c.shape = {n_q, n_kv, n_heads, n_kv_heads, d, d_v};
        c.params.q_offset = q_offset;
        c.params.causal = causal;
        c.params.window = window;
        c.params.scale = scale;
        c.params.softcap = softcap;
        c.capacity = capacity;
        return c;
      },
      nb::arg("n_q"), nb::arg("n_kv"), nb::arg("n_heads"), nb::arg("n_kv_heads"), nb::arg("d"), nb::arg("d_v"),
      nb::arg("q_offset"), nb::arg("causal"), nb::arg("window"), nb::arg("scale"), nb::arg("softcap"),
      nb::arg("capacity"));
}

}  // namespace kvconf::python
