// The case tables as Python values: the call shapes a kernel is called with (AttentionCall, GemmShape, NormShape and
// NormParams) and the cases of the three sets, "quick" (attention: quick_attention_cases, chosen by property coverage;
// the other kinds: kvconf kernels --quick), "default" (the suites' fast cases: what Plugin/ and Torch/ run in ctest)
// and "full" (the suites' tables, slow cases included); an attention case's properties (coverage.hpp).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <vector>

#include "bindings.hpp"
#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/coverage.hpp"
#include "kvconf/conformance/sweep.hpp"

namespace kvconf::python {
namespace {

using conformance::AttentionCase;
using conformance::GemmCase;
using conformance::NormCase;
using conformance::ProjectionCase;
using kernels::AttentionCall;

enum class Set { quick, standard, full };

Set set_arg(const std::string& s) {
  if (s == "quick") return Set::quick;
  if (s == "default") return Set::standard;
  if (s == "full") return Set::full;
  throw std::invalid_argument("case_set='" + s + "': expected 'quick', 'default' or 'full'");
}

// The suites' table for `default` (fast cases) and `full`; the sweep's quick shapes for `quick`.
template <class C>
std::vector<C> pick(Set s, std::vector<C> quick, std::vector<C> table) {
  if (s == Set::quick) return quick;
  std::vector<C> v;
  for (C& c : table)
    if (s == Set::full || !c.slow) v.push_back(std::move(c));
  return v;
}

// m.<name>(case_set="quick"): the sweep's quick shapes, or the suites' table (default: its fast cases; full: all).
template <class C>
void def_cases(nb::module_& m, const char* name, std::vector<C> (*quick)(bool), std::vector<C> (*table)()) {
  m.def(
      name, [quick, table](const std::string& case_set) { return pick(set_arg(case_set), quick(true), table()); },
      nb::arg("case_set") = "quick");
}

std::string call_repr(const AttentionCall& c) {
  const auto& s = c.shape;
  const auto& p = c.params;
  return "AttentionCall(n_q=" + std::to_string(s.n_q) + ", n_kv=" + std::to_string(s.n_kv) +
         ", n_heads=" + std::to_string(s.n_heads) + ", n_kv_heads=" + std::to_string(s.n_kv_heads) +
         ", d=" + std::to_string(s.d) + ", d_v=" + std::to_string(s.d_v) + ", capacity=" + std::to_string(c.cap()) +
         ", q_offset=" + std::to_string(p.q_offset) + ", causal=" + (p.causal ? "True" : "False") +
         ", window=" + std::to_string(p.window) + ", scale=" + std::to_string(p.scale) +
         ", softcap=" + std::to_string(p.softcap) + ")";
}

}  // namespace

void bind_cases(nb::module_& m) {
  // What a kernel is called with. q: (n_q, n_heads, d) at positions q_offset .. q_offset + n_q - 1;
  // k_cache: (capacity, n_kv_heads, d), v_cache: (capacity, n_kv_heads, d_v), rows [n_kv, capacity) unused;
  // out: (n_q, n_heads, d_v).
  nb::class_<AttentionCall>(m, "AttentionCall")
      .def_prop_ro("n_q", [](const AttentionCall& c) { return c.shape.n_q; })
      .def_prop_ro("n_kv", [](const AttentionCall& c) { return c.shape.n_kv; })
      .def_prop_ro("n_heads", [](const AttentionCall& c) { return c.shape.n_heads; })
      .def_prop_ro("n_kv_heads", [](const AttentionCall& c) { return c.shape.n_kv_heads; })
      .def_prop_ro("d", [](const AttentionCall& c) { return c.shape.d; })
      .def_prop_ro("d_v", [](const AttentionCall& c) { return c.shape.d_v; })
      .def_prop_ro("capacity", [](const AttentionCall& c) { return c.cap(); })
      .def_prop_ro("q_offset", [](const AttentionCall& c) { return c.params.q_offset; })
      .def_prop_ro("causal", [](const AttentionCall& c) { return c.params.causal; })
      .def_prop_ro("window", [](const AttentionCall& c) { return c.params.window; })
      .def_prop_ro("scale", [](const AttentionCall& c) { return c.params.scale; })
      .def_prop_ro("softcap", [](const AttentionCall& c) { return c.params.softcap; })
      // sequences in the launch this call is part of (a batched decode step; 1: alone)
      .def_prop_ro("batch", [](const AttentionCall& c) { return c.batch; })
      .def("__repr__", &call_repr);
  nb::class_<kernels::GemmShape>(m, "GemmShape")
      .def_ro("m", &kernels::GemmShape::m)
      .def_ro("n", &kernels::GemmShape::n)
      .def_ro("k", &kernels::GemmShape::k)
      .def("__repr__", [](const kernels::GemmShape& s) {
        return "GemmShape(m=" + std::to_string(s.m) + ", n=" + std::to_string(s.n) + ", k=" + std::to_string(s.k) + ")";
      });
  nb::class_<kernels::NormShape>(m, "NormShape")
      .def_ro("rows", &kernels::NormShape::rows)
      .def_ro("d", &kernels::NormShape::d)
      .def("__repr__", [](const kernels::NormShape& s) {
        return "NormShape(rows=" + std::to_string(s.rows) + ", d=" + std::to_string(s.d) + ")";
      });
  nb::class_<kernels::NormParams>(m, "NormParams")
      .def_ro("eps", &kernels::NormParams::eps)
      .def_ro("one_plus_weight", &kernels::NormParams::one_plus_weight)
      .def("__repr__", [](const kernels::NormParams& p) {
        return "NormParams(eps=" + std::to_string(p.eps) +
               ", one_plus_weight=" + (p.one_plus_weight ? "True" : "False") + ")";
      });

  nb::class_<AttentionCase>(m, "AttentionCase")
      .def_prop_ro("id", &AttentionCase::id)
      .def_ro("call", &AttentionCase::call)
      .def_prop_ro("data", [](const AttentionCase& c) { return std::string(conformance::data_name(c.data)); })
      .def_ro("slow", &AttentionCase::slow)
      // what the case exercises ("heads.gqa", "mask.window", "scores.p_flush", ...: conformance/coverage.hpp)
      .def_prop_ro("properties", [](const AttentionCase& c) { return conformance::attention_properties(c); })
      .def("__repr__", [](const AttentionCase& c) { return "AttentionCase('" + c.id() + "')"; });
  nb::class_<GemmCase>(m, "GemmCase")
      .def_prop_ro("id", &GemmCase::id)
      .def_ro("shape", &GemmCase::shape)
      .def_prop_ro("data", [](const GemmCase& c) { return std::string(conformance::data_name(c.data)); })
      .def_ro("slow", &GemmCase::slow)
      .def("__repr__", [](const GemmCase& c) { return "GemmCase('" + c.id() + "')"; });
  nb::class_<ProjectionCase>(m, "ProjectionCase")
      .def_prop_ro("id", &ProjectionCase::id)
      .def_ro("prompt", &ProjectionCase::prompt)
      .def_ro("total", &ProjectionCase::total)
      .def_ro("n", &ProjectionCase::n)
      .def_ro("k", &ProjectionCase::k)
      .def_prop_ro("data", [](const ProjectionCase& c) { return std::string(conformance::data_name(c.data)); })
      .def_ro("slow", &ProjectionCase::slow)
      .def("__repr__", [](const ProjectionCase& c) { return "ProjectionCase('" + c.id() + "')"; });
  nb::class_<NormCase>(m, "NormCase")
      .def_prop_ro("id", &NormCase::id)
      .def_ro("shape", &NormCase::shape)
      .def_ro("params", &NormCase::params)
      .def_prop_ro("data", [](const NormCase& c) { return std::string(conformance::data_name(c.data)); })
      .def_ro("slow", &NormCase::slow)
      .def("__repr__", [](const NormCase& c) { return "NormCase('" + c.id() + "')"; });

  def_cases(
      m, "attention_cases", +[](bool) { return conformance::quick_attention_cases(); }, &conformance::attention_cases);
  def_cases(m, "gemm_cases", &conformance::sweep_gemm_cases, &conformance::gemm_cases);
  def_cases(m, "projection_cases", &conformance::sweep_projection_cases, &conformance::projection_cases);
  def_cases(m, "norm_cases", &conformance::sweep_norm_cases, &conformance::norm_cases);
}

}  // namespace kvconf::python
