// Unit tests of load_model / load_llama2c / convert / validate: tiny Llama and Gemma-2 checkpoints written to a temp
// folder load with every tensor in its place, storage conversion rounds to nearest even, bad checkpoints are rejected
// by name, and the real llama2.c model stories260K (../shared) loads with its layout checked against the raw file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kvconf/engine/error.hpp"
#include "temp_dir.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace fs = std::filesystem;
using kvconf::Format;
using namespace kvconf::engine;

namespace {

fs::path temp_dir() { return kvconf::test::temp_dir("kvconf_model_test"); }

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Tiny configs: q_dim (heads · head_dim) differs from hidden for Gemma-2 so o_proj's transpose shape is exercised.
nlohmann::json tiny_config(bool gemma) {
  nlohmann::json j = {{"model_type", gemma ? "gemma2" : "llama"},
                      {"vocab_size", 16},
                      {"hidden_size", 8},
                      {"intermediate_size", 12},
                      {"num_hidden_layers", 2},
                      {"num_attention_heads", 2},
                      {"num_key_value_heads", 1},
                      {"max_position_embeddings", 32},
                      {"rms_norm_eps", 1e-6},
                      {"torch_dtype", "float32"}};
  if (gemma) {
    j["head_dim"] = 6;
    j["sliding_window"] = 4;
    j["bos_token_id"] = 2;
    j["eos_token_id"] = 1;
  }
  return j;
}

using Tensors = std::map<std::string, TensorData>;

// The Hugging Face tensors of a tiny model: seeded random matrices, norms set to a per-tensor constant so a swapped
// norm is visible. Gemma-2 gets lm_head.weight too, which the loader must ignore (tied).
Tensors tiny_tensors(bool gemma, Dtype dt) {
  const std::size_t V = 16, h = 8, I = 12, q = gemma ? 12 : 8, kv = gemma ? 6 : 4;
  std::mt19937 rng(gemma ? 7 : 3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensors t;
  const auto mat = [&](const std::string& n, std::size_t r, std::size_t c) {
    TensorData d{n, dt, {r, c}, std::vector<float>(r * c)};
    for (float& x : d.values) x = u(rng);
    t[n] = d;
  };
  const auto norm = [&](const std::string& n, float v) { t[n] = TensorData{n, dt, {h}, std::vector<float>(h, v)}; };
  mat("model.embed_tokens.weight", V, h);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    norm(p + "input_layernorm.weight", 0.25f + l);
    norm(p + "post_attention_layernorm.weight", 0.5f + l);
    if (gemma) {
      norm(p + "pre_feedforward_layernorm.weight", 0.75f + l);
      norm(p + "post_feedforward_layernorm.weight", 0.125f + l);
    }
    mat(p + "self_attn.q_proj.weight", q, h);
    mat(p + "self_attn.k_proj.weight", kv, h);
    mat(p + "self_attn.v_proj.weight", kv, h);
    mat(p + "self_attn.o_proj.weight", h, q);
    mat(p + "mlp.gate_proj.weight", I, h);
    mat(p + "mlp.up_proj.weight", I, h);
    mat(p + "mlp.down_proj.weight", h, I);
  }
  norm("model.norm.weight", 1.5f);
  mat("lm_head.weight", V, h);
  return t;
}

fs::path write_checkpoint(const fs::path& d, const nlohmann::json& config, const Tensors& t) {
  std::ofstream(d / "config.json") << config.dump(2);
  std::vector<TensorData> v;
  for (const auto& [n, x] : t) v.push_back(x);
  write_safetensors(d / "model.safetensors", v);
  return d;
}

std::vector<float> rounded(const std::vector<float>& v, Format f) {
  std::vector<float> out;
  for (float x : v) out.push_back(static_cast<float>(kvconf::round_to(f, x)));
  return out;
}

std::string load_error(const fs::path& p, Format storage = Format::fp32) {
  try {
    (void)load_model(p, storage);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "<no LoadError>";
}

}  // namespace

TEST(LoadModel, TinyLlamaEveryTensorInPlace) {
  const Tensors t = tiny_tensors(false, Dtype::f32);
  const fs::path d = write_checkpoint(temp_dir(), tiny_config(false), t);
  const Model m = load_model(d, Format::fp32);
  EXPECT_EQ(m.storage, Format::fp32);
  EXPECT_EQ(m.source, d.string());
  EXPECT_EQ(m.config.arch, Arch::llama);
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.embed, t.at("model.embed_tokens.weight").values);
  EXPECT_EQ(m.lm_head, t.at("lm_head.weight").values);
  EXPECT_EQ(m.head().data(), m.lm_head.data());
  EXPECT_EQ(m.final_norm, t.at("model.norm.weight").values);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const LayerWeights& L = m.layers[l];
    EXPECT_EQ(L.attn_norm, t.at(p + "input_layernorm.weight").values);
    EXPECT_EQ(L.mlp_norm, t.at(p + "post_attention_layernorm.weight").values);
    EXPECT_TRUE(L.post_attn_norm.empty() && L.post_mlp_norm.empty());
    EXPECT_EQ(L.wq, t.at(p + "self_attn.q_proj.weight").values);
    EXPECT_EQ(L.wk, t.at(p + "self_attn.k_proj.weight").values);
    EXPECT_EQ(L.wv, t.at(p + "self_attn.v_proj.weight").values);
    EXPECT_EQ(L.wo, t.at(p + "self_attn.o_proj.weight").values);
    EXPECT_EQ(L.w_gate, t.at(p + "mlp.gate_proj.weight").values);
    EXPECT_EQ(L.w_up, t.at(p + "mlp.up_proj.weight").values);
    EXPECT_EQ(L.w_down, t.at(p + "mlp.down_proj.weight").values);
  }
  std::size_t n = 0;
  for (const auto& [name, x] : t) n += x.values.size();
  EXPECT_EQ(m.n_params(), n);
  // The config.json path loads the same model.
  const Model m2 = load_model(d / "config.json", Format::fp32);
  EXPECT_EQ(m2.layers[1].wo, m.layers[1].wo);
}

TEST(LoadModel, TinyGemma2NormsMappedAndHeadTied) {
  const Tensors t = tiny_tensors(true, Dtype::f32);
  const fs::path d = write_checkpoint(temp_dir(), tiny_config(true), t);
  const Model m = load_model(d, Format::fp32);
  EXPECT_EQ(m.config.arch, Arch::gemma2);
  EXPECT_TRUE(m.config.tie_embeddings);
  EXPECT_TRUE(m.lm_head.empty()) << "tied: lm_head.weight in the file must be ignored";
  EXPECT_EQ(m.head().data(), m.embed.data());
  for (int l = 0; l < 2; ++l) {
    const LayerWeights& L = m.layers[l];
    EXPECT_EQ(L.attn_norm[0], 0.25f + l);
    EXPECT_EQ(L.post_attn_norm[0], 0.5f + l);
    EXPECT_EQ(L.mlp_norm[0], 0.75f + l);
    EXPECT_EQ(L.post_mlp_norm[0], 0.125f + l);
    EXPECT_EQ(L.wq.size(), 12u * 8u);
    EXPECT_EQ(L.wo, t.at("model.layers." + std::to_string(l) + ".self_attn.o_proj.weight").values);
  }
  std::size_t n = 0;
  for (const auto& [name, x] : t) n += name == "lm_head.weight" ? 0 : x.values.size();
  EXPECT_EQ(m.n_params(), n);
}

TEST(LoadModel, F16CheckpointWidensExactly) {
  const Tensors t32 = tiny_tensors(false, Dtype::f32);
  const Tensors t16 = tiny_tensors(false, Dtype::f16);
  const Model m = load_model(write_checkpoint(temp_dir(), tiny_config(false), t16), Format::fp32);
  EXPECT_EQ(m.layers[0].wk, rounded(t32.at("model.layers.0.self_attn.k_proj.weight").values, Format::fp16));
  EXPECT_EQ(m.embed, rounded(t32.at("model.embed_tokens.weight").values, Format::fp16));
}

TEST(LoadModel, StorageConversionRoundsToNearestEven) {
  Tensors t = tiny_tensors(false, Dtype::f32);
  auto& e = t.at("model.embed_tokens.weight").values;
  e[0] = 1.0f + 0x1p-11f;      // fp16 tie → 1
  e[1] = 1.0f + 3 * 0x1p-11f;  // fp16 tie → 1 + 2^-9 (even)
  e[2] = 0.1f;                 // fp16: 0.0999755859375 (0x2e66)
  e[3] = 1.0f + 0x1p-8f;       // bf16 tie → 1
  e[4] = 1.0f + 3 * 0x1p-8f;   // bf16 tie → 1 + 2^-6
  const fs::path d = write_checkpoint(temp_dir(), tiny_config(false), t);
  const Model m16 = load_model(d, Format::fp16);
  EXPECT_EQ(m16.storage, Format::fp16);
  EXPECT_EQ(m16.embed[0], 1.0f);
  EXPECT_EQ(m16.embed[1], 1.0f + 0x1p-9f);
  EXPECT_EQ(m16.embed[2], 0.0999755859375f);
  EXPECT_EQ(m16.layers[1].w_down, rounded(t.at("model.layers.1.mlp.down_proj.weight").values, Format::fp16));
  const Model mb = load_model(d, Format::bf16);
  EXPECT_EQ(mb.embed[3], 1.0f);
  EXPECT_EQ(mb.embed[4], 1.0f + 0x1p-6f);
  EXPECT_EQ(mb.layers[0].wq, rounded(t.at("model.layers.0.self_attn.q_proj.weight").values, Format::bf16));
  // convert() from the fp32 model gives the same weights; widening back is exact.
  const Model m32 = load_model(d, Format::fp32);
  const Model c16 = convert(m32, Format::fp16);
  EXPECT_EQ(c16.embed, m16.embed);
  EXPECT_EQ(c16.lm_head, m16.lm_head);
  EXPECT_EQ(convert(c16, Format::fp32).layers[1].wv, m16.layers[1].wv);
  EXPECT_THROW((void)convert(m32, Format::fp8_e4m3), LoadError);
}

TEST(LoadModel, NonFiniteAfterConversionIsRejectedByName) {
  Tensors t = tiny_tensors(false, Dtype::f32);
  t.at("model.layers.1.mlp.up_proj.weight").values[5] = 1e5f;  // beyond fp16's 65504
  const fs::path d = write_checkpoint(temp_dir(), tiny_config(false), t);
  const std::string msg = load_error(d, Format::fp16);
  EXPECT_TRUE(contains(msg, "model.layers.1.mlp.up_proj.weight: element 5")) << msg;
  const Model m32 = load_model(d, Format::fp32);  // fine in fp32 and bf16
  EXPECT_EQ(m32.layers[1].w_up[5], 1e5f);
  EXPECT_NO_THROW((void)load_model(d, Format::bf16));
  EXPECT_THROW((void)convert(m32, Format::fp16), LoadError);
}

TEST(LoadModel, ShapeMismatchAndMissingTensor) {
  Tensors t = tiny_tensors(false, Dtype::f32);
  t.at("model.layers.1.self_attn.q_proj.weight").shape = {4, 16};
  fs::path d = write_checkpoint(temp_dir(), tiny_config(false), t);
  std::string msg = load_error(d);
  EXPECT_EQ(msg, (d / "model.safetensors").string() +
                     ": model.layers.1.self_attn.q_proj.weight: shape [4, 16] (expected [8, 8])");
  t = tiny_tensors(false, Dtype::f32);
  t.erase("model.layers.0.mlp.up_proj.weight");
  d = write_checkpoint(temp_dir(), tiny_config(false), t);
  msg = load_error(d);
  EXPECT_EQ(msg, (d / "model.safetensors").string() + ": model.layers.0.mlp.up_proj.weight: missing tensor");
  t = tiny_tensors(false, Dtype::f32);
  t.erase("lm_head.weight");  // untied Llama needs it
  d = write_checkpoint(temp_dir(), tiny_config(false), t);
  EXPECT_TRUE(contains(load_error(d), "lm_head.weight: missing tensor"));
}

TEST(LoadModel, BadPaths) {
  const fs::path d = temp_dir();
  EXPECT_TRUE(contains(load_error(d / "absent"), "absent: no such file or directory"));
  EXPECT_TRUE(contains(load_error(d), "no config.json"));
  std::ofstream(d / "weights.txt") << "x";
  EXPECT_TRUE(contains(load_error(d / "weights.txt"), "not a checkpoint folder"));
  std::ofstream(d / "config.json") << tiny_config(false).dump();
  EXPECT_TRUE(contains(load_error(d), "no model.safetensors or model.safetensors.index.json"));
}

TEST(LoadModel, ValidateNamesTheWrongTensor) {
  Model m = load_model(write_checkpoint(temp_dir(), tiny_config(true), tiny_tensors(true, Dtype::f32)), Format::fp32);
  EXPECT_NO_THROW(validate(m));
  Model bad = m;
  bad.layers[1].wk.pop_back();
  try {
    validate(bad);
    ADD_FAILURE() << "short k_proj accepted";
  } catch (const LoadError& e) {
    EXPECT_TRUE(contains(e.what(), "model.layers.1.self_attn.k_proj.weight: 47 values (expected 48)")) << e.what();
  }
  bad = m;
  bad.lm_head = bad.embed;  // tied models must not carry a separate head
  EXPECT_THROW(validate(bad), LoadError);
  bad = m;
  bad.layers[0].post_mlp_norm.clear();
  EXPECT_THROW(validate(bad), LoadError);
}

// ---- llama2.c ----------------------------------------------------------------------------------------------------

namespace {

// A hand-built llama2.c file whose k-th float is k: every tensor's first element gives its file offset.
fs::path write_counting_bin(const fs::path& p, std::int32_t vocab) {
  const std::int32_t hdr[7] = {4, 6, 2, 2, 1, vocab, 3};  // dim, hidden, layers, heads, kv heads, vocab, seq_len
  const std::size_t V = static_cast<std::size_t>(std::abs(vocab));
  const std::size_t n = V * 4 + 2 * (4 + 16 + 2 * 8 + 16 + 4 + 3 * 24) + 4 + 3 * 2 + (vocab < 0 ? V * 4 : 0);
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(hdr), sizeof hdr);
  for (std::size_t k = 0; k < n; ++k) {
    const float f = static_cast<float>(k);
    out.write(reinterpret_cast<const char*>(&f), 4);
  }
  return p;
}

std::vector<float> raw_floats(const fs::path& p, std::size_t float_index, std::size_t n) {
  std::ifstream in(p, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(28 + 4 * float_index));
  std::vector<float> v(n);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(4 * n));
  return v;
}

fs::path stories() { return fs::path(KVCONF_SHARED_DIR) / "models" / "stories260K" / "stories260K.bin"; }

#define REQUIRE_SHARED(path)                                                                      \
  do {                                                                                            \
    if (!fs::exists(path)) {                                                                      \
      const char* ci = std::getenv("CI");                                                         \
      if (ci != nullptr && std::string(ci) == "true") FAIL() << "CI=true but missing " << (path); \
      GTEST_SKIP() << "shared data not found: " << (path) << " (set KVCONF_SHARED_DIR)";          \
    }                                                                                             \
  } while (0)

}  // namespace

TEST(Llama2c, FileOrderOfEveryTensor) {
  for (const std::int32_t vocab : {5, -5}) {
    const fs::path p = write_counting_bin(temp_dir() / "count.bin", vocab);
    const Model m = load_model(p, Format::fp32);  // .bin dispatches to load_llama2c
    const ModelConfig& c = m.config;
    EXPECT_EQ(c.tie_embeddings, vocab > 0);
    EXPECT_EQ(c.head_dim, 2u);
    EXPECT_EQ(c.kv_dim(), 2u);
    EXPECT_TRUE(c.rope_interleaved);
    // Offsets (in floats): embed 0, rms_att 20, wq 28, wk 60, wv 76, wo 92, rms_ffn 124, w1 132, w2 180, w3 228,
    // rms_final 276, freq_cis 280..285, wcls 286.
    EXPECT_EQ(m.embed.front(), 0);
    EXPECT_EQ(m.layers[0].attn_norm.front(), 20);
    EXPECT_EQ(m.layers[1].attn_norm.front(), 24);
    EXPECT_EQ(m.layers[0].wq.front(), 28);
    EXPECT_EQ(m.layers[1].wq.front(), 44);
    EXPECT_EQ(m.layers[1].wk.front(), 68);
    EXPECT_EQ(m.layers[0].wv.front(), 76);
    EXPECT_EQ(m.layers[1].wo.back(), 123);
    EXPECT_EQ(m.layers[0].mlp_norm.front(), 124);
    EXPECT_EQ(m.layers[0].w_gate.front(), 132);
    EXPECT_EQ(m.layers[1].w_down.front(), 204);
    EXPECT_EQ(m.layers[0].w_up.front(), 228);
    EXPECT_EQ(m.final_norm, (std::vector<float>{276, 277, 278, 279}));
    if (vocab < 0) {
      ASSERT_EQ(m.lm_head.size(), 20u);
      EXPECT_EQ(m.lm_head.front(), 286);
    } else {
      EXPECT_TRUE(m.lm_head.empty());
    }
  }
}

TEST(Llama2c, BadHeadersAndSizes) {
  const fs::path d = temp_dir();
  const fs::path p = write_counting_bin(d / "c.bin", 5);
  std::string bytes;
  {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  const auto error_for = [&](const std::string& b) {
    std::ofstream(d / "x.bin", std::ios::binary) << b;
    try {
      (void)load_llama2c(d / "x.bin", Format::fp32);
    } catch (const LoadError& e) {
      return std::string(e.what());
    }
    return std::string("<no LoadError>");
  };
  EXPECT_TRUE(contains(error_for(bytes + "abcd"), "(expected " + std::to_string(bytes.size()) + " for this header)"));
  EXPECT_TRUE(contains(error_for(bytes.substr(0, 20)), "shorter than the 28-byte header"));
  std::string b = bytes;
  const std::int32_t three = 3;
  std::memcpy(b.data() + 12, &three, 4);  // n_heads 3 does not divide dim 4
  EXPECT_TRUE(contains(error_for(b), "header.n_heads"));
  b = bytes;
  const std::int32_t zero = 0;
  std::memcpy(b.data() + 8, &zero, 4);
  EXPECT_TRUE(contains(error_for(b), "header.n_layers: must be positive"));
}

TEST(Llama2c, Stories260K) {
  REQUIRE_SHARED(stories());
  const Model m = load_llama2c(stories(), Format::fp32);
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_EQ(c.hidden, 64u);
  EXPECT_EQ(c.intermediate, 172u);
  EXPECT_EQ(c.n_layers, 5u);
  EXPECT_EQ(c.n_heads, 8u);
  EXPECT_EQ(c.n_kv_heads, 4u);
  EXPECT_EQ(c.head_dim, 8u);
  EXPECT_EQ(c.vocab, 512u);
  EXPECT_EQ(c.max_positions, 512u);
  EXPECT_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_TRUE(c.rope_interleaved);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_NO_THROW(validate(m));
  // 512·64 embed + 5 layers · (2·64 norms + 64·64 + 2·32·64 + 64·64 + 3·172·64) + 64 = 260,032 parameters.
  EXPECT_EQ(m.n_params(), 260032u);
  // Layout against the raw file: rms_att starts at float 32768; layer 1's wq at 32768 + 320 + 4096.
  EXPECT_EQ(m.layers[0].attn_norm, raw_floats(stories(), 32768, 64));
  EXPECT_EQ(m.layers[1].wq, raw_floats(stories(), 32768 + 320 + 4096, 4096));
  const std::size_t final_at = 260032 - 64;
  EXPECT_EQ(m.final_norm, raw_floats(stories(), final_at, 64));
  // The skipped table right after rms_final is freq_cis_real = cos(pos · 10000^(-2i/8)): position 1 checks both the
  // offset arithmetic and rope_theta.
  const auto freq = raw_floats(stories(), final_at + 64 + 4, 4);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(freq[i], std::cos(std::pow(10000.0, -2.0 * i / 8)), 1e-6) << i;
  // Trained RMSNorm gains are positive and O(1); every weight is finite.
  for (const auto& L : m.layers)
    for (float w : L.attn_norm) EXPECT_TRUE(w > 0.1f && w < 10.0f) << w;
  for (float w : m.final_norm) EXPECT_TRUE(w > 0.1f && w < 10.0f) << w;
  for (float w : m.embed) ASSERT_TRUE(std::isfinite(w));
  // fp16 storage: each weight is its fp32 value rounded to nearest even.
  const Model h = load_model(stories(), Format::fp16);
  EXPECT_EQ(h.layers[4].w_down, rounded(m.layers[4].w_down, Format::fp16));
  EXPECT_EQ(h.embed, rounded(m.embed, Format::fp16));
}

TEST(Llama2c, TruncatedStories260K) {
  REQUIRE_SHARED(stories());
  const fs::path p = temp_dir() / "stories260K.bin";
  {
    std::ifstream in(stories(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::ofstream(p, std::ios::binary) << ss.str().substr(0, 1000000);
  }
  try {
    (void)load_model(p, Format::fp32);
    ADD_FAILURE() << "truncated checkpoint accepted";
  } catch (const LoadError& e) {
    EXPECT_EQ(std::string(e.what()), p.string() + ": size 1000000 bytes (expected 1056540 for this header: truncated)");
  }
}
