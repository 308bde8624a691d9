// Writes full-size random-weight checkpoints (published configs, seeded fp16 weights, ~2 GB safetensors shards and
// their index) by streaming each tensor in chunks generated on several threads: memory stays at a few MB per thread.
#include "random_checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <stdexcept>
#include <thread>

#include "kvconf/engine/atomic_file.hpp"
#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::bench {
namespace {

using json = nlohmann::ordered_json;

// The published config.json files (Hugging Face model repositories, files `config.json`), field for field, except
// that Llama-2's rope_theta and attention_bias are the transformers defaults made explicit (10000.0, false: the
// original file predates both fields). torch_dtype and num_hidden_layers are overridden by published_config_json.
constexpr const char* kLlama2_7b = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 11008,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 32,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 10000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
})";

constexpr const char* kMistral_7b_v03 = R"({
  "architectures": ["MistralForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 32768,
  "model_type": "mistral",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.42.0.dev0",
  "use_cache": true,
  "vocab_size": 32768
})";

constexpr const char* kGemma2_2b = R"({
  "architectures": ["Gemma2ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attn_logit_softcapping": 50.0,
  "bos_token_id": 2,
  "cache_implementation": "hybrid",
  "eos_token_id": [1, 107],
  "final_logit_softcapping": 30.0,
  "head_dim": 256,
  "hidden_act": "gelu_pytorch_tanh",
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 2304,
  "initializer_range": 0.02,
  "intermediate_size": 9216,
  "max_position_embeddings": 8192,
  "model_type": "gemma2",
  "num_attention_heads": 8,
  "num_hidden_layers": 26,
  "num_key_value_heads": 4,
  "pad_token_id": 0,
  "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06,
  "rope_theta": 10000.0,
  "sliding_window": 4096,
  "torch_dtype": "float32",
  "transformers_version": "4.42.4",
  "use_cache": true,
  "vocab_size": 256000
})";

const char* published(const std::string& arch) {
  if (arch == "llama2-7b") return kLlama2_7b;
  if (arch == "mistral-7b-v0.3") return kMistral_7b_v03;
  if (arch == "gemma2-2b") return kGemma2_2b;
  std::string names;
  for (const std::string& a : random_checkpoint_archs()) names += (names.empty() ? "" : ", ") + a;
  throw std::invalid_argument("unknown arch '" + arch + "' (expected one of: " + names + ")");
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// fp16 bits of x, correctly rounded (RNE): round-to-odd to float, then the F16C conversion (or the reference encode).
std::uint16_t fp16_bits(double x) {
#if defined(KVCONF_HAVE_F16C)
  return static_cast<std::uint16_t>(_cvtss_sh(kernels::to_float_odd(x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  return static_cast<std::uint16_t>(encode(Format::fp16, x));
#endif
}

// The weight scales of the tiny fixtures (fixtures/src/tiny_models.cpp, README "Weights are N(0, s^2) draws"):
// q/k/v/gate/up s = 1/sqrt(in), o/down s = 0.5/sqrt(in), LM head 3/sqrt(hidden), embeddings 1 (Gemma-2: tied,
// 3/sqrt(hidden)), norm weights 1 + N(0, 0.05^2) (Gemma-2 stores w of (1 + w): N(0, 0.05^2); its post-attention and
// post-feedforward norms 40 + N(0, 0.05^2), the fixtures' block gain that keeps the tied head off the input token).
constexpr double kNormSd = 0.05, kGemmaPostNorm = 40.0;

std::vector<TensorPlan> tensors_of(const json& c) {
  const std::string type = c.at("model_type").get<std::string>();
  const bool gemma = type == "gemma2";
  const std::size_t h = c.at("hidden_size"), I = c.at("intermediate_size"), L = c.at("num_hidden_layers"),
                    V = c.at("vocab_size"), nh = c.at("num_attention_heads"), nkv = c.at("num_key_value_heads");
  const std::size_t d = c.contains("head_dim") ? c.at("head_dim").get<std::size_t>() : h / nh;
  const std::size_t q = nh * d, kv = nkv * d;
  const bool tied = c.value("tie_word_embeddings", gemma);
  const double norm_mean = gemma ? 0.0 : 1.0, head_sd = 3.0 / std::sqrt(static_cast<double>(h));
  const auto in_sd = [](std::size_t in, double k) { return k / std::sqrt(static_cast<double>(in)); };
  std::vector<TensorPlan> t;
  auto add = [&](std::string name, std::vector<std::size_t> shape, double mean, double sd) {
    t.push_back(TensorPlan{std::move(name), std::move(shape), mean, sd, 0});
  };
  add("model.embed_tokens.weight", {V, h}, 0.0, tied ? head_sd : 1.0);  // (vocab, hidden)
  for (std::size_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h}, norm_mean, kNormSd);
    add(p + "self_attn.q_proj.weight", {q, h}, 0.0, in_sd(h, 1.0));   // (n_heads·d, hidden)
    add(p + "self_attn.k_proj.weight", {kv, h}, 0.0, in_sd(h, 1.0));  // (n_kv·d, hidden)
    add(p + "self_attn.v_proj.weight", {kv, h}, 0.0, in_sd(h, 1.0));  // (n_kv·d, hidden)
    add(p + "self_attn.o_proj.weight", {h, q}, 0.0, in_sd(q, 0.5));   // (hidden, n_heads·d)
    if (gemma) {
      add(p + "post_attention_layernorm.weight", {h}, kGemmaPostNorm, kNormSd);
      add(p + "pre_feedforward_layernorm.weight", {h}, norm_mean, kNormSd);
      add(p + "post_feedforward_layernorm.weight", {h}, kGemmaPostNorm, kNormSd);
    } else {
      add(p + "post_attention_layernorm.weight", {h}, norm_mean, kNormSd);
    }
    add(p + "mlp.gate_proj.weight", {I, h}, 0.0, in_sd(h, 1.0));  // (intermediate, hidden)
    add(p + "mlp.up_proj.weight", {I, h}, 0.0, in_sd(h, 1.0));    // (intermediate, hidden)
    add(p + "mlp.down_proj.weight", {h, I}, 0.0, in_sd(I, 0.5));  // (hidden, intermediate)
  }
  add("model.norm.weight", {h}, norm_mean, kNormSd);
  if (!tied) add("lm_head.weight", {V, h}, 0.0, head_sd);  // (vocab, hidden)
  return t;
}

std::size_t numel(const std::vector<std::size_t>& s) {
  std::size_t n = 1;
  for (std::size_t x : s) n *= x;
  return n;
}

// Fills out[0 .. count) with the fp16 bits of elements first .. first + count of tensor t, on `threads` threads.
void generate(const TensorPlan& t, std::uint64_t key, std::size_t first, std::size_t count, unsigned threads,
              std::uint16_t* out) {
  auto work = [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i - first] = fp16_bits(t.mean + t.sigma * random_normal(key, i));
  };
  if (threads <= 1 || count < 65536) return work(first, first + count);
  std::vector<std::thread> pool;
  const std::size_t per = (count + threads - 1) / threads;
  for (unsigned w = 0; w < threads; ++w) {
    const std::size_t b = first + std::min(count, w * per), e = first + std::min(count, (w + 1) * per);
    if (b < e) pool.emplace_back(work, b, e);
  }
  for (std::thread& th : pool) th.join();
}

void check_write(std::FILE* f, const void* p, std::size_t n, const std::filesystem::path& path) {
  if (n != 0 && std::fwrite(p, 1, n, f) != n) throw std::runtime_error(path.string() + ": write failed");
}

// One shard: 8-byte little-endian header length, the JSON header (padded with spaces to a multiple of 8 so the data
// starts aligned), then each tensor's fp16 data streamed in chunks. Written to PATH.tmp, then renamed.
void write_shard(const CheckpointPlan& plan, std::size_t shard, const RandomCheckpointOptions& o, unsigned threads,
                 const std::filesystem::path& path) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"},
                            {"generator", "kvconf_make_random_checkpoint"},
                            {"arch", o.arch},
                            {"seed", std::to_string(o.seed)}};
  std::size_t offset = 0;
  for (const TensorPlan& t : plan.tensors) {
    if (t.shard != shard) continue;
    const std::size_t bytes = 2 * numel(t.shape);
    header[t.name] = {{"dtype", "F16"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(tmp.string() + ": cannot open for writing");
  try {
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
    check_write(f, len, 8, tmp);
    check_write(f, text.data(), text.size(), tmp);
    constexpr std::size_t kChunk = std::size_t{1} << 22;  // elements per chunk: 8 MB of fp16
    std::vector<std::uint16_t> buf(kChunk);
    for (const TensorPlan& t : plan.tensors) {
      if (t.shard != shard) continue;
      const std::uint64_t key = tensor_key(o.seed, t.name);
      const std::size_t n = numel(t.shape);
      for (std::size_t first = 0; first < n; first += kChunk) {
        const std::size_t count = std::min(kChunk, n - first);
        generate(t, key, first, count, threads, buf.data());
        if constexpr (std::endian::native != std::endian::little)
          for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<std::uint16_t>((buf[i] >> 8) | (buf[i] << 8));
        check_write(f, buf.data(), 2 * count, tmp);
      }
    }
    if (std::fflush(f) != 0) throw std::runtime_error(tmp.string() + ": flush failed");
  } catch (...) {
    std::fclose(f);
    std::filesystem::remove(tmp);
    throw;
  }
  if (std::fclose(f) != 0) throw std::runtime_error(tmp.string() + ": close failed");
  std::filesystem::rename(tmp, path);
}

}  // namespace

const std::vector<std::string>& random_checkpoint_archs() {
  static const std::vector<std::string> a = {"llama2-7b", "mistral-7b-v0.3", "gemma2-2b"};
  return a;
}

std::string published_config_json(const std::string& arch, std::size_t layers) {
  json c = json::parse(published(arch));
  if (layers > 0) c["num_hidden_layers"] = layers;
  c["torch_dtype"] = "float16";  // what the shards hold (published: float16, bfloat16, float32 respectively)
  return c.dump(2) + "\n";
}

std::uint64_t tensor_key(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

double random_normal(std::uint64_t key, std::size_t i) {
  const std::uint64_t pair = static_cast<std::uint64_t>(i / 2);
  const std::uint64_t a = splitmix64(key ^ splitmix64(2 * pair)), b = splitmix64(key ^ splitmix64(2 * pair + 1));
  const double u1 = 1.0 - static_cast<double>(a >> 11) * 0x1.0p-53;  // (0, 1]: the log is finite
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;        // [0, 1)
  const double r = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * std::numbers::pi * u2;
  return r * (i % 2 == 0 ? std::cos(angle) : std::sin(angle));
}

CheckpointPlan plan_random_checkpoint(const RandomCheckpointOptions& o) {
  if (o.max_shard_bytes == 0) throw std::invalid_argument("max_shard_bytes must be positive");
  const json c = json::parse(published_config_json(o.arch, o.layers));
  CheckpointPlan plan;
  plan.tensors = tensors_of(c);
  std::size_t shard = 0, in_shard = 0;
  for (TensorPlan& t : plan.tensors) {
    const std::size_t bytes = 2 * numel(t.shape);
    if (in_shard > 0 && in_shard + bytes > o.max_shard_bytes) ++shard, in_shard = 0;
    t.shard = shard;
    in_shard += bytes;
    plan.total_bytes += bytes;
  }
  const std::size_t n = shard + 1;
  for (std::size_t s = 0; s < n; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, n);
    plan.shards.push_back(n == 1 ? std::string("model.safetensors") : std::string(name));
  }
  return plan;
}

CheckpointPlan write_random_checkpoint(const RandomCheckpointOptions& o) {
  CheckpointPlan plan = plan_random_checkpoint(o);  // not const: returned by move
  const unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::filesystem::create_directories(o.out);
  // config.json last: a folder interrupted mid-write has none and does not load. A stale index from an earlier,
  // sharded write would shadow a single model.safetensors: removed too.
  std::filesystem::remove(o.out / "config.json");
  std::filesystem::remove(o.out / "model.safetensors.index.json");
  for (std::size_t s = 0; s < plan.shards.size(); ++s) write_shard(plan, s, o, threads, o.out / plan.shards[s]);
  if (plan.shards.size() > 1) {
    json index;
    index["metadata"] = {{"total_size", plan.total_bytes}};
    json map = json::object();
    for (const TensorPlan& t : plan.tensors) map[t.name] = plan.shards[t.shard];
    index["weight_map"] = map;
    engine::write_file_atomic(o.out / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  engine::write_file_atomic(
      o.out / "README.txt",
      "Random-weight checkpoint written by kvconf_make_random_checkpoint: arch " + o.arch + ", seed " +
          std::to_string(o.seed) + ", " + std::to_string(plan.tensors.size()) + " tensors, " +
          std::to_string(plan.total_bytes) + " bytes of fp16 in " + std::to_string(plan.shards.size()) +
          " shard(s).\nconfig.json is the published Hugging Face config (num_hidden_layers and torch_dtype may be "
          "overridden). NOT a trained model: weights are mean + s * N(0,1) with the tiny fixtures' scales "
          "(bench/random_checkpoint.cpp), for exercising real shapes and timing only.\n");
  engine::write_file_atomic(o.out / "config.json", published_config_json(o.arch, o.layers));
  return plan;
}

}  // namespace kvconf::bench
