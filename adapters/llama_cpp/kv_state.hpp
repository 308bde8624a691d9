// llama.cpp's saved sequence state (llama_state_seq_get_data), the only way llama.h exposes its KV cache: saved for
// the restore scenario, and its K and V rows read out for the trace's k_rows / v_rows (kvconf check's cached_kv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

struct llama_context;

namespace kvconf::llama_cpp {

// Sequence `seq`'s state as llama_state_seq_get_data writes it.
std::vector<std::uint8_t> save_sequence(llama_context* ctx, int seq);

struct KvRows {
  std::size_t layers = 0, rows = 0, dim = 0;  // rows: positions 0 .. rows − 1; dim: kv heads × head dim
  std::vector<float> k, v;                    // (layers, rows, dim) each, K after RoPE (llama.cpp's layout), V
};

// The rows sequence `seq` holds in `ctx`'s memory, by position, dequantised to float (f32 and f16 caches exactly).
// BadInput for a state this reader does not know: a model whose cache has sliding-window layers (llama.cpp then saves
// two caches, the windowed one without the rows outside the window), positions not exactly 0 .. N − 1, or a layout
// whose sizes do not add up (another llama.cpp version).
KvRows read_kv(llama_context* ctx, int seq, std::size_t n_layers);

}  // namespace kvconf::llama_cpp
