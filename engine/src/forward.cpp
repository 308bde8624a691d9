// The decoder forward pass, checked against the published model code (HF transformers modeling_llama.py,
// modeling_mistral.py, modeling_gemma2.py; llama2.c run.c):
// - Llama/Mistral layer: h = x + o_proj(attn(rope(q), rope(k), v)) on input_layernorm(x); out = h + down(silu(gate)·up)
//   on post_attention_layernorm(h). Gemma-2 adds post-norms: h = x + post_attention_layernorm(o), out = h +
//   post_feedforward_layernorm(down(gelu_tanh(gate)·up)) with the MLP on pre_feedforward_layernorm(h); its norms use
//   (1 + w) in fp32 (Gemma2RMSNorm), the embeddings are multiplied by fl(√hidden) in the model dtype, the attention
//   scale is query_pre_attn_scalar^-1/2, logits are soft-capped in attention (tanh(s/50)·50, before the mask) and at
//   the output (tanh(z/30)·30), and even layers use the sliding window (Gemma2DecoderLayer.is_sliding).
// - GQA: q head h reads kv head h / (n_heads / n_kv_heads) (repeat_kv), inside the attention kernels.
// - The final norm runs over every row of the call, as HF's model.norm does; the LM head runs on the last row only
//   (generate() passes logits_to_keep = 1 in current transformers), with M = 1 in both paths.
#include "forward.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kvconf/engine/attention_call.hpp"
#include "kvconf/engine/error.hpp"
#include "kvconf/kernels/gpu.hpp"
#include "ops.hpp"

namespace kvconf::engine {
namespace {

using Vec = std::vector<float>;

// y: (m, n) = x: (m, k) · wᵀ, w: (n, k).
// Op patching (ForwardOptions::op_patches): the last row of `t` (n rows) becomes the patch's row.
void patch_op(const ForwardOptions& o, std::size_t l, OpStage s, Vec& t, std::size_t n) {
  for (const OpPatch& p : o.op_patches) {
    if (p.layer != l || p.stage != s) continue;
    const std::size_t width = t.size() / n;
    if (p.row.size() != width)
      throw std::invalid_argument("kvconf::engine: op patch " + std::string(op_stage_name(s)) + " of layer " +
                                  std::to_string(l) + " has " + std::to_string(p.row.size()) + " values (expected " +
                                  std::to_string(width) + ")");
    std::copy(p.row.begin(), p.row.end(), t.begin() + static_cast<std::ptrdiff_t>((n - 1) * width));
  }
}

Vec linear(const kernels::GemmKernel& g, std::span<const float> x, std::span<const float> w, std::size_t m,
           std::size_t n, std::size_t k) {
  Vec y(m * n);
  g.run(kernels::GemmShape{m, n, k}, x, w, y);
  return y;
}

// y: (rows, d) = RMSNorm(x: (rows, d)) with weight w: (d).
Vec rms_norm(const ModelConfig& c, const kernels::NormKernel& nk, std::span<const float> x, std::span<const float> w,
             std::size_t rows, const ForwardHooks& hooks) {
  Vec y(rows * c.hidden);
  kernels::NormParams p;
  p.eps = hooks.norm_eps(c);
  p.one_plus_weight = c.norm_one_plus_weight;
  nk.run(kernels::NormShape{rows, c.hidden}, p, x, w, y);
  return y;
}

// gpu: the profile runs CUDA attention, whose device mirrors of the old buffers must go before they are freed.
void grow(KvCache& cache, std::size_t rows, bool gpu) {
  if (rows <= cache.capacity) return;
  std::size_t cap = std::max<std::size_t>(cache.capacity, 1);
  while (cap < rows) cap *= 2;
  if (gpu) forget_device_kv(cache);
  for (auto* side : {&cache.k, &cache.v})
    for (Vec& layer : *side) layer.resize(cap * cache.kv_dim, 0.0f);
  cache.capacity = cap;
}

}  // namespace

void forget_device_kv(const KvCache& cache) {
  for (const auto* side : {&cache.k, &cache.v})
    for (const Vec& layer : *side)
      if (!layer.empty()) kernels::gpu_kv_forget(layer.data());
}

std::vector<float> forward_rows(const Model& m, const ProfileKernels& k, KvCache& cache, const ForwardCall& call,
                                const ForwardOptions& o, Trace& trace) {
  const ModelConfig& c = m.config;
  const Format f = m.storage;
  const std::size_t n = call.tokens.size(), D = c.hidden, pos0 = cache.n;
  if (n == 0) throw std::invalid_argument("kvconf::engine: a forward call needs at least one token");
  for (const int t : call.tokens)
    if (t < 0 || static_cast<std::size_t>(t) >= c.vocab)
      throw std::invalid_argument("kvconf::engine: token id " + std::to_string(t) + " outside the vocabulary [0, " +
                                  std::to_string(c.vocab) + ")");
  const bool decode = call.cached_path && n == 1 && pos0 > 0;
  const ForwardHooks& hooks = *call.hooks;
  // GPU profiles: the cache buffers are mirrored on the device (kernels::gpu_kv_track); every write is reported.
  const bool gpu = k.profile.requires_gpu;
  grow(cache, pos0 + n, gpu);

  trace = Trace{};
  trace.rows = n;
  trace.pos0 = pos0;
  const bool keep_hidden = o.capture_hidden;

  // x: (n, D) embeddings (Gemma: · fl(√hidden) in the model dtype).
  Vec x(n * D);
  for (std::size_t r = 0; r < n; ++r)
    std::copy_n(m.embed.begin() + static_cast<std::size_t>(call.tokens[r]) * D, D, x.begin() + r * D);
  if (c.scale_embeddings) ops::scale(f, x, hooks.embed_scale(c, f));
  if (keep_hidden) trace.hidden.push_back(x);

  std::vector<std::size_t> positions(n);
  for (std::size_t r = 0; r < n; ++r) positions[r] = pos0 + r;
  std::vector<std::size_t> rope_positions = positions;
  rope_positions[0] = hooks.rope_position(rope_positions[0], decode);
  const std::size_t write_row = hooks.cache_write_row(pos0, decode);

  const std::size_t qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate;
  const kernels::AttentionKernel& ak = (n == 1) ? *k.attn_decode : *k.attn_prefill;
  for (std::size_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = m.layers[l];
    LayerTrace lt;
    Vec attn_in = rms_norm(c, *k.norm, x, w.attn_norm, n, hooks);
    patch_op(o, l, OpStage::attn_in, attn_in, n);
    Vec q = linear(*k.gemm, attn_in, w.wq, n, qd, D);                                       // (n, H, d)
    const kernels::GemmKernel& kv_gemm = call.kv_fp32_gemm ? *call.kv_fp32_gemm : *k.gemm;  // fp32 K/V remedy
    Vec kk = linear(kv_gemm, attn_in, w.wk, n, kvd, D);                                     // (n, KV, d)
    Vec v = linear(kv_gemm, attn_in, w.wv, n, kvd, D);                                      // (n, KV, d)
    if (o.capture_layers) lt.q = q, lt.k = kk, lt.v = v;
    ops::rope(f, c, q, c.n_heads, rope_positions);
    ops::rope(call.kv_fp32_gemm ? Format::fp32 : f, c, kk, c.n_kv_heads, rope_positions);
    patch_op(o, l, OpStage::q_rope, q, n);
    patch_op(o, l, OpStage::k_rope, kk, n);
    patch_op(o, l, OpStage::v, v, n);
    std::copy(kk.begin(), kk.end(), cache.k[l].begin() + write_row * kvd);
    std::copy(v.begin(), v.end(), cache.v[l].begin() + write_row * kvd);
    for (Vec* side : {&cache.k[l], &cache.v[l]})
      hooks.after_cache_store(*side, write_row * kvd, (write_row + 1) * kvd, f, decode);
    if (gpu) {  // an append (write_row = pos0 = the rows the mirror lacks), or a hook's rewrite of an earlier row
      for (const Vec* side : {&cache.k[l], &cache.v[l]}) {
        kernels::gpu_kv_track(side->data());
        kernels::gpu_kv_rows_changed(side->data(), write_row);
      }
    }

    kernels::AttentionCall a = layer_attention_call(c, l, n, pos0, cache.capacity);
    hooks.attention_call(a, c, call.cached_path, call.cached_path && n == 1);
    Vec attn(n * qd);  // (n, H, d)
    hooks.attention(ak, a, q, cache.k[l], cache.v[l], attn, decode);
    patch_op(o, l, OpStage::attn, attn, n);

    Vec out = linear(*k.gemm, attn, w.wo, n, D, qd);  // (n, D)
    patch_op(o, l, OpStage::o, out, n);
    Vec o_normed;
    if (c.post_norms) o_normed = rms_norm(c, *k.norm, out, w.post_attn_norm, n, hooks);
    Vec h(n * D);
    ops::add(f, x, c.post_norms ? o_normed : out, h);

    Vec mlp_in = rms_norm(c, *k.norm, h, w.mlp_norm, n, hooks);
    patch_op(o, l, OpStage::mlp_in, mlp_in, n);
    Vec gate = linear(*k.gemm, mlp_in, w.w_gate, n, I, D);  // (n, I)
    Vec up = linear(*k.gemm, mlp_in, w.w_up, n, I, D);      // (n, I)
    Vec act(n * I), prod(n * I);
    ops::activation(f, c.act, gate, act);
    ops::mul(f, act, up, prod);
    Vec down = linear(*k.gemm, prod, w.w_down, n, D, I);  // (n, D)
    patch_op(o, l, OpStage::down, down, n);
    Vec down_normed;
    if (c.post_norms) down_normed = rms_norm(c, *k.norm, down, w.post_mlp_norm, n, hooks);
    Vec x_out(n * D);
    ops::add(f, h, c.post_norms ? down_normed : down, x_out);

    for (const ResidualPatch& p : o.patches) {
      if (p.layer != l) continue;
      if (p.row.size() != D)
        throw std::invalid_argument("kvconf::engine: residual patch for layer " + std::to_string(l) + " has " +
                                    std::to_string(p.row.size()) + " values (expected hidden = " + std::to_string(D) +
                                    ")");
      std::copy(p.row.begin(), p.row.end(), x_out.begin() + (n - 1) * D);
    }
    if (o.capture_layers) {
      lt.x_in = std::move(x);
      lt.attn_in = std::move(attn_in);
      lt.q_rope = std::move(q);
      lt.k_rope = std::move(kk);
      lt.attn = std::move(attn);
      lt.o = std::move(out);
      lt.o_normed = std::move(o_normed);
      lt.h_mid = std::move(h);
      lt.mlp_in = std::move(mlp_in);
      lt.gate = std::move(gate);
      lt.up = std::move(up);
      lt.act = std::move(act);
      lt.prod = std::move(prod);
      lt.down = std::move(down);
      lt.down_normed = std::move(down_normed);
      lt.x_out = x_out;
      trace.layers.push_back(std::move(lt));
    }
    x = std::move(x_out);
    if (keep_hidden) trace.hidden.push_back(x);
  }
  cache.n = std::max(cache.n, pos0 + n);

  Vec normed = rms_norm(c, *k.norm, x, m.final_norm, n, hooks);  // (n, D)
  trace.final_normed.assign(normed.end() - static_cast<std::ptrdiff_t>(D), normed.end());
  Vec logits = linear(*k.gemm, trace.final_normed, m.head(), 1, c.vocab, D);  // (vocab)
  if (hooks.final_softcap(c, decode)) ops::softcap(f, logits, static_cast<float>(c.final_softcap));
  return logits;
}

}  // namespace kvconf::engine
