// The pieces of the Python extension kvconf._core (module.cpp calls each bind_*): case tables, kernels made from
// Python callables, the conformance checks, the MPFR oracle and bounds, and the trace check. docs/PYTHON.md.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "kvconf/numerics/format.hpp"

namespace kvconf::python {

namespace nb = nanobind;

void bind_cases(nb::module_& m);    // cases.cpp: AttentionCall, the case classes, the quick/default/full tables
void bind_kernels(nb::module_& m);  // kernels.cpp: AttentionKernel, GemmKernel, NormKernel over Python runners
void bind_checks(nb::module_& m);   // checks.cpp: CheckResult, check_attention/gemm/projection/norm, seed_for
void bind_oracle(nb::module_& m);   // oracle.cpp: the MPFR oracle (dot, attention) and the bounds
void bind_traces(nb::module_& m);   // traces.cpp: kvconf check on two trace files

// "f32" | "f16" | "bf16" (the kernel-name suffixes) or a numerics name ("fp16"); std::invalid_argument naming the
// argument otherwise.
Format format_arg(const std::string& s, const char* argument);

}  // namespace kvconf::python
