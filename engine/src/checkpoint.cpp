// A checkpoint folder's tensors: model.safetensors, or the shards named by model.safetensors.index.json's weight_map
// (the layout transformers' save_pretrained writes), every mapped tensor checked to exist in its shard.

#include <nlohmann/json.hpp>

#include "json_file.hpp"
#include "kvconf/engine/error.hpp"
#include "kvconf/engine/safetensors.hpp"

namespace kvconf::engine {

namespace {

std::string shape_str(const std::vector<std::size_t>& s) {
  std::string o = "[";
  for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

}  // namespace

Checkpoint Checkpoint::open(const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  Checkpoint c;
  const fs::path index = folder / "model.safetensors.index.json";
  const fs::path single = folder / "model.safetensors";
  if (fs::is_regular_file(index)) {
    const std::string file = index.string();
    nlohmann::json j = read_json_object(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail(file, "weight_map", "missing or not an object");
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) fail(file, name, "shard name is not a string");
      const std::string s = shard.get<std::string>();
      if (s.empty() || fs::path(s).is_absolute() || s.find("..") != std::string::npos)
        fail(file, name, "shard \"" + s + "\" is not a file name inside the checkpoint folder");
      auto it = shards.find(s);
      if (it == shards.end()) {
        if (!fs::exists(folder / s)) fail(file, name, "shard " + s + " does not exist");
        it = shards.emplace(s, SafetensorsFile::open(folder / s)).first;
        c.files_.push_back(it->second);
      }
      const TensorView* v = it->second->find(name);
      if (v == nullptr) fail(file, name, "listed in weight_map but missing from shard " + s);
      c.index_[name] = v;
      c.where_[name] = it->second->path();
    }
    if (c.index_.empty()) fail(file, "weight_map", "is empty");
    return c;
  }
  if (!fs::is_regular_file(single)) fail(folder.string(), "", "no model.safetensors or model.safetensors.index.json");
  c.files_.push_back(SafetensorsFile::open(single));
  for (const auto& [name, v] : c.files_[0]->tensors()) {
    c.index_[name] = &v;
    c.where_[name] = single;
  }
  return c;
}

const TensorView& Checkpoint::get(const std::string& name, const std::vector<std::size_t>& expected_shape) const {
  const auto it = index_.find(name);
  if (it == index_.end()) {
    // The file to name: the single model.safetensors, or the index that should have listed the tensor.
    std::filesystem::path file;
    if (files_.size() == 1 && files_[0]->path().filename() == "model.safetensors")
      file = files_[0]->path();
    else if (!files_.empty())
      file = files_[0]->path().parent_path() / "model.safetensors.index.json";
    fail(file.string(), name, "missing tensor");
  }
  if (it->second->shape != expected_shape)
    fail(where_.at(name).string(), name,
         "shape " + shape_str(it->second->shape) + " (expected " + shape_str(expected_shape) + ")");
  return *it->second;
}

bool Checkpoint::has(const std::string& name) const { return index_.count(name) != 0; }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, v] : index_) out.push_back(name);
  return out;
}

std::string Checkpoint::describe() const {
  std::string o;
  for (std::size_t i = 0; i < files_.size(); ++i) o += (i ? ", " : "") + files_[i]->path().string();
  return o + " (" + std::to_string(index_.size()) + " tensors)";
}

}  // namespace kvconf::engine
