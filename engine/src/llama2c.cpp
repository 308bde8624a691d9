// The llama2.c checkpoint format (karpathy/llama2.c, run.c: Config, memory_map_weights): 7 int32 header fields, then
// fp32 weights in a fixed order, RoPE tables (skipped) and an optional classifier; loaded into a Llama Model.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/model.hpp"

namespace kvconf::engine {

Model load_llama2c(const std::filesystem::path& bin, Format storage) {
  const std::string file = bin.string();
  std::ifstream in(bin, std::ios::binary);
  if (!in) fail(file, "", "cannot open");
  const std::uintmax_t actual = std::filesystem::file_size(bin);
  std::int32_t hdr[7] = {};
  if (!in.read(reinterpret_cast<char*>(hdr), sizeof hdr))
    fail(file, "header", "file is " + std::to_string(actual) + " bytes, shorter than the 28-byte header");
  // run.c Config: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len.
  static const char* const names[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                       "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i)
    if (hdr[i] == 0 || (hdr[i] < 0 && i != 5))
      fail(file, std::string("header.") + names[i], "must be positive, got " + std::to_string(hdr[i]));
  const std::size_t dim = hdr[0], hidden_dim = hdr[1], n_layers = hdr[2], n_heads = hdr[3], n_kv = hdr[4],
                    seq_len = hdr[6];
  const bool shared = hdr[5] > 0;  // run.c: a negative vocab_size means an unshared classifier (wcls) follows
  const std::size_t vocab = static_cast<std::size_t>(std::abs(static_cast<std::int64_t>(hdr[5])));
  if (dim % n_heads != 0)
    fail(file, "header.n_heads", std::to_string(n_heads) + " does not divide dim " + std::to_string(dim));
  if (n_heads % n_kv != 0)
    fail(file, "header.n_kv_heads", std::to_string(n_kv) + " does not divide n_heads " + std::to_string(n_heads));
  const std::size_t head = dim / n_heads, kv_dim = n_kv * head;

  Model m;
  ModelConfig& c = m.config;
  c.arch = Arch::llama;
  c.vocab = vocab;
  c.hidden = dim;
  c.intermediate = hidden_dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv;
  c.head_dim = head;
  c.max_positions = seq_len;
  c.rms_eps = 1e-5;  // run.c rmsnorm: ss += 1e-5f
  c.rope_theta = 10000.0;
  c.rope_interleaved = true;  // run.c rotates pairs (i, i+1) of each head
  c.act = Activation::silu;
  c.tie_embeddings = shared;
  c.sliding_layers.assign(n_layers, false);
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.torch_dtype = Format::fp32;
  c.source = file;
  m.source = file;
  m.storage = Format::fp32;

  // Expected size: header + every weight (memory_map_weights order) + freq_cis_real/imag + classifier. Counted in
  // long double first (exact below 2^64), so a garbage header cannot overflow the size_t arithmetic below.
  // run.c skips freq_cis_real and freq_cis_imag: seq_len * head_size / 2 floats each (integer division, as run.c).
  const std::size_t rope = 2 * (seq_len * head / 2);
  const auto count = [&](auto zero) {
    using T = decltype(zero);
    const T d = static_cast<T>(dim), hd = static_cast<T>(hidden_dim), kv = static_cast<T>(kv_dim),
            v = static_cast<T>(vocab);
    const T per_layer = 2 * d + d * d + 2 * kv * d + d * d + 3 * hd * d;
    return sizeof hdr +
           4 * (v * d + static_cast<T>(n_layers) * per_layer + d + static_cast<T>(rope) + (shared ? 0 : v * d));
  };
  const long double expected = count(0.0L);
  if (static_cast<long double>(actual) != expected)
    fail(file, "",
         "size " + std::to_string(actual) + " bytes (expected " +
             std::to_string(static_cast<std::uintmax_t>(std::min(expected, 0x1p63L))) + " for this header" +
             (static_cast<long double>(actual) < expected ? ": truncated)" : ")"));

  const auto read = [&](std::size_t n) {
    std::vector<float> v(n);
    if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * 4))) fail(file, "", "read failed");
    return v;
  };
  // Stacked (n_layers, ...) tensors are split per layer as they are read, in file order.
  m.layers.resize(n_layers);
  const auto stacked = [&](std::size_t n, std::vector<float> LayerWeights::*field) {
    for (auto& L : m.layers) L.*field = read(n);
  };
  m.embed = read(vocab * dim);
  stacked(dim, &LayerWeights::attn_norm);
  stacked(dim * dim, &LayerWeights::wq);  // row i of each layer's matrix is output i, as nn.Linear
  stacked(kv_dim * dim, &LayerWeights::wk);
  stacked(kv_dim * dim, &LayerWeights::wv);
  stacked(dim * dim, &LayerWeights::wo);
  stacked(dim, &LayerWeights::mlp_norm);
  stacked(hidden_dim * dim, &LayerWeights::w_gate);  // w1
  stacked(dim * hidden_dim, &LayerWeights::w_down);  // w2
  stacked(hidden_dim * dim, &LayerWeights::w_up);    // w3
  m.final_norm = read(dim);
  in.seekg(static_cast<std::streamoff>(4 * rope), std::ios::cur);  // freq_cis_real, freq_cis_imag
  if (!shared) m.lm_head = read(vocab * dim);

  validate(m);
  return convert(m, storage);  // rounds (exact for fp32) and rejects non-finite weights by name
}

}  // namespace kvconf::engine
