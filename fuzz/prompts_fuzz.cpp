// libFuzzer harness: prompt-set files of token ids (protocol::resolve_prompts with --prompts ids:FILE:
// analysis::read_prompts) (the driver is run_prompts in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("prompts");
  return kvconf::fuzz::run_one(d, data, size);
}
