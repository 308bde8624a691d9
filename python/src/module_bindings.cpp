// kvconf._core, the compiled half of the Python package kvconf (python/kvconf/ is the other): the same C++ libraries
// the suites and the kvconf program use, bound with nanobind. docs/PYTHON.md.
#include <stdexcept>

#include "bindings.hpp"
#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::python {

Format format_arg(const std::string& s, const char* argument) {
  if (s == "f32" || s == "fp32") return Format::fp32;
  if (s == "f16" || s == "fp16") return Format::fp16;
  if (s == "bf16") return Format::bf16;
  throw std::invalid_argument(std::string(argument) + "='" + s + "': expected 'f32', 'f16' or 'bf16'");
}

}  // namespace kvconf::python

NB_MODULE(_core, m) {
  using namespace kvconf::python;
  m.doc() = "kvconf's C++ libraries (cases, checks, oracle, bounds, traces); use the kvconf package, not this module";
  m.attr("__version__") = KVCONF_VERSION;
  // pytest keeps its parametrised cases alive until the interpreter exits, after nanobind's leak check: not leaks.
  nb::set_leak_warnings(false);
  // Bad files and options (trace readers, models) are the caller's input: ValueError, with the reader's message.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const kvconf::protocol::BadInput& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  bind_cases(m);
  bind_kernels(m);
  bind_checks(m);
  bind_oracle(m);
  bind_traces(m);
}
