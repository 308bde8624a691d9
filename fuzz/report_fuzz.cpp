// libFuzzer harness: a result folder read by kvconf report (reports::read_results, rules, report.json/md/html, junit,
// summary) (the driver is run_report in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("report");
  return kvconf::fuzz::run_one(d, data, size);
}
