// The safetensors format: an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the data. Reading memory-maps the file and validates everything against the file size before any tensor is
// touched; sharded checkpoints are read through model.safetensors.index.json. Writing is atomic (temp + rename).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kvconf::engine {

enum class Dtype : std::uint8_t { f16, bf16, f32 };
const char* dtype_name(Dtype d);  // "F16", "BF16", "F32"
std::size_t dtype_size(Dtype d);

struct TensorView {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<std::size_t> shape;
  std::span<const std::byte> bytes;  // little-endian elements, row-major
  std::size_t numel() const;
  std::vector<float> to_float() const;  // exact widening of F16/BF16/F32
};

// One memory-mapped .safetensors file.
class SafetensorsFile {
 public:
  // Throws LoadError naming the file and the field: missing file, header length beyond the file, bad JSON, unknown
  // dtype, shape/offset mismatch, overlapping or out-of-range data, trailing garbage.
  static std::shared_ptr<const SafetensorsFile> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorView* find(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint folder: model.safetensors, or the shards listed in model.safetensors.index.json
// (every listed shard opened, every weight_map entry found in its shard).
class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& folder);
  // Throws LoadError "<file>: <name>: missing tensor" or a shape mismatch naming expected and found shapes.
  const TensorView& get(const std::string& name, const std::vector<std::size_t>& expected_shape) const;
  bool has(const std::string& name) const;
  std::vector<std::string> names() const;
  std::string describe() const;  // the files it read

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
  std::map<std::string, std::filesystem::path> where_;
};

// A tensor to write: float values converted to dtype (RNE) on writing.
struct TensorData {
  std::string name;
  Dtype dtype = Dtype::f32;
  std::vector<std::size_t> shape;
  std::vector<float> values;
};

// Writes one .safetensors file atomically. Throws std::runtime_error on I/O failure, std::invalid_argument when a
// tensor's values do not match its shape or a name repeats.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kvconf::engine
