// Writing .safetensors: floats rounded to the tensor's dtype (RNE, via kvconf::encode), a sorted-key JSON header
// padded with spaces to a multiple of 8 bytes, contiguous data, written atomically (temp file + rename).
#include <bit>
#include <cstring>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "kvconf/engine/atomic_file.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::engine {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();  // std::map-backed: keys come out sorted
  std::set<std::string> seen;
  std::size_t offset = 0;
  for (const TensorData& t : tensors) {
    if (t.name == "__metadata__")
      throw std::invalid_argument("write_safetensors: tensor name __metadata__ is reserved");
    if (!seen.insert(t.name).second) throw std::invalid_argument("write_safetensors: tensor name repeats: " + t.name);
    std::size_t numel = 1;
    for (std::size_t s : t.shape) numel *= s;
    if (t.values.size() != numel)
      throw std::invalid_argument("write_safetensors: " + t.name + " has " + std::to_string(t.values.size()) +
                                  " values but its shape holds " + std::to_string(numel));
    const std::size_t nbytes = numel * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // pad so the data starts 8-byte aligned
  std::string out;
  out.reserve(8 + h.size() + offset);
  const std::uint64_t n = h.size();
  out.append(reinterpret_cast<const char*>(&n), 8);
  out += h;
  for (const TensorData& t : tensors) {
    for (float x : t.values) {
      if (t.dtype == Dtype::f32) {
        const auto b = std::bit_cast<std::uint32_t>(x);
        out.append(reinterpret_cast<const char*>(&b), 4);
      } else {
        const auto b = static_cast<std::uint16_t>(
            encode(t.dtype == Dtype::f16 ? Format::fp16 : Format::bf16, static_cast<double>(x)));
        out.append(reinterpret_cast<const char*>(&b), 2);
      }
    }
  }
  write_file_atomic(path, out);
}

}  // namespace kvconf::engine
