// llama.cpp runs for kvconf traces through llama.h: a context per run (n_ctx = the run's length, one sequence), the
// prompt in one llama_decode, then one token per llama_decode (cache ON) or the cache cleared and everything decoded
// again (cache OFF); the logits of the last row of each call, chosen from by kvconf's sampler with the shared draws.
#include "llama_run.hpp"

#include <llama.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace kvconf::llama_cpp {

namespace {

// llama.cpp's error lines since the last BadInput, kept for its one-line message of a BadInput (its log is otherwise
// start-up chatter; KVCONF_LLAMA_LOG=1 prints all of it to stderr).
std::string& last_error() {
  static std::string e;
  return e;
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  static const bool all = std::getenv("KVCONF_LLAMA_LOG") != nullptr;
  if (all) std::fputs(text, stderr);
  if (level != GGML_LOG_LEVEL_ERROR) return;
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  std::string& e = last_error();
  if (!t.empty() && e.size() < 400) e += (e.empty() ? "" : "; ") + t;
}

// " (llama.cpp: <its errors>)", or nothing when it logged none.
std::string llama_said() {
  std::string e = std::exchange(last_error(), std::string());
  return e.empty() ? std::string() : " (llama.cpp: " + e + ")";
}

void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(quiet_log, nullptr);
    llama_backend_init();
  });
}

// The K and V cache types llama.cpp offers, in the order --help lists them.
ggml_type cache_type_of(const std::string& name) {
  static const std::pair<const char*, ggml_type> types[] = {
      {"f32", GGML_TYPE_F32}, {"f16", GGML_TYPE_F16}, {"q8_0", GGML_TYPE_Q8_0}, {"q4_0", GGML_TYPE_Q4_0}};
  std::string list;
  for (const auto& [n, t] : types) {
    if (name == n) return t;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  throw BadInput("--cache-type '" + name + "': expected one of " + list);
}

std::string meta(const llama_model* m, const char* key) {
  char buf[256];
  const int n = llama_model_meta_val_str(m, key, buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<std::size_t>(std::min<int>(n, sizeof buf - 1)));
}

struct ContextDeleter {
  void operator()(llama_context* c) const { llama_free(c); }
};

}  // namespace

void check_cache_type(const std::string& name) { (void)cache_type_of(name); }

Model::Model(const std::string& gguf) : file_(gguf) {
  init_backend();
  llama_model_params p = llama_model_default_params();
  p.n_gpu_layers = 0;
  model_ = llama_model_load_from_file(gguf.c_str(), p);
  if (!model_) throw BadInput(gguf + ": llama.cpp cannot load this GGUF" + llama_said());
}

Model::~Model() {
  if (model_) llama_model_free(model_);
}

std::size_t Model::vocab() const {
  return static_cast<std::size_t>(llama_vocab_n_tokens(llama_model_get_vocab(model_)));
}
std::size_t Model::n_layers() const { return static_cast<std::size_t>(llama_model_n_layer(model_)); }
std::size_t Model::hidden() const { return static_cast<std::size_t>(llama_model_n_embd(model_)); }
std::string Model::arch() const { return meta(model_, "general.architecture"); }

std::string Model::weight_type() const {
  // general.file_type: llama_ftype (0: all F32, 1: mostly F16).
  const std::string t = meta(model_, "general.file_type");
  if (t == "0") return "float32";
  if (t == "1") return "float16";
  throw BadInput(file_ + ": general.file_type is '" + t +
                 "', expected 0 (F32) or 1 (F16): kvconf judges unquantised weights");
}

RunResult run(const Model& m, const std::vector<int>& prompt, bool cache_on, const RunOptions& o) {
  const std::size_t V = m.vocab();
  if (prompt.empty()) throw BadInput("an empty prompt");
  for (int t : prompt)
    if (t < 0 || static_cast<std::size_t>(t) >= V)
      throw BadInput("prompt token " + std::to_string(t) + " is outside the model's vocabulary [0, " +
                     std::to_string(V) + ")");
  if (o.threads < 1 || o.batch < 1) throw BadInput("--threads and --batch must be at least 1");
  const std::size_t total = prompt.size() + o.max_new_tokens;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<std::uint32_t>(total);
  cp.n_batch = static_cast<std::uint32_t>(total);  // every call is one llama_decode (the prompt, a recompute)
  cp.n_ubatch = static_cast<std::uint32_t>(std::min<std::size_t>(static_cast<std::size_t>(o.batch), total));
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = o.threads;
  cp.flash_attn_type = o.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = cp.type_v = cache_type_of(o.cache_type);
  cp.swa_full = true;  // a sliding-window model keeps every row (cache-OFF recomputes them all anyway)
  cp.no_perf = true;
  std::unique_ptr<llama_context, ContextDeleter> ctx(llama_init_from_model(m.get(), cp));
  if (!ctx)
    throw BadInput("--cache-type " + o.cache_type + " --flash-attn " + (o.flash_attn ? "on" : "off") +
                   ": llama.cpp refused the context" + llama_said());
  llama_memory_t mem = llama_get_memory(ctx.get());

  RunResult r;
  std::vector<int> seq = prompt;
  // One llama_decode of `tokens` (positions from the memory's), recorded as the memory reports it; the last row's
  // logits.
  auto call = [&](std::vector<int> tokens) {
    const llama_pos before = llama_memory_seq_pos_max(mem, 0);  // -1 when empty
    r.calls.push_back({tokens.size(), static_cast<std::size_t>(before + 1)});
    llama_batch b = llama_batch_get_one(tokens.data(), static_cast<std::int32_t>(tokens.size()));
    if (const int rc = llama_decode(ctx.get(), b); rc != 0)
      throw std::runtime_error("llama_decode returned " + std::to_string(rc) + " on a call of " +
                               std::to_string(tokens.size()) + " tokens");
    const float* z = llama_get_logits_ith(ctx.get(), -1);
    if (!z) throw std::runtime_error("llama_get_logits_ith returned no logits");
    return std::vector<float>(z, z + V);
  };
  for (std::size_t t = 0; t < o.max_new_tokens; ++t) {
    std::vector<float> z;
    if (!cache_on) {
      llama_memory_clear(mem, true);
      z = call(seq);
    } else if (t == 0 && o.chunk > 0) {  // the prompt in chunks; the last chunk's logits choose the first token
      for (std::size_t b = 0; b < seq.size(); b += o.chunk)
        z = call(std::vector<int>(seq.begin() + static_cast<std::ptrdiff_t>(b),
                                  seq.begin() + static_cast<std::ptrdiff_t>(std::min(seq.size(), b + o.chunk))));
    } else {
      z = call(t == 0 ? seq : std::vector<int>{seq.back()});
    }
    r.call_of_step.push_back(r.calls.size() - 1);
    const double u = engine::step_draw(o.sampler.seed, t);
    const int tok = engine::sample(o.sampler, z, u);
    r.generated.push_back(tok);
    r.draws.push_back(u);
    r.logits.push_back(std::move(z));
    seq.push_back(tok);
  }
  return r;
}

std::string engine_version() {
  init_backend();
  std::string info = llama_print_system_info();
  while (!info.empty() && (info.back() == ' ' || info.back() == '\n' || info.back() == '|')) info.pop_back();
  return "llama.cpp 0c1e570 (llama-cpp-python 0.3.36; " + info + ")";
}

}  // namespace kvconf::llama_cpp
