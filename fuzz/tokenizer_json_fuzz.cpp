// libFuzzer harness: byte-level BPE tokenizer.json files (engine::Tokenizer::load of a *.json, decode), with and
// without a tokenizer_config.json beside them (the driver is run_tokenizer_json in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("tokenizer_json");
  return kvconf::fuzz::run_one(d, data, size);
}
