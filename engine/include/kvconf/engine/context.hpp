// A Context is a model under a profile plus its KV cache. Cache-ON: prefill(tokens) then decode(token), each call a
// forward over only the new rows against the cached K/V. Cache-OFF: recompute(tokens), a fresh forward over the whole
// prefix with a cache of exactly that many rows, as HF generate(use_cache=False) does at every step. Both return the
// full-vocabulary logits of the last row. Hooks capture hidden states and every intermediate, patch the residual
// stream (activation patching) and the cache rows (KV-cache patching) — the tools of the seed paper's §6.5.
#pragma once

#include <cstddef>
#include <functional>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"

namespace kvconf::engine {

// Per layer K and V rows (post-RoPE K), in the storage format.
struct KvCache {
  std::size_t capacity = 0;              // rows allocated per layer
  std::size_t n = 0;                     // rows filled
  std::size_t kv_dim = 0;                // n_kv_heads · head_dim
  std::vector<std::vector<float>> k, v;  // n_layers × (capacity, n_kv_heads, head_dim)
};

// One layer's intermediates for the rows of one call (n rows), as the forward computed them.
struct LayerTrace {
  std::vector<float> x_in;            // (n, hidden) residual stream entering the layer
  std::vector<float> attn_in;         // (n, hidden) input_layernorm(x_in)
  std::vector<float> q, k, v;         // (n, n_heads·d), (n, kv_dim), (n, kv_dim) projections
  std::vector<float> q_rope, k_rope;  // the same after RoPE
  std::vector<float> attn;            // (n, n_heads·d) attention output
  std::vector<float> o;               // (n, hidden) o_proj(attn)
  std::vector<float> o_normed;        // (n, hidden) Gemma-2: post_attention_layernorm(o); empty otherwise
  std::vector<float> h_mid;           // (n, hidden) x_in + o (Gemma-2: + o_normed)
  std::vector<float> mlp_in;          // (n, hidden) post_attention_layernorm / pre_feedforward_layernorm(h_mid)
  std::vector<float> gate, up;        // (n, intermediate)
  std::vector<float> act;             // (n, intermediate) silu(gate) or gelu_tanh(gate)
  std::vector<float> prod;            // (n, intermediate) act · up
  std::vector<float> down;            // (n, hidden) down_proj(prod)
  std::vector<float> down_normed;     // (n, hidden) Gemma-2: post_feedforward_layernorm(down); empty otherwise
  std::vector<float> x_out;           // (n, hidden) h_mid + down (Gemma-2: + down_normed)
};

struct Trace {
  std::size_t rows = 0;                    // rows of the call (of this sequence, in a batched call)
  std::size_t pos0 = 0;                    // absolute position of its first row
  std::size_t batch_rows = 0;              // rows of the whole call: = rows alone, all sequences' in a batch
  std::vector<std::vector<float>> hidden;  // n_layers + 1 entries of (rows, hidden): [0] embeddings (scaled for
                                           // Gemma), [l + 1] the residual stream after layer l
  std::vector<float> final_normed;         // (hidden) the last row after the final norm
  std::vector<LayerTrace> layers;          // n_layers entries when capture_layers
};

// Activation patching: after layer `layer`, the residual stream of the call's last row becomes `row` (hidden values).
struct ResidualPatch {
  std::size_t layer = 0;
  std::vector<float> row;
};

// Op patching (the flip attribution of kvconf model --experiment flip_attribution): the output of one op of layer
// `layer` for the call's last row becomes `row` right after the op computed it (q and k after RoPE, before the cache
// write; o and down before Gemma-2's post norms).
enum class OpStage : std::uint8_t { attn_in, q_rope, k_rope, v, attn, o, mlp_in, down };
const char* op_stage_name(OpStage s);  // "attn_in", "q_rope", ...
struct OpPatch {
  std::size_t layer = 0;
  OpStage stage = OpStage::attn_in;
  std::vector<float> row;  // that op's output width (hidden, n_heads·d or kv_dim)
};

struct ForwardOptions {
  bool capture_hidden = false;  // fill Trace::hidden
  bool capture_layers = false;  // fill Trace::layers
  std::vector<ResidualPatch> patches;
  std::vector<OpPatch> op_patches;
};

class ForwardHooks;  // forward_hooks.hpp

// How a batched call (forward_batch) runs one sequence's attention; `longest` is the batch's longest attended prefix
// (pos0 + rows of its longest sequence). The default runs the forward hooks' attention over the sequence's own cache
// rows; a planted batch fault (scenario_faults.hpp: padding that leaks into attention) overrides it.
class BatchAttention {
 public:
  virtual ~BatchAttention() = default;
  virtual void run(const ForwardHooks& h, const kernels::AttentionKernel& ak, const kernels::AttentionCall& a,
                   const std::vector<float>& q, const std::vector<float>& kc, const std::vector<float>& vc,
                   std::vector<float>& out, bool decode, std::size_t longest) const;
};

struct ContextOptions {
  std::size_t capacity = 0;  // initial KV rows per layer (0: 64); the cache grows by doubling, rows are kept
  // The forward pass's variation points (forward_hooks.hpp): nullptr is the plain model; the planted engine faults
  // (kvconf/engine/faults.hpp, library kvconf::engine_faults) are hooks. Must outlive the context.
  const ForwardHooks* hooks = nullptr;
  // The high-precision cache remedy (kvconf model --experiment mitigations): when set, the K and V projections run on
  // this fp32 GEMM kernel (fp32 accumulation and output, on the same stored inputs and weights), RoPE runs in fp32, and
  // the cache holds those fp32 values, which attention reads as they are; everything else stays in the storage format.
  // Both paths alike. CPU profiles only (a GPU profile throws std::invalid_argument); the kernel must outlive the
  // context.
  const kernels::GemmKernel* kv_fp32_gemm = nullptr;
  // Planted for the threshold tests (conformance/suites/planted_bounds_test.cpp): called on every decode call's
  // logits (vocab) before they are returned; kvconf never sets it.
  std::function<void(std::vector<float>& logits)> decode_logits_plant = {};
};

class Context {
 public:
  // The model and the registry behind `kernels` must outlive the context.
  // A GPU profile (Profile::requires_gpu) pins the model's weights on the device for the context's life
  // (engine::pin_gpu_weights; unpinned by the destructor) and keeps its KV cache buffers mirrored on the device
  // (kernels::gpu_kv_track), reporting every rewrite and dropping the mirrors before buffers are freed.
  Context(const Model& model, ProfileKernels kernels, ContextOptions options = {});
  ~Context();
  Context(const Context& other);
  Context(Context&& other) noexcept;
  Context& operator=(const Context& other);
  Context& operator=(Context&& other) noexcept;

  // Cache-ON. prefill appends tokens.size() rows (a chunk: call it again to prefill in chunks); decode appends one.
  std::vector<float> prefill(std::span<const int> tokens, const ForwardOptions& o = {});
  std::vector<float> decode(int token, const ForwardOptions& o = {});

  // Cache-OFF: a fresh forward over all of `tokens`; this context's own cache is not touched.
  std::vector<float> recompute(std::span<const int> tokens, const ForwardOptions& o = {});

  const Trace& trace() const { return trace_; }  // of the last call
  std::size_t n_cached() const { return cache_.n; }
  const KvCache& cache() const { return cache_; }  // snapshot by copying
  const KvCache& last_recompute_cache() const { return recompute_cache_; }
  // KV-cache patching: rows [row_begin, row_end) of `layer` (all layers when layer == npos) copied from `src`.
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  void patch_cache(const KvCache& src, std::size_t layer, std::size_t row_begin, std::size_t row_end);
  // A prefix-cache hit: the cache becomes rows [0, rows) of `src` (another request's cache of the same model and
  // profile), every layer; the next prefill continues at position `rows`. std::invalid_argument when src has fewer
  // rows or another shape.
  void adopt_prefix(const KvCache& src, std::size_t rows);
  // f may change any held row of the cache (not its shape); the device mirrors are told. For the planted scenario
  // faults (scenario.hpp's hooks).
  void rewrite_cache(const std::function<void(KvCache&)>& f);
  void reset();

  const Model& model() const { return *model_; }
  const ProfileKernels& kernels() const { return kernels_; }
  const ContextOptions& options() const { return options_; }

  // Cache-ON rows of several sequences in one forward call, as a serving engine batches them: contexts[i] appends
  // tokens[i] (a prompt or a chunk of one, or one decode token) to its own cache. The projections, norms and
  // elementwise ops run over all rows together (the GEMMs see M = all rows, the LM head M = sequences); RoPE, the
  // cache writes and attention run per sequence over its own cache (a variable-length batch). Returns each context's
  // last-row logits; each context's trace() describes its own rows (Trace::batch_rows: all rows of the call). The
  // contexts must be distinct and share the model, the profile and the options' hooks and K/V GEMM
  // (std::invalid_argument otherwise); `attend` null runs attention plainly. decode_logits_plant does not apply.
  static std::vector<std::vector<float>> forward_batch(std::span<Context* const> contexts,
                                                       std::span<const std::vector<int>> tokens,
                                                       const BatchAttention* attend = nullptr);

 private:
  // GPU profiles: drop the device mirrors of both caches' buffers (before they are freed or overwritten).
  void forget_device_caches();
  bool gpu() const { return kernels_.profile.requires_gpu; }
  const Model* model_;
  ProfileKernels kernels_;
  ContextOptions options_;
  KvCache cache_;
  KvCache recompute_cache_;
  Trace trace_;
};

// An empty cache shaped for `m` with `capacity` rows per layer.
KvCache make_cache(const ModelConfig& c, std::size_t capacity);

}  // namespace kvconf::engine
