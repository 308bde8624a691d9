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
// The model reads top to bottom in ModelPass::run() and ModelPass::layer(), step by step as llama2.c's forward();
// what is not the model sits behind named seams that the steps call: the rows of a batched call (RowBatch,
// forward_rows.hpp), where K and V go and in which precision (KvStore, kv_store.hpp: the cache writes, the fp32 K/V
// remedy, the device mirrors), the model's variation points (ForwardHooks, forward_hooks.hpp) and the experiments'
// captures and patches (ForwardObserver, forward_observer.hpp).
#include "forward.hpp"

#include <algorithm>
#include <stdexcept>

#include "forward_observer.hpp"
#include "forward_rows.hpp"
#include "kv_store.hpp"
#include "kvconf/engine/attention_call.hpp"
#include "ops.hpp"

namespace kvconf::engine {
namespace {

using Vec = std::vector<float>;

// y: (m, n) = x: (m, k) · wᵀ, w: (n, k).
Vec linear(const kernels::GemmKernel& g, std::span<const float> x, std::span<const float> w, std::size_t m,
           std::size_t n, std::size_t k) {
  Vec y(m * n);
  g.run(kernels::GemmShape{m, n, k}, x, w, y);
  return y;
}

// One forward call of the model over the rows of a RowBatch (n rows, D = hidden).
class ModelPass {
 public:
  ModelPass(const Model& m, const ProfileKernels& k, const ForwardCall& call, const RowBatch& batch, const KvStore& kv,
            ForwardObserver& observer)
      : m_(m),
        c_(m.config),
        f_(m.storage),
        D_(m.config.hidden),
        n_(batch.rows()),
        k_(k),
        call_(call),
        hooks_(*call.hooks),
        batch_(batch),
        kv_(kv),
        observer_(observer) {}

  std::vector<Vec> run();

 private:
  Vec embed() const;
  Vec layer(std::size_t l, Vec x);
  Vec attention(std::size_t l, const Vec& q) const;
  std::vector<Vec> classifier(const Vec& x) const;

  // The ops, over all n rows, in the model's format f_.
  Vec rmsnorm(const Vec& x, std::span<const float> w) const;
  Vec matmul(const kernels::GemmKernel& g, const Vec& x, std::span<const float> w, std::size_t out) const;
  Vec rope(const Vec& t, std::size_t heads, Format f) const;
  Vec activation(const Vec& gate) const;
  Vec add(const Vec& a, const Vec& b) const;
  Vec mul(const Vec& a, const Vec& b) const;
  // Op s of layer l has computed t: the observer's point (op patching), before any later op reads t.
  Vec tap(std::size_t l, OpStage s, Vec t) const {
    observer_.op(l, s, t);
    return t;
  }

  const Model& m_;
  const ModelConfig& c_;
  const Format f_;
  const std::size_t D_, n_;
  const ProfileKernels& k_;
  const ForwardCall& call_;
  const ForwardHooks& hooks_;
  const RowBatch& batch_;
  const KvStore& kv_;
  ForwardObserver& observer_;
};

// The model (llama2.c forward()): the token embeddings, each decoder layer in turn, then the final norm and the
// classifier. The call's n tokens -> the logits of each sequence's last row: (sequences, vocab).
std::vector<Vec> ModelPass::run() {
  Vec x = embed();  // (n, D)
  observer_.hidden(x);
  for (std::size_t l = 0; l < c_.n_layers; ++l) {
    x = layer(l, std::move(x));
    observer_.hidden(x);
  }
  KvStore::commit(batch_);  // each cache holds its sequence's rows from here on
  return classifier(x);
}

// One decoder layer, x: (n, D) -> (n, D). Attention: rmsnorm, the q/k/v projections, RoPE, the cache write,
// attention over the cache, the output projection, the residual. FFN: rmsnorm, gate (w1) and up (w3), act(gate)·up,
// down (w2), the residual. Gemma-2 norms o and down before their residuals. `a` holds every value under
// LayerTrace's names (context.hpp), for the observer.
Vec ModelPass::layer(std::size_t l, Vec x) {
  const LayerWeights& w = m_.layers[l];
  const kernels::GemmKernel& gemm = *k_.gemm;
  const std::size_t qd = c_.q_dim(), kvd = c_.kv_dim(), I = c_.intermediate;
  LayerTrace a;  // the layer's activations

  // Attention.
  a.attn_in = tap(l, OpStage::attn_in, rmsnorm(x, w.attn_norm));                    // (n, D)
  a.q = matmul(gemm, a.attn_in, w.wq, qd);                                          // (n, H·d)
  a.k = matmul(kv_.gemm(), a.attn_in, w.wk, kvd);                                   // (n, KV·d)
  a.v = matmul(kv_.gemm(), a.attn_in, w.wv, kvd);                                   // (n, KV·d)
  a.q_rope = tap(l, OpStage::q_rope, rope(a.q, c_.n_heads, f_));                    // (n, H·d)
  a.k_rope = tap(l, OpStage::k_rope, rope(a.k, c_.n_kv_heads, kv_.rope_format()));  // (n, KV·d)
  const Vec v = tap(l, OpStage::v, a.v);                                            // (n, KV·d)
  kv_.store(batch_, l, a.k_rope, v);                                                // into each sequence's cache
  a.attn = tap(l, OpStage::attn, attention(l, a.q_rope));                           // (n, H·d) over the cache
  a.o = tap(l, OpStage::o, matmul(gemm, a.attn, w.wo, D_));                         // (n, D)
  if (c_.post_norms) a.o_normed = rmsnorm(a.o, w.post_attn_norm);
  a.h_mid = add(x, c_.post_norms ? a.o_normed : a.o);  // the residual

  // The feed-forward network.
  a.mlp_in = tap(l, OpStage::mlp_in, rmsnorm(a.h_mid, w.mlp_norm));    // (n, D)
  a.gate = matmul(gemm, a.mlp_in, w.w_gate, I);                        // (n, I)
  a.up = matmul(gemm, a.mlp_in, w.w_up, I);                            // (n, I)
  a.act = activation(a.gate);                                          // silu (Gemma-2: gelu_tanh)
  a.prod = mul(a.act, a.up);                                           // (n, I)
  a.down = tap(l, OpStage::down, matmul(gemm, a.prod, w.w_down, D_));  // (n, D)
  if (c_.post_norms) a.down_normed = rmsnorm(a.down, w.post_mlp_norm);
  Vec out = add(a.h_mid, c_.post_norms ? a.down_normed : a.down);  // the residual
  observer_.residual(l, out);                                      // activation patching

  a.x_in = std::move(x);
  a.x_out = out;
  observer_.layer(l, std::move(a));
  return out;
}

// x: (n, D), each row its token's embedding (Gemma-2: · fl(√hidden) in the model's format).
Vec ModelPass::embed() const {
  const std::span<const int> tokens = batch_.tokens();
  Vec x(n_ * D_);
  for (std::size_t r = 0; r < n_; ++r)
    std::copy_n(m_.embed.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(tokens[r]) * D_), D_,
                x.begin() + static_cast<std::ptrdiff_t>(r * D_));
  if (c_.scale_embeddings) ops::scale(f_, x, hooks_.embed_scale(c_, f_));
  return x;
}

// Each sequence's queries over its own cache (its rows just stored included): q: (n, H·d) -> (n, H·d). The
// profile's decode kernel for one row, its prefill kernel otherwise; the hooks may change the call and the run.
Vec ModelPass::attention(std::size_t l, const Vec& q) const {
  static const BatchAttention plain_attention;  // the hooks' attention over the sequence's own rows
  const BatchAttention& attend = call_.batch_attention ? *call_.batch_attention : plain_attention;
  return batch_.per_sequence(q, c_.q_dim(), [&](const SeqRows& s, const Vec& q_s, Vec& out_s) {
    kernels::AttentionCall a = layer_attention_call(c_, l, s.n, s.pos0, s.cache->capacity);
    a.batch = batch_.sequences();  // one launch over the batch's sequences (FA2's split heuristic counts them)
    hooks_.attention_call(a, c_, call_.cached_path, call_.cached_path && s.n == 1);
    const kernels::AttentionKernel& ak = (s.n == 1) ? *k_.attn_decode : *k_.attn_prefill;
    attend.run(hooks_, ak, a, q_s, s.cache->k[l], s.cache->v[l], out_s, s.decode, batch_.longest());
  });
}

// The final norm over every row, the LM head over each sequence's last row, M = sequences: x: (n, D) ->
// (sequences, vocab); Gemma-2's final softcap.
std::vector<Vec> ModelPass::classifier(const Vec& x) const {
  const Vec normed = rmsnorm(x, m_.final_norm);   // (n, D)
  const Vec last = batch_.last_rows(normed, D_);  // (sequences, D)
  batch_.keep_final_normed(last, D_);             // each sequence's trace
  std::vector<Vec> logits = RowBatch::split(linear(*k_.gemm, last, m_.head(), batch_.sequences(), c_.vocab, D_),
                                            c_.vocab);  // (sequences) × (vocab)
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (hooks_.final_softcap(c_, batch_.seqs()[i].decode))
      ops::softcap(f_, logits[i], static_cast<float>(c_.final_softcap));
  return logits;
}

// y: (n, D) = RMSNorm(x: (n, D)) with weight w: (D).
Vec ModelPass::rmsnorm(const Vec& x, std::span<const float> w) const {
  Vec y(n_ * D_);
  kernels::NormParams p;
  p.eps = hooks_.norm_eps(c_);
  p.one_plus_weight = c_.norm_one_plus_weight;
  k_.norm->run(kernels::NormShape{n_, D_}, p, x, w, y);
  return y;
}

// (n, in) · wᵀ, w: (out, in) -> (n, out).
Vec ModelPass::matmul(const kernels::GemmKernel& g, const Vec& x, std::span<const float> w, std::size_t out) const {
  return linear(g, x, w, n_, out, x.size() / n_);
}

// t: (n, heads, d) rotated at the rows' positions, in format f.
Vec ModelPass::rope(const Vec& t, std::size_t heads, Format f) const {
  Vec r = t;
  ops::rope(f, c_, r, heads, batch_.positions());
  return r;
}

Vec ModelPass::activation(const Vec& gate) const {
  Vec act(gate.size());
  hooks_.activation(f_, c_, gate, act);
  return act;
}

Vec ModelPass::add(const Vec& a, const Vec& b) const {
  Vec y(a.size());
  ops::add(f_, a, b, y);
  return y;
}

Vec ModelPass::mul(const Vec& a, const Vec& b) const {
  Vec y(a.size());
  ops::mul(f_, a, b, y);
  return y;
}

}  // namespace

std::vector<std::vector<float>> forward_segments(const Model& m, const ProfileKernels& k,
                                                 std::span<const Segment> segments, const ForwardCall& call,
                                                 const ForwardOptions& o) {
  if (segments.empty()) throw std::invalid_argument("kvconf::engine: a forward call needs at least one sequence");
  if (segments.size() > 1 && (o.capture_hidden || o.capture_layers || !o.patches.empty() || !o.op_patches.empty()))
    throw std::invalid_argument("kvconf::engine: captures and patches name the call's last row: one sequence only");
  const KvStore kv(m.config, k, call, m.storage);
  const RowBatch batch(m.config, segments, *call.hooks, call.cached_path, kv);
  OptionsObserver observer(o, *segments.front().trace, batch.rows(), m.config.hidden);
  return ModelPass(m, k, call, batch, kv, observer).run();
}

}  // namespace kvconf::engine
