// A model: its config and its weights, converted at load to the profile's storage format (as
// from_pretrained(torch_dtype=...) does: RNE from the checkpoint's dtype). Weight matrices are stored as
// nn.Linear holds them, (out_features, in_features) row-major, as floats holding storage-format values.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kvconf/engine/config.hpp"
#include "kvconf/numerics/format.hpp"

namespace kvconf::engine {

struct LayerWeights {
  std::vector<float> attn_norm;       // (hidden)            input_layernorm
  std::vector<float> wq;              // (n_heads·d, hidden)  q_proj
  std::vector<float> wk;              // (n_kv·d, hidden)     k_proj
  std::vector<float> wv;              // (n_kv·d, hidden)     v_proj
  std::vector<float> wo;              // (hidden, n_heads·d)  o_proj
  std::vector<float> post_attn_norm;  // (hidden)  Gemma-2 only: post_attention_layernorm (on the attention output)
  std::vector<float> mlp_norm;  // (hidden)  Llama/Mistral: post_attention_layernorm; Gemma-2: pre_feedforward_layernorm
  std::vector<float> post_mlp_norm;  // (hidden)  Gemma-2 only: post_feedforward_layernorm
  std::vector<float> w_gate;         // (intermediate, hidden)  gate_proj (llama2.c w1)
  std::vector<float> w_up;           // (intermediate, hidden)  up_proj   (llama2.c w3)
  std::vector<float> w_down;         // (hidden, intermediate)  down_proj (llama2.c w2)
};

struct Model {
  ModelConfig config;
  Format storage = Format::fp32;     // every weight holds values of this format
  std::vector<float> embed;          // (vocab, hidden)
  std::vector<LayerWeights> layers;  // n_layers
  std::vector<float> final_norm;     // (hidden)
  std::vector<float> lm_head;        // (vocab, hidden); empty when tied to embed
  std::string source;                // what it was loaded from

  std::span<const float> head() const { return lm_head.empty() ? std::span<const float>(embed) : lm_head; }
  std::size_t n_params() const;
};

// Loads PATH: a checkpoint folder (config.json + model.safetensors or an index), a config.json's path (its folder),
// or a llama2.c .bin. Weights convert to `storage`. Throws LoadError naming the file, field and expected value.
Model load_model(const std::filesystem::path& path, Format storage);

// The llama2.c checkpoint format (karpathy/llama2.c run.c): 7 int32 header fields, then fp32 weights; a negative
// vocab_size means an unshared classifier follows. RoPE pairs are interleaved.
Model load_llama2c(const std::filesystem::path& bin, Format storage);

// The same weights in another storage format (exact when widening; RNE when narrowing).
Model convert(const Model& m, Format storage);

// Checks every weight's size against the config; throws LoadError naming the tensor.
void validate(const Model& m);

}  // namespace kvconf::engine
