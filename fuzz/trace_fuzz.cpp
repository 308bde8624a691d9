// libFuzzer harness: kvconf.trace/1 traces (protocol::read_trace, then check_trace_pair on the trace and its cache-OFF
// twin) (the driver is run_trace in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("trace");
  return kvconf::fuzz::run_one(d, data, size);
}
