// libFuzzer harness: .safetensors files: header JSON, dtypes, shapes, offsets, overlaps, truncation
// (engine::SafetensorsFile::open), every tensor widened (the driver is run_safetensors in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("safetensors");
  return kvconf::fuzz::run_one(d, data, size);
}
