// Model configuration of the three supported architectures (Llama-2, Mistral, Gemma-2), read from a Hugging Face
// config.json or a llama2.c checkpoint header. Every field the forward pass uses is here; parse_hf_config rejects
// unknown model types and unsupported values (rope_scaling, biases, pretraining_tp > 1, ...) by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kvconf/numerics/format.hpp"

namespace kvconf::engine {

enum class Arch : std::uint8_t { llama, mistral, gemma2 };
enum class Activation : std::uint8_t { silu, gelu_tanh };  // SwiGLU (Llama, Mistral), GeGLU tanh (Gemma-2)

const char* arch_name(Arch a);  // "llama", "mistral", "gemma2"

struct ModelConfig {
  Arch arch = Arch::llama;
  std::size_t vocab = 0;              // vocab_size
  std::size_t hidden = 0;             // hidden_size
  std::size_t intermediate = 0;       // intermediate_size
  std::size_t n_layers = 0;           // num_hidden_layers
  std::size_t n_heads = 0;            // num_attention_heads
  std::size_t n_kv_heads = 0;         // num_key_value_heads (defaults to n_heads); n_heads % n_kv_heads == 0
  std::size_t head_dim = 0;           // head_dim (defaults to hidden / n_heads)
  std::size_t max_positions = 0;      // max_position_embeddings (llama2.c: seq_len)
  double rms_eps = 1e-6;              // rms_norm_eps (the kernel adds it as a float)
  double rope_theta = 10000.0;        // rope_theta
  bool rope_interleaved = false;      // llama2.c: rotate pairs (2i, 2i+1); HF: rotate_half pairs (i, i + d/2)
  Activation act = Activation::silu;  // hidden_act / hidden_activation
  bool tie_embeddings = false;        // tie_word_embeddings: the LM head is the embedding table
  // Sliding window (keys with pos − j < window are visible; 0 = none). Mistral applies it on every layer when set;
  // Gemma-2 on the layers where layer_is_sliding() (even layers, as HF's Gemma2DecoderLayer / layer_types).
  std::size_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // size n_layers: which layers use the window
  // Gemma-2 only (0 = none / default).
  double attn_softcap = 0.0;           // attn_logit_softcapping
  double final_softcap = 0.0;          // final_logit_softcapping
  double query_pre_attn_scalar = 0.0;  // attention scale = query_pre_attn_scalar^-1/2 (else head_dim^-1/2)
  bool norm_one_plus_weight = false;   // Gemma RMSNorm: x·r·(1 + w)
  bool post_norms = false;             // Gemma-2: post_attention_layernorm and post_feedforward_layernorm
  bool scale_embeddings = false;       // Gemma: h = embed · fl(sqrt(hidden))
  int bos_token_id = 1;
  int eos_token_id = 2;
  Format torch_dtype = Format::fp32;  // the checkpoint's declared dtype (informational)
  std::string source;                 // the file this came from

  bool layer_is_sliding(std::size_t layer) const;
  std::size_t q_dim() const { return n_heads * head_dim; }
  std::size_t kv_dim() const { return n_kv_heads * head_dim; }
  double attn_scale() const;     // query_pre_attn_scalar^-1/2 or head_dim^-1/2 (as a double; the engine casts to float)
  std::string describe() const;  // one line: arch, layers, heads, head_dim, hidden, vocab, window, softcaps
};

// Reads and validates a Hugging Face config.json. Throws LoadError naming the file and the field.
ModelConfig parse_hf_config(const std::filesystem::path& config_json);
// Validates the invariants every config must satisfy (sizes > 0, divisibility, sliding_layers size); throws LoadError.
void validate(const ModelConfig& c);

}  // namespace kvconf::engine
