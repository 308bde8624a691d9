// One forward call as an engine reports it (the scenarios' calls, scenario.hpp, and a trace's, protocol/trace.hpp):
// tokens fed, cached rows attended over, rows of the whole call.
#pragma once

#include <cstddef>

namespace kvconf::engine {

// Tokens fed and cached rows attended over before them (Trace::pos0), and the rows of the whole call
// (Trace::batch_rows: every sequence's in a batch; 0 in an expectation or a trace that does not say means alone,
// = fed).
struct CallRecord {
  std::size_t fed = 0;
  std::size_t cached = 0;
  std::size_t batch = 0;
  std::size_t batch_rows() const { return batch == 0 ? fed : batch; }
};

}  // namespace kvconf::engine
