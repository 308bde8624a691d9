// libFuzzer harness: golden baseline files (golden::read_baseline, check, to_json round trip) (the driver is run_golden
// in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("golden");
  return kvconf::fuzz::run_one(d, data, size);
}
