// Full-size random-weight checkpoints with the published LLaMA-2-7B, Mistral-7B-v0.3 and Gemma-2-2B configs: a
// Hugging Face folder (config.json, fp16 safetensors shards of at most ~2 GB, model.safetensors.index.json) written
// by streaming seeded weights in bounded memory, so the GPU engine runs the real shapes where no real weights exist.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kvconf::bench {

// "llama2-7b", "mistral-7b-v0.3", "gemma2-2b".
const std::vector<std::string>& random_checkpoint_archs();

// The published config.json of the architecture (the Hugging Face model repositories meta-llama/Llama-2-7b-hf,
// mistralai/Mistral-7B-v0.3, google/gemma-2-2b), as JSON text with num_hidden_layers = layers (0 = the published
// count) and torch_dtype "float16" (the dtype of the weights written). Throws std::invalid_argument on an unknown arch.
std::string published_config_json(const std::string& arch, std::size_t layers = 0);

struct RandomCheckpointOptions {
  std::string arch;           // one of random_checkpoint_archs()
  std::filesystem::path out;  // the folder (created)
  std::uint64_t seed = 0;
  std::size_t layers = 0;                       // 0 = the published layer count
  std::size_t max_shard_bytes = 2'000'000'000;  // data bytes per shard (a larger tensor gets a shard of its own)
  unsigned threads = 0;                         // 0 = hardware concurrency
};

struct TensorPlan {
  std::string name;                // "model.layers.0.self_attn.q_proj.weight"
  std::vector<std::size_t> shape;  // (out_features, in_features) for matrices
  double mean = 0.0, sigma = 0.0;  // weights are mean + sigma·N(0, 1), rounded to fp16 (RNE)
  std::size_t shard = 0;           // index into the shard list
};

struct CheckpointPlan {
  std::vector<TensorPlan> tensors;  // in file order
  std::vector<std::string> shards;  // "model-00001-of-00007.safetensors" (or "model.safetensors" when one)
  std::size_t total_bytes = 0;      // fp16 data bytes over all shards
};

// The tensors (HF names and shapes, as the engine's loader expects them) and their assignment to shards.
CheckpointPlan plan_random_checkpoint(const RandomCheckpointOptions& o);

// Writes o.out/config.json, README.txt, the shards (each atomically: temp + rename) and, when there is more than one
// shard, model.safetensors.index.json. Memory stays bounded (a few MB per thread). Returns the plan it wrote.
// Throws std::invalid_argument on bad options, std::runtime_error on I/O failure.
CheckpointPlan write_random_checkpoint(const RandomCheckpointOptions& o);

// Element i of a tensor: the standard normal draw the writer uses (counter-based, so threads and chunking do not
// change it): Box–Muller on two 53-bit uniforms hashed (splitmix64) from the tensor key and i / 2.
double random_normal(std::uint64_t tensor_key, std::size_t i);
std::uint64_t tensor_key(std::uint64_t seed, const std::string& name);  // FNV-1a of the name mixed with the seed

}  // namespace kvconf::bench
