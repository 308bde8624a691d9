// kvconf_make_random_checkpoint's library (bench/random_checkpoint.hpp): the configs it writes are the published
// ones as the engine parses them, the plans have the published parameter counts and ~2 GB shards, and a one-layer
// checkpoint (sharded small here, to exercise the index) loads through the engine's real loader with the seeded
// weights it promises. The Mistral and Gemma-2 one-layer writes (~0.5 and ~1.3 GB) are Slow.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "kvconf/engine/config.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "random_checkpoint.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using namespace kvconf;
using kvconf::bench::CheckpointPlan;
using kvconf::bench::RandomCheckpointOptions;

namespace {

// The published architecture numbers, from the config.json files of the Hugging Face model repositories
// meta-llama/Llama-2-7b-hf, mistralai/Mistral-7B-v0.3 and google/gemma-2-2b (also DESIGN.md "Engine"), and the
// parameter counts they imply (6.74 B, 7.25 B and 2.61 B, as the model cards state).
struct Published {
  std::string arch;
  engine::Arch type;
  std::size_t hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, max_positions;
  double rope_theta, rms_eps;
  bool tied;
  double attn_softcap, final_softcap, query_pre_attn_scalar;
  std::size_t sliding_window;  // 0 = none (Mistral v0.3: "sliding_window": null)
  std::size_t params;
};

const Published kPublished[] = {
    {"llama2-7b", engine::Arch::llama, 4096, 32, 32, 32, 128, 11008, 32000, 4096, 1e4, 1e-5, false, 0, 0, 0, 0,
     6'738'415'616},
    {"mistral-7b-v0.3", engine::Arch::mistral, 4096, 32, 32, 8, 128, 14336, 32768, 32768, 1e6, 1e-5, false, 0, 0, 0, 0,
     7'248'023'552},
    {"gemma2-2b", engine::Arch::gemma2, 2304, 26, 8, 4, 256, 9216, 256000, 8192, 1e4, 1e-6, true, 50.0, 30.0, 256.0,
     4096, 2'614'341'888},
};

engine::ModelConfig parse(const std::string& arch, std::size_t layers, const fs::path& dir) {
  std::ofstream(dir / "config.json") << bench::published_config_json(arch, layers);
  return engine::parse_hf_config(dir / "config.json");
}

void expect_published(const engine::ModelConfig& c, const Published& p, std::size_t layers) {
  EXPECT_EQ(c.arch, p.type);
  EXPECT_EQ(c.hidden, p.hidden);
  EXPECT_EQ(c.n_layers, layers);
  EXPECT_EQ(c.n_heads, p.heads);
  EXPECT_EQ(c.n_kv_heads, p.kv_heads);
  EXPECT_EQ(c.head_dim, p.head_dim);
  EXPECT_EQ(c.intermediate, p.intermediate);
  EXPECT_EQ(c.vocab, p.vocab);
  EXPECT_EQ(c.max_positions, p.max_positions);
  EXPECT_EQ(c.rope_theta, p.rope_theta);
  EXPECT_EQ(c.rms_eps, p.rms_eps);
  EXPECT_EQ(c.tie_embeddings, p.tied);
  EXPECT_EQ(c.attn_softcap, p.attn_softcap);
  EXPECT_EQ(c.final_softcap, p.final_softcap);
  EXPECT_EQ(c.query_pre_attn_scalar, p.query_pre_attn_scalar);
  EXPECT_EQ(c.sliding_window, p.sliding_window);
  if (p.type == engine::Arch::gemma2) {
    EXPECT_EQ(c.act, engine::Activation::gelu_tanh);
    EXPECT_TRUE(c.norm_one_plus_weight && c.post_norms && c.scale_embeddings);
    for (std::size_t l = 0; l < layers; ++l) EXPECT_EQ(c.layer_is_sliding(l), l % 2 == 0) << "layer " << l;
  } else {
    EXPECT_EQ(c.act, engine::Activation::silu);
  }
}

const Published& published(const std::string& arch) {
  for (const Published& p : kPublished)
    if (p.arch == arch) return p;
  throw std::invalid_argument(arch);
}

std::size_t plan_params(const CheckpointPlan& plan) { return plan.total_bytes / 2; }

}  // namespace

TEST(RandomCheckpoint, ConfigsAreThePublishedOnes) {
  const fs::path dir = test::temp_dir("kvconf_randck");
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.arch);
    expect_published(parse(p.arch, 0, dir), p, p.layers);
    expect_published(parse(p.arch, 1, dir), p, 1);  // --layers overrides num_hidden_layers only
  }
  EXPECT_THROW((void)bench::published_config_json("llama3-8b"), std::invalid_argument);
}

TEST(RandomCheckpoint, PlansHaveThePublishedParameterCountsAndTwoGigabyteShards) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.arch);
    RandomCheckpointOptions o;
    o.arch = p.arch;
    const CheckpointPlan plan = bench::plan_random_checkpoint(o);
    EXPECT_EQ(plan_params(plan), p.params);
    std::vector<std::size_t> shard_bytes(plan.shards.size(), 0);
    for (const auto& t : plan.tensors) {
      std::size_t n = 2;
      for (std::size_t d : t.shape) n *= d;
      shard_bytes[t.shard] += n;
    }
    for (std::size_t s = 0; s < shard_bytes.size(); ++s) EXPECT_LE(shard_bytes[s], o.max_shard_bytes) << "shard " << s;
    EXPECT_GT(plan.shards.size(), 1u);
    EXPECT_EQ(plan.shards.front(), "model-00001-of-" + std::string(5 - std::to_string(plan.shards.size()).size(), '0') +
                                       std::to_string(plan.shards.size()) + ".safetensors");
  }
}

TEST(RandomCheckpoint, NormalDrawsAreCounterBased) {
  // The same element gives the same draw wherever a chunk starts; draws look standard normal.
  const std::uint64_t key = bench::tensor_key(7, "model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(bench::random_normal(key, 12345), bench::random_normal(key, 12345));
  EXPECT_NE(bench::random_normal(key, 12345), bench::random_normal(bench::tensor_key(8, "x"), 12345));
  double sum = 0, sum2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = bench::random_normal(key, static_cast<std::size_t>(i));
    sum += z, sum2 += z * z;
  }
  // Mean and variance of n standard normal draws: standard errors 1/sqrt(n) and sqrt(2/n); 6 of them.
  EXPECT_NEAR(sum / n, 0.0, 6.0 / std::sqrt(n));
  EXPECT_NEAR(sum2 / n, 1.0, 6.0 * std::sqrt(2.0 / n));
}

namespace {

// Writes a one-layer checkpoint in small shards and loads it through the engine; checks the config, the tensors,
// and that stored weights are the promised fp16 values.
void write_and_load(const std::string& arch) {
  const Published& p = published(arch);
  RandomCheckpointOptions o;
  o.arch = arch;
  o.out = test::temp_dir("kvconf_randck") / arch;
  o.seed = 42;
  o.layers = 1;
  o.max_shard_bytes = 300'000'000;  // several shards and an index, as the full-size ones have
  const CheckpointPlan plan = bench::write_random_checkpoint(o);
  ASSERT_GT(plan.shards.size(), 1u);
  ASSERT_TRUE(fs::is_regular_file(o.out / "model.safetensors.index.json"));
  for (const std::string& s : plan.shards) EXPECT_TRUE(fs::is_regular_file(o.out / s)) << s;

  const engine::Model m = engine::load_model(o.out, Format::fp16);  // the real loader: config, index, shards, shapes
  expect_published(m.config, p, 1);
  EXPECT_EQ(m.layers.size(), 1u);
  EXPECT_EQ(m.embed.size(), p.vocab * p.hidden);
  EXPECT_EQ(m.lm_head.empty(), p.tied);

  // Element i of q_proj is fl16(mean + sigma · random_normal(key, i)).
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  const bench::TensorPlan* t = nullptr;
  for (const auto& x : plan.tensors)
    if (x.name == name) t = &x;
  ASSERT_NE(t, nullptr);
  const std::uint64_t key = bench::tensor_key(o.seed, name);
  for (std::size_t i : {std::size_t{0}, std::size_t{1}, std::size_t{777}, m.layers[0].wq.size() - 1}) {
    const double want = decode(Format::fp16, encode(Format::fp16, t->mean + t->sigma * bench::random_normal(key, i)));
    EXPECT_EQ(static_cast<double>(m.layers[0].wq[i]), want) << name << "[" << i << "]";
  }
}

}  // namespace

TEST(RandomCheckpoint, Llama2OneLayerLoads) { write_and_load("llama2-7b"); }
TEST(RandomCheckpoint, SlowMistralOneLayerLoads) { write_and_load("mistral-7b-v0.3"); }
TEST(RandomCheckpoint, SlowGemma2OneLayerLoads) { write_and_load("gemma2-2b"); }
