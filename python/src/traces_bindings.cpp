// kvconf.check_traces underneath: `kvconf check` (protocol/trace_check.hpp) on one cache-ON and one cache-OFF trace
// file, its records written to OUT/pairs.jsonl (resumable) and returned as JSON text for the Python side to read.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "kvconf/protocol/trace.hpp"
#include "kvconf/protocol/trace_check.hpp"

namespace kvconf::python {

void bind_traces(nb::module_& m) {
  m.def(
      "check_traces",
      [](const std::string& on, const std::string& off, const std::string& model, const std::string& out, bool resume,
         bool expect_bitwise) {
        std::vector<protocol::TracePair> pairs;
        pairs.push_back(protocol::make_trace_pair(protocol::read_trace(on), protocol::read_trace(off)));
        protocol::TraceCheckOptions o;
        o.model = model;
        o.out = out;
        o.resume = resume;
        o.expect_bitwise = expect_bitwise;
        o.inputs = {on, off};
        const protocol::TraceCheckResult r = protocol::run_trace_check(pairs, o);
        std::vector<std::string> records;
        for (const auto& rec : r.records) records.push_back(results::to_json(rec).dump());
        return records;
      },
      nb::arg("on"), nb::arg("off"), nb::arg("model"), nb::arg("out"), nb::arg("resume"), nb::arg("expect_bitwise"));
}

}  // namespace kvconf::python
