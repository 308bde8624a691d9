// float ↔ fp16/bf16/fp32 bit patterns for the tensors crossing to a plugin (tensor_bits.hpp): F16C where the CPU
// kernels use it, numerics' correctly rounded encode/decode otherwise; bf16 by its top 16 bits.
#include "tensor_bits.hpp"

#include <bit>
#include <cstdint>
#include <cstring>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::kernels::plugin_bits {

std::size_t bytes_per(Format f) { return f == Format::fp32 ? 4 : 2; }

std::vector<std::byte> encode(Format f, std::span<const float> v) {
  std::vector<std::byte> b(v.size() * bytes_per(f));
  if (f == Format::fp32) {
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t h = 0;
    if (f == Format::bf16) {
      h = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(round_bf16(v[i])) >> 16);
    } else {
#if defined(KVCONF_HAVE_F16C)
      h = _cvtss_sh(v[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
      h = static_cast<std::uint16_t>(kvconf::encode(Format::fp16, static_cast<double>(v[i])));
#endif
    }
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

void decode(Format f, std::span<const std::byte> bytes, std::span<float> v) {
  if (f == Format::fp32) {
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint16_t h = 0;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    if (f == Format::bf16) {
      v[i] = std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
    } else {
#if defined(KVCONF_HAVE_F16C)
      v[i] = _cvtsh_ss(h);
#else
      v[i] = static_cast<float>(kvconf::decode(Format::fp16, h));
#endif
    }
  }
}

}  // namespace kvconf::kernels::plugin_bits
