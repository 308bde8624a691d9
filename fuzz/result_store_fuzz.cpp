// libFuzzer harness: the JSONL result store resumed (protocol::JsonlStore with resume=true, records parsed, one append)
// (the driver is run_result_store in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("result_store");
  return kvconf::fuzz::run_one(d, data, size);
}
