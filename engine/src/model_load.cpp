// Loading a Hugging Face checkpoint (config.json + safetensors) into a Model in a storage format, as
// from_pretrained(torch_dtype=...) does: exact widening to float, then one RNE rounding per weight. Also convert(),
// validate() and n_params(), which walk every weight tensor under its Hugging Face name.
#include <cmath>
#include <functional>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::engine {

namespace {

// Calls fn(hf_name, vector, expected_numel) for every weight of m (expected 0: must be empty).
template <class M, class Fn>
void for_each_weight(M& m, Fn&& fn) {
  const ModelConfig& c = m.config;
  const std::size_t h = c.hidden, I = c.intermediate;
  fn(std::string("model.embed_tokens.weight"), m.embed, c.vocab * h);
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    auto& L = m.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    fn(p + "input_layernorm.weight", L.attn_norm, h);
    fn(p + "self_attn.q_proj.weight", L.wq, c.q_dim() * h);
    fn(p + "self_attn.k_proj.weight", L.wk, c.kv_dim() * h);
    fn(p + "self_attn.v_proj.weight", L.wv, c.kv_dim() * h);
    fn(p + "self_attn.o_proj.weight", L.wo, h * c.q_dim());
    if (c.post_norms) {
      fn(p + "post_attention_layernorm.weight", L.post_attn_norm, h);
      fn(p + "pre_feedforward_layernorm.weight", L.mlp_norm, h);
      fn(p + "post_feedforward_layernorm.weight", L.post_mlp_norm, h);
    } else {
      fn(p + "post_attention_layernorm.weight", L.mlp_norm, h);
      fn(p + "post_attn_norm (unused)", L.post_attn_norm, std::size_t{0});
      fn(p + "post_mlp_norm (unused)", L.post_mlp_norm, std::size_t{0});
    }
    fn(p + "mlp.gate_proj.weight", L.w_gate, I * h);
    fn(p + "mlp.up_proj.weight", L.w_up, I * h);
    fn(p + "mlp.down_proj.weight", L.w_down, h * I);
  }
  fn(std::string("model.norm.weight"), m.final_norm, h);
  fn(std::string("lm_head.weight"), m.lm_head, c.tie_embeddings ? std::size_t{0} : c.vocab * h);
}

void check_storage(const std::string& file, Format storage) {
  if (storage != Format::fp32 && storage != Format::fp16 && storage != Format::bf16)
    fail(file, "storage", std::string(name(storage)) + " is not supported (expected fp32, fp16 or bf16)");
}

// Rounds every value to `storage` (RNE; exact when it already fits) and rejects a non-finite result by name.
void round_weights(std::vector<float>& v, Format storage, const std::string& file, const std::string& tensor) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float src = v[i];
    const float r = kernels::round_float(storage, src);
    if (!std::isfinite(r))
      fail(file, tensor,
           "element " + std::to_string(i) + " = " + std::to_string(src) + " is not finite in " +
               std::string(name(storage)));
    v[i] = r;
  }
}

std::vector<std::size_t> shape_of(const std::string& tensor, const ModelConfig& c) {
  const std::size_t h = c.hidden, I = c.intermediate;
  const auto ends = [&](const char* s) { return tensor.ends_with(s); };
  if (tensor == "model.embed_tokens.weight" || tensor == "lm_head.weight") return {c.vocab, h};
  if (ends("q_proj.weight")) return {c.q_dim(), h};
  if (ends("k_proj.weight") || ends("v_proj.weight")) return {c.kv_dim(), h};
  if (ends("o_proj.weight")) return {h, c.q_dim()};
  if (ends("gate_proj.weight") || ends("up_proj.weight")) return {I, h};
  if (ends("down_proj.weight")) return {h, I};
  return {h};  // norms
}

Model load_hf(const std::filesystem::path& folder, Format storage) {
  Model m;
  m.config = parse_hf_config(folder / "config.json");
  m.storage = storage;
  m.source = folder.string();
  check_storage(m.source, storage);
  const Checkpoint ck = Checkpoint::open(folder);
  m.layers.resize(m.config.n_layers);
  for_each_weight(m, [&](const std::string& tensor, std::vector<float>& v, std::size_t numel) {
    if (numel == 0) return;  // absent for this architecture (or tied lm_head: ignored even when present)
    const TensorView& t = ck.get(tensor, shape_of(tensor, m.config));
    v = t.to_float();
    round_weights(v, storage, m.source, tensor);
  });
  validate(m);
  return m;
}

}  // namespace

std::size_t Model::n_params() const {
  std::size_t n = 0;
  for_each_weight(*this, [&](const std::string&, const std::vector<float>& v, std::size_t) { n += v.size(); });
  return n;
}

void validate(const Model& m) {
  validate(m.config);
  const std::string file = m.source.empty() ? m.config.source : m.source;
  if (m.layers.size() != m.config.n_layers)
    fail(file, "layers",
         std::to_string(m.layers.size()) + " layers (expected " + std::to_string(m.config.n_layers) + ")");
  for_each_weight(m, [&](const std::string& tensor, const std::vector<float>& v, std::size_t numel) {
    if (v.size() != numel)
      fail(file, tensor, std::to_string(v.size()) + " values (expected " + std::to_string(numel) + ")");
  });
}

Model convert(const Model& m, Format storage) {
  check_storage(m.source, storage);
  Model out = m;
  out.storage = storage;
  for_each_weight(out, [&](const std::string& tensor, std::vector<float>& v, std::size_t) {
    round_weights(v, storage, m.source, tensor);
  });
  return out;
}

Model load_model(const std::filesystem::path& path, Format storage) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(path.string(), "", "no such file or directory");
  if (fs::is_directory(st)) {
    if (!fs::is_regular_file(path / "config.json")) fail(path.string(), "", "no config.json in the checkpoint folder");
    return load_hf(path, storage);
  }
  if (path.extension() == ".bin") return load_llama2c(path, storage);
  if (path.filename() == "config.json")
    return load_hf(path.parent_path().empty() ? fs::path(".") : path.parent_path(), storage);
  fail(path.string(), "", "not a checkpoint folder, a config.json or a llama2.c .bin file");
}

}  // namespace kvconf::engine
