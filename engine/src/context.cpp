// Context: cache-ON (prefill + decode over a persistent KV cache) and cache-OFF (recompute: a fresh forward over the
// whole prefix), KV-cache snapshots and patching.
#include "kvconf/engine/context.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "forward.hpp"
#include "kv_store.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::engine {

const char* op_stage_name(OpStage s) {
  switch (s) {
    case OpStage::attn_in:
      return "attn_in";
    case OpStage::q_rope:
      return "q_rope";
    case OpStage::k_rope:
      return "k_rope";
    case OpStage::v:
      return "v";
    case OpStage::attn:
      return "attn";
    case OpStage::o:
      return "o";
    case OpStage::mlp_in:
      return "mlp_in";
    case OpStage::down:
      return "down";
  }
  return "?";
}

KvCache make_cache(const ModelConfig& c, std::size_t capacity) {
  KvCache cache;
  cache.capacity = capacity;
  cache.kv_dim = c.kv_dim();
  cache.k.assign(c.n_layers, std::vector<float>(capacity * cache.kv_dim, 0.0f));
  cache.v.assign(c.n_layers, std::vector<float>(capacity * cache.kv_dim, 0.0f));
  return cache;
}

Context::Context(const Model& model, ProfileKernels kernels, ContextOptions options)
    : model_(&model), kernels_(std::move(kernels)), options_(std::move(options)) {
  if (!kernels_.gemm || !kernels_.attn_prefill || !kernels_.attn_decode || !kernels_.norm)
    throw std::invalid_argument(
        "kvconf::engine::Context: the profile's kernels are not resolved (use engine::resolve)");
  if (kernels_.profile.storage != model.storage)
    throw std::invalid_argument("kvconf::engine::Context: the model is stored in " +
                                std::string(kvconf::name(model.storage)) + " but profile '" + kernels_.profile.name +
                                "' runs in " + std::string(kvconf::name(kernels_.profile.storage)) +
                                " (load or convert the model to the profile's storage format)");
  if (options_.kv_fp32_gemm && gpu())
    throw std::invalid_argument("kvconf::engine::Context: kv_fp32_gemm (the fp32 K/V remedy) is for CPU profiles; '" +
                                kernels_.profile.name + "' runs on the GPU");
  if (gpu()) pin_gpu_weights(*model_, kernels_.profile);
  reset();
}

Context::~Context() {
  forget_device_caches();
  if (gpu()) unpin_gpu_weights(*model_, kernels_.profile);
}

// Copies get their own buffers (new addresses, mirrored afresh when used) and their own pin.
Context::Context(const Context& other)
    : model_(other.model_),
      kernels_(other.kernels_),
      options_(other.options_),
      cache_(other.cache_),
      recompute_cache_(other.recompute_cache_),
      trace_(other.trace_) {
  if (gpu()) pin_gpu_weights(*model_, kernels_.profile);
}

// A move hands over the buffers (same addresses: their mirrors stay valid) and the pin (re-pinned here because
// the moved-from context unpins when destroyed). The kernels are copied, not moved: that unpin reads their profile.
Context::Context(Context&& other) noexcept
    // NOLINTNEXTLINE(performance-move-constructor-init)
    : model_(other.model_),
      kernels_(other.kernels_),
      options_(std::move(other.options_)),
      cache_(std::move(other.cache_)),
      recompute_cache_(std::move(other.recompute_cache_)),
      trace_(std::move(other.trace_)) {
  if (gpu()) pin_gpu_weights(*model_, kernels_.profile);
}

Context& Context::operator=(const Context& other) {
  if (this == &other) return *this;
  Context copy(other);
  return *this = std::move(copy);
}

Context& Context::operator=(Context&& other) noexcept {
  if (this == &other) return *this;
  forget_device_caches();  // this context's buffers are freed or overwritten below
  if (gpu()) unpin_gpu_weights(*model_, kernels_.profile);
  model_ = other.model_;
  kernels_ = other.kernels_;
  options_ = other.options_;
  cache_ = std::move(other.cache_);
  recompute_cache_ = std::move(other.recompute_cache_);
  trace_ = std::move(other.trace_);
  if (gpu()) pin_gpu_weights(*model_, kernels_.profile);
  return *this;
}

void Context::forget_device_caches() {
  if (!gpu()) return;
  forget_device_kv(cache_);
  forget_device_kv(recompute_cache_);
}

void Context::reset() {
  if (gpu()) forget_device_kv(cache_);  // the buffers are freed below
  cache_ = make_cache(model_->config, options_.capacity == 0 ? 64 : options_.capacity);
  trace_ = Trace{};
}

void Context::adopt_prefix(const KvCache& src, std::size_t rows) {
  if (src.kv_dim != model_->config.kv_dim() || src.k.size() != model_->config.n_layers)
    throw std::invalid_argument("kvconf::engine::Context::adopt_prefix: the source cache has another shape");
  if (rows > src.n)
    throw std::invalid_argument("kvconf::engine::Context::adopt_prefix: " + std::to_string(rows) +
                                " rows asked of a cache holding " + std::to_string(src.n));
  reset();
  if (cache_.capacity < rows) {
    if (gpu()) forget_device_kv(cache_);  // the buffers are freed below
    cache_ = make_cache(model_->config, rows);
  }
  const std::size_t kvd = cache_.kv_dim;
  for (std::size_t l = 0; l < src.k.size(); ++l) {
    std::copy_n(src.k[l].begin(), rows * kvd, cache_.k[l].begin());
    std::copy_n(src.v[l].begin(), rows * kvd, cache_.v[l].begin());
    if (gpu()) {  // rows written from the host: the device mirrors must upload them
      kernels::gpu_kv_rows_changed(cache_.k[l].data(), 0);
      kernels::gpu_kv_rows_changed(cache_.v[l].data(), 0);
    }
  }
  cache_.n = rows;
}

void Context::rewrite_cache(const std::function<void(KvCache&)>& f) {
  const std::size_t n = cache_.n, cap = cache_.capacity, kvd = cache_.kv_dim, L = cache_.k.size();
  f(cache_);
  if (cache_.n != n || cache_.capacity != cap || cache_.kv_dim != kvd || cache_.k.size() != L)
    throw std::logic_error("kvconf::engine::Context::rewrite_cache: the callback changed the cache's shape");
  if (gpu())
    for (std::size_t l = 0; l < L; ++l) {
      kernels::gpu_kv_rows_changed(cache_.k[l].data(), 0);
      kernels::gpu_kv_rows_changed(cache_.v[l].data(), 0);
    }
}

void BatchAttention::run(const ForwardHooks& h, const kernels::AttentionKernel& ak, const kernels::AttentionCall& a,
                         const std::vector<float>& q, const std::vector<float>& kc, const std::vector<float>& vc,
                         std::vector<float>& out, bool decode, std::size_t /*longest*/) const {
  h.attention(ak, a, q, kc, vc, out, decode);
}

namespace {
// A forward call on the cache-ON path (`cached`) or the recompute, with the context's hooks and K/V GEMM.
ForwardCall call_of(bool cached, const ContextOptions& o) {
  return ForwardCall{cached, o.hooks ? o.hooks : &plain_forward(), o.kv_fp32_gemm};
}
}  // namespace

std::vector<float> Context::prefill(std::span<const int> tokens, const ForwardOptions& o) {
  const Segment s{tokens, &cache_, &trace_};
  return std::move(forward_segments(*model_, kernels_, {&s, 1}, call_of(true, options_), o).front());
}

std::vector<float> Context::decode(int token, const ForwardOptions& o) {
  if (cache_.n == 0) throw std::invalid_argument("kvconf::engine::Context::decode: nothing prefilled yet");
  const int t[1] = {token};
  const Segment s{t, &cache_, &trace_};
  std::vector<float> logits =
      std::move(forward_segments(*model_, kernels_, {&s, 1}, call_of(true, options_), o).front());
  if (options_.decode_logits_plant) options_.decode_logits_plant(logits);
  return logits;
}

std::vector<float> Context::recompute(std::span<const int> tokens, const ForwardOptions& o) {
  if (gpu()) forget_device_kv(recompute_cache_);  // the previous recompute's buffers are freed below
  recompute_cache_ = make_cache(model_->config, tokens.size());
  const Segment s{tokens, &recompute_cache_, &trace_};
  return std::move(forward_segments(*model_, kernels_, {&s, 1}, call_of(false, options_), o).front());
}

std::vector<std::vector<float>> Context::forward_batch(std::span<Context* const> contexts,
                                                       std::span<const std::vector<int>> tokens,
                                                       const BatchAttention* attend) {
  if (contexts.empty() || contexts.size() != tokens.size())
    throw std::invalid_argument("kvconf::engine::Context::forward_batch: " + std::to_string(contexts.size()) +
                                " contexts and " + std::to_string(tokens.size()) +
                                " token lists (expected the same number, at least one)");
  const Context& c0 = *contexts.front();
  std::vector<Segment> segments;
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    Context& c = *contexts[i];
    if (c.model_ != c0.model_ || c.kernels_.profile.name != c0.kernels_.profile.name ||
        c.options_.hooks != c0.options_.hooks || c.options_.kv_fp32_gemm != c0.options_.kv_fp32_gemm)
      throw std::invalid_argument("kvconf::engine::Context::forward_batch: context " + std::to_string(i) +
                                  " has another model, profile or options than context 0");
    for (std::size_t j = 0; j < i; ++j)
      if (contexts[j] == contexts[i])
        throw std::invalid_argument("kvconf::engine::Context::forward_batch: context " + std::to_string(i) +
                                    " is context " + std::to_string(j) + " again");
    segments.push_back({tokens[i], &c.cache_, &c.trace_});
  }
  ForwardCall call = call_of(true, c0.options_);
  call.batch_attention = attend;
  return forward_segments(*c0.model_, c0.kernels_, segments, call, {});
}

void Context::patch_cache(const KvCache& src, std::size_t layer, std::size_t row_begin, std::size_t row_end) {
  const std::size_t L = model_->config.n_layers;
  if (src.kv_dim != cache_.kv_dim || src.k.size() != L)
    throw std::invalid_argument("kvconf::engine::Context::patch_cache: the source cache has another shape");
  if (row_begin > row_end || row_end > src.n || row_end > cache_.n)
    throw std::invalid_argument("kvconf::engine::Context::patch_cache: rows [" + std::to_string(row_begin) + ", " +
                                std::to_string(row_end) + ") not filled in both caches (source " +
                                std::to_string(src.n) + ", this " + std::to_string(cache_.n) + ")");
  if (layer != npos && layer >= L)
    throw std::invalid_argument("kvconf::engine::Context::patch_cache: layer " + std::to_string(layer) +
                                " >= " + std::to_string(L));
  const std::size_t kvd = cache_.kv_dim;
  for (std::size_t l = 0; l < L; ++l) {
    if (layer != npos && l != layer) continue;
    std::copy(src.k[l].begin() + row_begin * kvd, src.k[l].begin() + row_end * kvd,
              cache_.k[l].begin() + row_begin * kvd);
    std::copy(src.v[l].begin() + row_begin * kvd, src.v[l].begin() + row_end * kvd,
              cache_.v[l].begin() + row_begin * kvd);
    if (gpu()) {  // rows rewritten in place: the device mirrors must upload them again
      kernels::gpu_kv_rows_changed(cache_.k[l].data(), row_begin);
      kernels::gpu_kv_rows_changed(cache_.v[l].data(), row_begin);
    }
  }
}

}  // namespace kvconf::engine
