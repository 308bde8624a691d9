// libFuzzer harness: llama2.c .bin checkpoints (engine::load_model on a .bin: load_llama2c, validate, fp16 conversion)
// (the driver is run_llama2c in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("llama2c");
  return kvconf::fuzz::run_one(d, data, size);
}
