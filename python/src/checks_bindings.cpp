// The conformance rules on Python kernels: the same check functions (conformance/checks.hpp) and seeds
// (seed_for(rule, case id), as the suites and the kernel sweep use them) as Plugin/ and Torch/. A kernel's Python
// exception passes through unchanged.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <optional>
#include <stdexcept>

#include "bindings.hpp"
#include "kvconf/conformance/checks.hpp"

namespace kvconf::python {
namespace {

using conformance::CheckResult;
using conformance::CheckResults;

// The chunk sizes of the suites and the sweep (attention_cache_test.cpp, sweep.cpp).
constexpr std::array<std::size_t, 3> kChunks = {1, 4, 16};

std::uint64_t seed_of(const std::optional<std::uint64_t>& seed, const char* rule, const std::string& id) {
  return seed ? *seed : conformance::seed_for(rule, id);
}

void add(CheckResults& all, CheckResults r) {
  for (CheckResult& x : r) all.push_back(std::move(x));
}

// rules: any of "oracle" (oracle_bound, two_sided), "on_off", "chunked", "unused_slots", "capacity" (run for kernels
// claiming cache_invariant only, as in the suites), "batch" (a decode row alone vs inside batched launches, for kernels
// with a batched launch); empty: all of them.
CheckResults check_attention(const kernels::AttentionKernel& k, const conformance::AttentionCase& c,
                             const std::vector<std::string>& rules, const std::optional<std::uint64_t>& seed) {
  static const std::array<const char*, 6> known = {"oracle", "on_off", "chunked", "unused_slots", "capacity", "batch"};
  for (const std::string& r : rules) {
    bool ok = false;
    for (const char* n : known) ok = ok || r == n;
    if (!ok)
      throw std::invalid_argument("rules: unknown rule '" + r +
                                  "', expected 'oracle', 'on_off', 'chunked', 'unused_slots', 'capacity' or 'batch'");
  }
  auto want = [&](const char* r) {
    if (rules.empty()) return true;
    for (const std::string& x : rules)
      if (x == r) return true;
    return false;
  };
  const std::string id = c.id();
  CheckResults all;
  if (want("oracle"))
    add(all, conformance::check_attention_matches_oracle(k, c, seed_of(seed, "attention_oracle", id)));
  if (want("on_off")) add(all, conformance::check_attention_cache_on_off(k, c, seed_of(seed, "attention_on_off", id)));
  if (want("chunked")) {
    CheckResults r = conformance::check_attention_chunked(k, c, kChunks, seed_of(seed, "attention_chunked", id));
    for (std::size_t i = 0; i < r.size() && i < kChunks.size(); ++i) r[i].rule += ".chunk" + std::to_string(kChunks[i]);
    add(all, std::move(r));
  }
  if (want("unused_slots"))
    add(all, conformance::check_attention_unused_slots(k, c, seed_of(seed, "attention_unused_slots", id)));
  if (want("capacity") && k.info.cache_invariant)
    add(all, conformance::check_attention_capacity(k, c, seed_of(seed, "attention_capacity", id)));
  // As the suites: a kernel without a batched launch has no batched path to check, and a launch it declines is not run
  // (kvconf._checks reports that reason when the batch rule was asked for by name).
  if (want("batch") && k.run_batch && !conformance::attention_batch_unchecked(k, c))
    add(all, conformance::check_attention_batch_invariance(k, c, seed_of(seed, "attention_batch", id)));
  return all;
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
      .def_ro("detail", &CheckResult::detail);
  m.def("seed_for", &conformance::seed_for, nb::arg("rule"), nb::arg("case_id"));
  m.def("check_attention", &check_attention, nb::arg("kernel"), nb::arg("case"), nb::arg("rules"),
        nb::arg("seed").none());
  m.def("attention_batch_unchecked", &conformance::attention_batch_unchecked, nb::arg("kernel"), nb::arg("case"));
  m.def(
      "check_gemm",
      [](const kernels::GemmKernel& k, const conformance::GemmCase& c, const std::optional<std::uint64_t>& seed) {
        CheckResults r = conformance::check_gemm_matches_oracle(k, c, seed_of(seed, "gemm_oracle", c.id()));
        // GemmConformance.BatchInvariant: every row of the M-row call vs alone, when there is a batch (M >= 2).
        if (c.shape.m >= 2) add(r, conformance::check_gemm_batch_invariance(k, c, seed_of(seed, "gemm_batch", c.id())));
        return r;
      },
      nb::arg("kernel"), nb::arg("case"), nb::arg("seed").none());
  m.def(
      "check_projection",
      [](const kernels::GemmKernel& k, const conformance::ProjectionCase& c, const std::optional<std::uint64_t>& seed) {
        return conformance::check_projection_cache_on_off(k, c, seed_of(seed, "projection_on_off", c.id()));
      },
      nb::arg("kernel"), nb::arg("case"), nb::arg("seed").none());
  m.def(
      "check_norm",
      [](const kernels::NormKernel& k, const conformance::NormCase& c, const std::optional<std::uint64_t>& seed) {
        return conformance::check_norm_matches_oracle(k, c, seed_of(seed, "norm_oracle", c.id()));
      },
      nb::arg("kernel"), nb::arg("case"), nb::arg("seed").none());
}

}  // namespace kvconf::python
