// libFuzzer harness: a checkpoint folder: config.json + model.safetensors or a sharded index (engine::load_model on a
// folder) (the driver is run_checkpoint in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("checkpoint");
  return kvconf::fuzz::run_one(d, data, size);
}
