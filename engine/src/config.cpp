// Hugging Face config.json → ModelConfig for Llama-2, Mistral and Gemma-2, with every unsupported setting rejected
// by name; plus the ModelConfig helpers (sliding layers, attention scale, one-line description) and validate().
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "json_file.hpp"
#include "kvconf/engine/config.hpp"
#include "kvconf/engine/error.hpp"

namespace kvconf::engine {

using nlohmann::json;

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::llama:
      return "llama";
    case Arch::mistral:
      return "mistral";
    case Arch::gemma2:
      return "gemma2";
  }
  return "?";
}

bool ModelConfig::layer_is_sliding(std::size_t layer) const {
  return sliding_window > 0 && layer < sliding_layers.size() && sliding_layers[layer];
}

double ModelConfig::attn_scale() const {
  const double s = query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim);
  return 1.0 / std::sqrt(s);
}

std::string ModelConfig::describe() const {
  std::ostringstream o;
  o << arch_name(arch) << ": " << n_layers << " layers, " << n_heads << " heads (" << n_kv_heads << " kv), head_dim "
    << head_dim << ", hidden " << hidden << ", intermediate " << intermediate << ", vocab " << vocab;
  std::size_t n_sliding = 0;
  for (std::size_t l = 0; l < n_layers; ++l) n_sliding += layer_is_sliding(l) ? 1 : 0;
  if (n_sliding > 0) o << ", window " << sliding_window << " on " << n_sliding << "/" << n_layers << " layers";
  if (attn_softcap > 0) o << ", attn softcap " << attn_softcap;
  if (final_softcap > 0) o << ", final softcap " << final_softcap;
  if (tie_embeddings) o << ", tied embeddings";
  return o.str();
}

void validate(const ModelConfig& c) {
  const std::string f = c.source.empty() ? std::string("<config>") : c.source;
  const auto positive = [&](std::size_t v, const char* field) {
    if (v == 0) fail(f, field, "must be a positive integer");
  };
  positive(c.vocab, "vocab_size");
  positive(c.hidden, "hidden_size");
  positive(c.intermediate, "intermediate_size");
  positive(c.n_layers, "num_hidden_layers");
  positive(c.n_heads, "num_attention_heads");
  positive(c.n_kv_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim");
  positive(c.max_positions, "max_position_embeddings");
  if (c.n_heads % c.n_kv_heads != 0)
    fail(f, "num_key_value_heads",
         std::to_string(c.n_kv_heads) + " does not divide num_attention_heads " + std::to_string(c.n_heads));
  if (!(c.rms_eps > 0) || !std::isfinite(c.rms_eps)) fail(f, "rms_norm_eps", "must be a positive finite number");
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) fail(f, "rope_theta", "must be a positive finite number");
  if (c.sliding_layers.size() != c.n_layers)
    fail(f, "sliding_layers",
         "has " + std::to_string(c.sliding_layers.size()) + " entries (expected " + std::to_string(c.n_layers) + ")");
  if (!(c.attn_softcap >= 0) || !(c.final_softcap >= 0) || !(c.query_pre_attn_scalar >= 0))
    fail(f, "softcapping", "attn/final softcaps and query_pre_attn_scalar must be >= 0");
  if (c.bos_token_id < 0 || static_cast<std::size_t>(c.bos_token_id) >= c.vocab)
    fail(f, "bos_token_id", std::to_string(c.bos_token_id) + " outside the vocabulary");
  if (c.eos_token_id < 0 || static_cast<std::size_t>(c.eos_token_id) >= c.vocab)
    fail(f, "eos_token_id", std::to_string(c.eos_token_id) + " outside the vocabulary");
}

namespace {

struct Reader {
  const json& j;
  std::string file;

  bool present(const char* k) const { return j.contains(k) && !j.at(k).is_null(); }

  std::size_t size(const char* k) const {
    if (!present(k)) fail(file, k, "missing required field");
    const json& v = j.at(k);
    if (!v.is_number_integer()) fail(file, k, "expected an integer, got " + v.dump());
    if (v.get<long long>() <= 0) fail(file, k, "must be positive, got " + v.dump());
    return v.get<std::size_t>();
  }
  std::size_t size_or(const char* k, std::size_t def) const { return present(k) ? size(k) : def; }

  double number(const char* k) const {
    if (!present(k)) fail(file, k, "missing required field");
    const json& v = j.at(k);
    if (!v.is_number()) fail(file, k, "expected a number, got " + v.dump());
    return v.get<double>();
  }
  double number_or(const char* k, double def) const { return present(k) ? number(k) : def; }

  bool boolean_or(const char* k, bool def) const {
    if (!present(k)) return def;
    if (!j.at(k).is_boolean()) fail(file, k, "expected true or false, got " + j.at(k).dump());
    return j.at(k).get<bool>();
  }

  std::string string_or(const char* k, const std::string& def) const {
    if (!present(k)) return def;
    if (!j.at(k).is_string()) fail(file, k, "expected a string, got " + j.at(k).dump());
    return j.at(k).get<std::string>();
  }

  // bos/eos: an integer, or (eos) a list of integers whose first entry is used.
  int token(const char* k, int def) const {
    if (!present(k)) return def;
    const json* v = &j.at(k);
    if (v->is_array()) {
      if (v->empty()) fail(file, k, "empty list");
      v = &v->at(0);
    }
    if (!v->is_number_integer()) fail(file, k, "expected an integer token id, got " + j.at(k).dump());
    return v->get<int>();
  }
};

void reject_unsupported(const Reader& r) {
  if (r.present("rope_scaling"))
    fail(r.file, "rope_scaling", "not supported (must be null or absent), got " + r.j.at("rope_scaling").dump());
  if (r.boolean_or("attention_bias", false)) fail(r.file, "attention_bias", "true is not supported");
  if (r.boolean_or("mlp_bias", false)) fail(r.file, "mlp_bias", "true is not supported");
  if (r.present("pretraining_tp")) {
    const json& v = r.j.at("pretraining_tp");
    if (!v.is_number_integer()) fail(r.file, "pretraining_tp", "expected an integer, got " + v.dump());
    if (v.get<long long>() > 1) fail(r.file, "pretraining_tp", v.dump() + " > 1 is not supported");
  }
}

// rope_theta: the top-level field (transformers < 4.56), or rope_parameters.rope_theta (newer transformers write
// rope_parameters {"rope_type": "default", "rope_theta": ...} instead); any rope_type but "default" is rejected.
double read_rope_theta(const Reader& r) {
  if (r.present("rope_parameters")) {
    const json& rp = r.j.at("rope_parameters");
    if (!rp.is_object()) fail(r.file, "rope_parameters", "expected an object, got " + rp.dump());
    const Reader sub{rp, r.file};
    const std::string type = sub.string_or("rope_type", "default");
    if (type != "default")
      fail(r.file, "rope_parameters", "rope_type \"" + type + "\" is not supported (only \"default\")");
    if (sub.present("rope_theta")) return sub.number("rope_theta");
  }
  return r.number_or("rope_theta", 10000.0);
}

Format read_dtype(const Reader& r) {
  const char* key = r.present("torch_dtype") ? "torch_dtype" : "dtype";  // newer transformers write "dtype"
  const std::string s = r.string_or(key, "float32");
  if (s == "float32") return Format::fp32;
  if (s == "float16") return Format::fp16;
  if (s == "bfloat16") return Format::bf16;
  fail(r.file, key, "\"" + s + "\" is not supported (expected float16, bfloat16 or float32)");
}

}  // namespace

ModelConfig parse_hf_config(const std::filesystem::path& config_json) {
  const json j = read_json_object(config_json);
  const Reader r{j, config_json.string()};
  ModelConfig c;
  c.source = config_json.string();

  const std::string type = r.string_or("model_type", "");
  if (type == "llama")
    c.arch = Arch::llama;
  else if (type == "mistral")
    c.arch = Arch::mistral;
  else if (type == "gemma2")
    c.arch = Arch::gemma2;
  else
    fail(r.file, "model_type",
         (type.empty() ? std::string("missing") : "\"" + type + "\"") +
             " is not supported (expected \"llama\", \"mistral\" or \"gemma2\")");
  const bool gemma = c.arch == Arch::gemma2;

  reject_unsupported(r);
  c.vocab = r.size("vocab_size");
  c.hidden = r.size("hidden_size");
  c.intermediate = r.size("intermediate_size");
  c.n_layers = r.size("num_hidden_layers");
  c.n_heads = r.size("num_attention_heads");
  c.n_kv_heads = r.size_or("num_key_value_heads", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    fail(r.file, "num_key_value_heads",
         std::to_string(c.n_kv_heads) + " does not divide num_attention_heads " + std::to_string(c.n_heads));
  if (gemma) {
    c.head_dim = r.size("head_dim");
  } else if (r.present("head_dim")) {
    c.head_dim = r.size("head_dim");
  } else {
    if (c.hidden % c.n_heads != 0)
      fail(r.file, "head_dim", "absent and hidden_size is not a multiple of num_attention_heads");
    c.head_dim = c.hidden / c.n_heads;
  }
  c.max_positions = r.size("max_position_embeddings");
  c.rms_eps = r.number("rms_norm_eps");
  c.rope_theta = read_rope_theta(r);
  c.rope_interleaved = false;

  if (gemma) {
    // Gemma2MLP applies ACT2FN[config.hidden_activation]; older exports also carry hidden_act.
    const char* key = r.present("hidden_activation") ? "hidden_activation" : "hidden_act";
    const std::string act = r.string_or(key, "gelu_pytorch_tanh");
    if (act != "gelu_pytorch_tanh") fail(r.file, key, "\"" + act + "\" is not supported (expected gelu_pytorch_tanh)");
    c.act = Activation::gelu_tanh;
  } else {
    const std::string act = r.string_or("hidden_act", "silu");
    if (act != "silu") fail(r.file, "hidden_act", "\"" + act + "\" is not supported (expected silu)");
    c.act = Activation::silu;
  }
  c.tie_embeddings = r.boolean_or("tie_word_embeddings", gemma);
  c.bos_token_id = r.token("bos_token_id", gemma ? 2 : 1);  // HF defaults: Llama/Mistral 1/2, Gemma2Config 2/1
  c.eos_token_id = r.token("eos_token_id", gemma ? 1 : 2);
  c.torch_dtype = read_dtype(r);

  c.sliding_layers.assign(c.n_layers, false);
  if (c.arch == Arch::mistral) {
    // MistralConfig.sliding_window: null/absent = full attention; an int applies to every layer.
    c.sliding_window = r.size_or("sliding_window", 0);
    c.sliding_layers.assign(c.n_layers, c.sliding_window > 0);
  } else if (gemma) {
    c.sliding_window = r.size("sliding_window");
    // transformers Gemma2: Gemma2DecoderLayer had `is_sliding = not bool(layer_idx % 2)`; newer Gemma2Config
    // fills layer_types = ["sliding_attention" if (i + 1) % 2 else "full_attention"] (even layers slide) and the
    // layer reads config.layer_types[layer_idx] (huggingface/transformers, models/gemma2/configuration_gemma2.py).
    if (r.present("layer_types")) {
      const json& lt = j.at("layer_types");
      if (!lt.is_array() || lt.size() != c.n_layers)
        fail(r.file, "layer_types", "expected a list of " + std::to_string(c.n_layers) + " strings");
      for (std::size_t l = 0; l < c.n_layers; ++l) {
        const json& t = lt.at(l);
        if (t == "sliding_attention")
          c.sliding_layers[l] = true;
        else if (t == "full_attention")
          c.sliding_layers[l] = false;
        else
          fail(r.file, "layer_types", "entry " + t.dump() + " (expected \"sliding_attention\" or \"full_attention\")");
      }
    } else {
      for (std::size_t l = 0; l < c.n_layers; ++l) c.sliding_layers[l] = (l % 2 == 0);
    }
    // null = no capping; absent = the Gemma2Config defaults (50, 30, query_pre_attn_scalar 256).
    const auto cap = [&](const char* k, double def) { return j.contains(k) ? r.number_or(k, 0.0) : def; };
    c.attn_softcap = cap("attn_logit_softcapping", 50.0);
    c.final_softcap = cap("final_logit_softcapping", 30.0);
    c.query_pre_attn_scalar = r.number_or("query_pre_attn_scalar", 256.0);
    if (!(c.query_pre_attn_scalar > 0)) fail(r.file, "query_pre_attn_scalar", "must be positive");
    if (c.attn_softcap < 0) fail(r.file, "attn_logit_softcapping", "must be >= 0");
    if (c.final_softcap < 0) fail(r.file, "final_logit_softcapping", "must be >= 0");
    c.norm_one_plus_weight = true;
    c.post_norms = true;
    c.scale_embeddings = true;
  }
  validate(c);
  return c;
}

}  // namespace kvconf::engine
