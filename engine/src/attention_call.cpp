// The attention call of one layer (attention_call.hpp).
#include "kvconf/engine/attention_call.hpp"

namespace kvconf::engine {

kernels::AttentionCall layer_attention_call(const ModelConfig& c, std::size_t layer, std::size_t rows, std::size_t pos0,
                                            std::size_t capacity) {
  kernels::AttentionCall a;
  a.shape = {rows, pos0 + rows, c.n_heads, c.n_kv_heads, c.head_dim, c.head_dim};
  a.params.q_offset = static_cast<std::int64_t>(pos0);
  a.params.causal = true;
  a.params.window = c.layer_is_sliding(layer) ? static_cast<std::int64_t>(c.sliding_window) : 0;
  a.params.scale = static_cast<double>(static_cast<float>(c.attn_scale()));
  a.params.softcap = c.attn_softcap;
  a.capacity = capacity;
  return a;
}

}  // namespace kvconf::engine
