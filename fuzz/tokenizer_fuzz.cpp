// libFuzzer harness: SentencePiece tokenizer.model files (engine::Tokenizer::load, encode, decode) (the driver is
// run_tokenizer in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("tokenizer");
  return kvconf::fuzz::run_one(d, data, size);
}
