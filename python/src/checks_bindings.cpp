// The conformance rules on Python kernels: the rule tables every consumer runs (conformance/kernel_rules.hpp: the
// suites, the kernel sweep, Plugin/ and Torch/), with the same seeds (seed_for(rule, case id)). A kernel's Python
// exception passes through unchanged.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/conformance/kernel_rules.hpp"

namespace kvconf::python {
namespace {

using conformance::CheckResult;
using conformance::CheckResults;

std::vector<std::string> names_of(const std::vector<conformance::KernelRule>& rules) {
  std::vector<std::string> v;
  for (const conformance::KernelRule& r : rules) v.emplace_back(r.name);
  return v;
}

}  // namespace

void bind_checks(nb::module_& m) {
  nb::class_<CheckResult>(m, "CheckResult")
      .def_ro("rule", &CheckResult::rule)
      .def_ro("passed", &CheckResult::pass)
      .def_ro("error", &CheckResult::error)
      .def_ro("bound", &CheckResult::bound)
      .def_ro("headroom", &CheckResult::headroom)
      .def_ro("seed", &CheckResult::seed)
      .def_ro("detail", &CheckResult::detail)
      .def_ro("reference_error", &CheckResult::reference_error)
      .def_ro("worst_index", &CheckResult::worst_index)
      .def_ro("worst_value", &CheckResult::worst_value)
      .def_ro("worst_expected", &CheckResult::worst_expected)
      .def_ro("paths", &CheckResult::paths);
  m.def("seed_for", &conformance::seed_for, nb::arg("rule"), nb::arg("case_id"));
  // Every consumer runs kernel_rules.hpp's tables: these are the suites' and the sweep's rules, with their seeds.
  // rules: names from the kind's table (empty: all); seed: one seed for every rule (None: seed_for(rule, case id)).
  m.def("attention_rules", [] { return names_of(conformance::attention_rules()); });
  m.def("gemm_rules", [] { return names_of(conformance::gemm_rules()); });
  m.def("check_attention", &conformance::run_attention_rules, nb::arg("kernel"), nb::arg("case"), nb::arg("rules"),
        nb::arg("seed").none());
  m.def("attention_batch_unchecked", &conformance::attention_batch_unchecked, nb::arg("kernel"), nb::arg("case"));
  m.def("check_gemm", &conformance::run_gemm_rules, nb::arg("kernel"), nb::arg("case"), nb::arg("rules"),
        nb::arg("seed").none());
  m.def("check_projection", &conformance::run_projection_rules, nb::arg("kernel"), nb::arg("case"),
        nb::arg("rules"), nb::arg("seed").none());
  m.def("check_norm", &conformance::run_norm_rules, nb::arg("kernel"), nb::arg("case"), nb::arg("rules"),
        nb::arg("seed").none());
}

}  // namespace kvconf::python
