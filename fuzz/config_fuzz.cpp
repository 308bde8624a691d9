// libFuzzer harness: Hugging Face config.json (engine::parse_hf_config) for Llama-2, Mistral and Gemma-2 (the driver is
// run_config in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("config");
  return kvconf::fuzz::run_one(d, data, size);
}
