// libFuzzer harness: the plugin worker's kernel table (plugin_wire::deserialize and its serialize round trip) (the
// driver is run_plugin_table in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("plugin_table");
  return kvconf::fuzz::run_one(d, data, size);
}
