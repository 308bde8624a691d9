// libFuzzer harness: GSM8K jsonl (protocol::resolve_prompts with --prompts gsm8k:FILE: read_gsm8k, sample, exemplars,
// prompt text) (the driver is run_gsm8k in fuzz/drivers.cpp).
#include <cstddef>
#include <cstdint>

#include "drivers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const kvconf::fuzz::Driver& d = kvconf::fuzz::driver("gsm8k");
  return kvconf::fuzz::run_one(d, data, size);
}
