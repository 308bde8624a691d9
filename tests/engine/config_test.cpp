// Unit tests of parse_hf_config: the three architectures' published configs parse to the right fields, and every
// unsupported or malformed setting is rejected with a LoadError naming the file and the field.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "kvconf/engine/config.hpp"
#include "kvconf/engine/error.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using kvconf::Format;
using nlohmann::json;
using namespace kvconf::engine;

namespace {

fs::path temp_dir() { return kvconf::test::temp_dir("kvconf_cfg_test"); }

fs::path write(const std::string& text) {
  const fs::path p = temp_dir() / "config.json";
  std::ofstream(p) << text;
  return p;
}
fs::path write(const json& j) { return write(j.dump(2)); }

// Published configs (meta-llama/Llama-2-7b-hf, mistralai/Mistral-7B-v0.3, google/gemma-2-2b), trimmed.
json llama2() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "hidden_act": "silu",
    "bos_token_id": 1, "eos_token_id": 2, "pretraining_tp": 1, "rope_scaling": null, "tie_word_embeddings": false,
    "torch_dtype": "float16", "attention_bias": false})");
}
json mistral() {
  return json::parse(R"({"model_type": "mistral", "vocab_size": 32768, "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
    "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16"})");
}
json gemma2() {
  return json::parse(R"({"model_type": "gemma2", "vocab_size": 256000, "hidden_size": 2304,
    "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
    "bos_token_id": 2, "eos_token_id": [1, 107], "pad_token_id": 0, "torch_dtype": "float32",
    "attention_bias": false})");
}

std::string load_error(const fs::path& p) {
  try {
    (void)parse_hf_config(p);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "<no LoadError>";
}

}  // namespace

TEST(HfConfig, Llama2Parses) {
  const fs::path p = write(llama2());
  const ModelConfig c = parse_hf_config(p);
  EXPECT_EQ(c.arch, Arch::llama);
  EXPECT_STREQ(arch_name(c.arch), "llama");
  EXPECT_EQ(c.vocab, 32000u);
  EXPECT_EQ(c.hidden, 4096u);
  EXPECT_EQ(c.intermediate, 11008u);
  EXPECT_EQ(c.n_layers, 32u);
  EXPECT_EQ(c.n_heads, 32u);
  EXPECT_EQ(c.n_kv_heads, 32u);
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.max_positions, 4096u);
  EXPECT_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.rope_interleaved);
  EXPECT_EQ(c.act, Activation::silu);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.torch_dtype, Format::fp16);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_EQ(c.sliding_window, 0u);
  ASSERT_EQ(c.sliding_layers.size(), 32u);
  for (std::size_t l = 0; l < 32; ++l) EXPECT_FALSE(c.layer_is_sliding(l));
  EXPECT_FALSE(c.norm_one_plus_weight || c.post_norms || c.scale_embeddings);
  EXPECT_EQ(c.attn_scale(), 1.0 / std::sqrt(128.0));
  EXPECT_EQ(c.source, p.string());
  EXPECT_NE(c.describe().find("llama: 32 layers, 32 heads (32 kv), head_dim 128"), std::string::npos) << c.describe();
}

TEST(HfConfig, DefaultsWhenOptionalFieldsAreAbsent) {
  json j = llama2();
  for (const char* k : {"num_key_value_heads", "torch_dtype", "hidden_act", "tie_word_embeddings", "bos_token_id",
                        "eos_token_id", "rope_scaling", "pretraining_tp"})
    j.erase(k);
  const ModelConfig c = parse_hf_config(write(j));
  EXPECT_EQ(c.n_kv_heads, 32u);
  EXPECT_EQ(c.torch_dtype, Format::fp32);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
}

TEST(HfConfig, MistralParsesWithAndWithoutWindow) {
  ModelConfig c = parse_hf_config(write(mistral()));
  EXPECT_EQ(c.arch, Arch::mistral);
  EXPECT_EQ(c.n_kv_heads, 8u);
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.kv_dim(), 1024u);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.torch_dtype, Format::bf16);
  EXPECT_EQ(c.sliding_window, 0u);
  EXPECT_FALSE(c.layer_is_sliding(0));
  json j = mistral();
  j["sliding_window"] = 4096;
  c = parse_hf_config(write(j));
  EXPECT_EQ(c.sliding_window, 4096u);
  for (std::size_t l = 0; l < 32; ++l) EXPECT_TRUE(c.layer_is_sliding(l)) << l;
}

TEST(HfConfig, Gemma2Parses) {
  const ModelConfig c = parse_hf_config(write(gemma2()));
  EXPECT_EQ(c.arch, Arch::gemma2);
  EXPECT_EQ(c.hidden, 2304u);
  EXPECT_EQ(c.head_dim, 256u);
  EXPECT_EQ(c.q_dim(), 2048u);
  EXPECT_EQ(c.n_kv_heads, 4u);
  EXPECT_EQ(c.act, Activation::gelu_tanh);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_TRUE(c.norm_one_plus_weight && c.post_norms && c.scale_embeddings);
  EXPECT_EQ(c.attn_softcap, 50.0);
  EXPECT_EQ(c.final_softcap, 30.0);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(c.attn_scale(), 1.0 / 16.0);
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_id, 1);  // first of [1, 107]
  EXPECT_EQ(c.sliding_window, 4096u);
  for (std::size_t l = 0; l < 26; ++l) EXPECT_EQ(c.layer_is_sliding(l), l % 2 == 0) << l;
}

TEST(HfConfig, Gemma2LayerTypesAndNullSoftcaps) {
  json j = gemma2();
  j["num_hidden_layers"] = 3;
  j["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention"};
  j["attn_logit_softcapping"] = nullptr;
  j["final_logit_softcapping"] = nullptr;
  j.erase("hidden_activation");  // hidden_act "gelu_pytorch_tanh" alone is accepted
  const ModelConfig c = parse_hf_config(write(j));
  EXPECT_FALSE(c.layer_is_sliding(0));
  EXPECT_TRUE(c.layer_is_sliding(1));
  EXPECT_TRUE(c.layer_is_sliding(2));
  EXPECT_EQ(c.attn_softcap, 0.0);
  EXPECT_EQ(c.final_softcap, 0.0);
  EXPECT_EQ(c.act, Activation::gelu_tanh);
}

TEST(HfConfig, RopeParametersFormIsRead) {
  json j = mistral();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  EXPECT_EQ(parse_hf_config(write(j)).rope_theta, 500000.0);
  j["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_NE(load_error(write(j)).find("rope_parameters"), std::string::npos);
}

struct Rejection {
  const char* name;
  json (*base)();
  const char* patch;  // JSON merge patch applied to the base config
  const char* field;  // must appear in the message
};

class HfConfigRejects : public ::testing::TestWithParam<Rejection> {};

TEST_P(HfConfigRejects, NamesTheField) {
  const Rejection& r = GetParam();
  json j = r.base();
  j.merge_patch(json::parse(r.patch));
  const fs::path p = write(j);
  const std::string msg = load_error(p);
  EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find(r.field), std::string::npos) << "message does not name " << r.field << ": " << msg;
}

INSTANTIATE_TEST_SUITE_P(
    All, HfConfigRejects,
    ::testing::Values(
        Rejection{"model_type", llama2, R"({"model_type": "gpt2"})",
                  "model_type: \"gpt2\" is not supported (expected \"llama\", \"mistral\" or \"gemma2\")"},
        Rejection{"no_model_type", llama2, R"({"model_type": null})", "model_type"},
        Rejection{"rope_scaling", llama2, R"({"rope_scaling": {"type": "linear", "factor": 2.0}})", "rope_scaling"},
        Rejection{"attention_bias", llama2, R"({"attention_bias": true})", "attention_bias"},
        Rejection{"mlp_bias", llama2, R"({"mlp_bias": true})", "mlp_bias"},
        Rejection{"pretraining_tp", llama2, R"({"pretraining_tp": 2})", "pretraining_tp"},
        Rejection{"string_size", llama2, R"({"hidden_size": "4096"})", "hidden_size"},
        Rejection{"float_size", llama2, R"({"num_hidden_layers": 32.5})", "num_hidden_layers"},
        Rejection{"zero_size", llama2, R"({"intermediate_size": 0})", "intermediate_size"},
        Rejection{"negative_size", llama2, R"({"vocab_size": -5})", "vocab_size"},
        Rejection{"missing_vocab", llama2, R"({"vocab_size": null})", "vocab_size: missing required field"},
        Rejection{"missing_eps", llama2, R"({"rms_norm_eps": null})", "rms_norm_eps"},
        Rejection{"kv_divides", llama2, R"({"num_key_value_heads": 5})", "num_key_value_heads"},
        Rejection{"act", llama2, R"({"hidden_act": "gelu"})", "hidden_act"},
        Rejection{"dtype", llama2, R"({"torch_dtype": "float64"})", "torch_dtype: \"float64\""},
        Rejection{"tie_type", llama2, R"({"tie_word_embeddings": "yes"})", "tie_word_embeddings"},
        Rejection{"eos_type", llama2, R"({"eos_token_id": "2"})", "eos_token_id"},
        Rejection{"eos_range", llama2, R"({"eos_token_id": 40000})", "eos_token_id"},
        Rejection{"window_type", mistral, R"({"sliding_window": "4096"})", "sliding_window"},
        Rejection{"gemma_head_dim", gemma2, R"({"head_dim": null})", "head_dim"},
        Rejection{"gemma_window", gemma2, R"({"sliding_window": null})", "sliding_window"},
        Rejection{"gemma_act", gemma2, R"({"hidden_activation": "gelu"})", "hidden_activation"},
        Rejection{"gemma_layer_types", gemma2, R"({"layer_types": ["full_attention"]})", "layer_types"},
        Rejection{"gemma_softcap", gemma2, R"({"attn_logit_softcapping": "50"})", "attn_logit_softcapping"}),
    [](const ::testing::TestParamInfo<Rejection>& i) { return std::string(i.param.name); });

TEST(HfConfig, MissingFileAndBadJsonNameTheFile) {
  const fs::path dir = temp_dir();
  std::string msg = load_error(dir / "nope.json");
  EXPECT_NE(msg.find((dir / "nope.json").string()), std::string::npos) << msg;
  const fs::path p = write(std::string("{\"model_type\": \"llama\",,}"));
  msg = load_error(p);
  EXPECT_NE(msg.find(p.string() + ": invalid JSON"), std::string::npos) << msg;
  EXPECT_NE(load_error(write(std::string("[1, 2]"))).find("JSON object"), std::string::npos);
}

TEST(HfConfig, ValidateChecksInvariants) {
  ModelConfig c = parse_hf_config(write(mistral()));
  EXPECT_NO_THROW(validate(c));
  ModelConfig bad = c;
  bad.sliding_layers.pop_back();
  EXPECT_THROW(validate(bad), LoadError);
  bad = c;
  bad.n_kv_heads = 3;
  EXPECT_THROW(validate(bad), LoadError);
  bad = c;
  bad.head_dim = 0;
  EXPECT_THROW(validate(bad), LoadError);
}
