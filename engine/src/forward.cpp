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

std::vector<std::vector<float>> forward_segments(const Model& m, const ProfileKernels& k,
                                                 std::span<const Segment> segments, const ForwardCall& call,
                                                 const ForwardOptions& o) {
  const ModelConfig& c = m.config;
  const Format f = m.storage;
  const std::size_t S = segments.size(), D = c.hidden;
  if (S == 0) throw std::invalid_argument("kvconf::engine: a forward call needs at least one sequence");
  if (S > 1 && (o.capture_hidden || o.capture_layers || !o.patches.empty() || !o.op_patches.empty()))
    throw std::invalid_argument("kvconf::engine: captures and patches name the call's last row: one sequence only");
  const ForwardHooks& hooks = *call.hooks;
  const bool gpu = k.profile.requires_gpu;  // the cache buffers are mirrored on the device; every write is reported

  // Per sequence: its first row in the call, its rows, its position, whether it decodes; the rows' positions.
  struct Seq {
    std::size_t row0 = 0, n = 0, pos0 = 0, write_row = 0;
    bool decode = false;
  };
  std::vector<Seq> seq(S);
  std::size_t n = 0, longest = 0;  // all rows of the call; the longest attended prefix (pos0 + rows)
  std::vector<std::size_t> rope_positions;
  for (std::size_t i = 0; i < S; ++i) {
    const Segment& g = segments[i];
    if (g.tokens.empty()) throw std::invalid_argument("kvconf::engine: a forward call needs at least one token");
    for (const int t : g.tokens)
      if (t < 0 || static_cast<std::size_t>(t) >= c.vocab)
        throw std::invalid_argument("kvconf::engine: token id " + std::to_string(t) + " outside the vocabulary [0, " +
                                    std::to_string(c.vocab) + ")");
    Seq& sq = seq[i];
    sq.row0 = n, sq.n = g.tokens.size(), sq.pos0 = g.cache->n;
    sq.decode = call.cached_path && sq.n == 1 && sq.pos0 > 0;
    sq.write_row = hooks.cache_write_row(sq.pos0, sq.decode);
    for (std::size_t r = 0; r < sq.n; ++r)
      rope_positions.push_back(r == 0 ? hooks.rope_position(sq.pos0, sq.decode) : sq.pos0 + r);
    grow(*g.cache, sq.pos0 + sq.n, gpu);
    n += sq.n;
    longest = std::max(longest, sq.pos0 + sq.n);
    *g.trace = Trace{};
    g.trace->rows = sq.n;
    g.trace->pos0 = sq.pos0;
  }
  for (const Segment& g : segments) g.trace->batch_rows = n;
  Trace& trace = *segments.front().trace;  // captures: one sequence only
  const bool keep_hidden = o.capture_hidden;

  // x: (n, D) embeddings (Gemma: · fl(√hidden) in the model dtype).
  Vec x(n * D);
  for (std::size_t i = 0; i < S; ++i)
    for (std::size_t r = 0; r < seq[i].n; ++r)
      std::copy_n(m.embed.begin() + static_cast<std::size_t>(segments[i].tokens[r]) * D, D,
                  x.begin() + (seq[i].row0 + r) * D);
  if (c.scale_embeddings) ops::scale(f, x, hooks.embed_scale(c, f));
  if (keep_hidden) trace.hidden.push_back(x);

  const std::size_t qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate;
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

    Vec attn(n * qd);  // (n, H, d)
    for (std::size_t i = 0; i < S; ++i) {
      const Seq& sq = seq[i];
      KvCache& cache = *segments[i].cache;
      // This sequence's K/V rows (sq.n, KV, d) into its cache.
      const auto rows_of = [&](const Vec& t, std::size_t width) {
        return std::span<const float>(t).subspan(sq.row0 * width, sq.n * width);
      };
      std::ranges::copy(rows_of(kk, kvd), cache.k[l].begin() + sq.write_row * kvd);
      std::ranges::copy(rows_of(v, kvd), cache.v[l].begin() + sq.write_row * kvd);
      for (Vec* side : {&cache.k[l], &cache.v[l]})
        hooks.after_cache_store(*side, sq.write_row * kvd, (sq.write_row + sq.n) * kvd, f, call.cached_path, sq.decode);
      if (gpu) {  // an append (write_row = pos0 = the rows the mirror lacks), or a hook's rewrite of an earlier row
        for (const Vec* side : {&cache.k[l], &cache.v[l]}) {
          kernels::gpu_kv_track(side->data());
          kernels::gpu_kv_rows_changed(side->data(), sq.write_row);
        }
      }

      // Its attention over its own cache: (sq.n, H, d).
      kernels::AttentionCall a = layer_attention_call(c, l, sq.n, sq.pos0, cache.capacity);
      a.batch = S;  // one launch over the batch's sequences (FA2's split heuristic counts them)
      hooks.attention_call(a, c, call.cached_path, call.cached_path && sq.n == 1);
      const kernels::AttentionKernel& ak = (sq.n == 1) ? *k.attn_decode : *k.attn_prefill;
      static const BatchAttention plain_attention;  // the forward hooks' attention over the sequence's own rows
      const BatchAttention& attend = call.batch_attention ? *call.batch_attention : plain_attention;
      if (S == 1) {  // q and attn are this sequence's rows
        attend.run(hooks, ak, a, q, cache.k[l], cache.v[l], attn, sq.decode, longest);
        continue;
      }
      const auto qs = rows_of(q, qd);
      Vec q_i(qs.begin(), qs.end()), out_i(sq.n * qd);
      attend.run(hooks, ak, a, q_i, cache.k[l], cache.v[l], out_i, sq.decode, longest);
      std::ranges::copy(out_i, attn.begin() + sq.row0 * qd);
    }
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
    hooks.activation(f, c, gate, act);
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
  for (std::size_t i = 0; i < S; ++i) segments[i].cache->n = std::max(segments[i].cache->n, seq[i].pos0 + seq[i].n);

  // The final norm over every row, the LM head over each sequence's last row: (S, D) -> (S, vocab).
  Vec normed = rms_norm(c, *k.norm, x, m.final_norm, n, hooks);  // (n, D)
  Vec last(S * D);
  for (std::size_t i = 0; i < S; ++i) {
    const auto row = normed.begin() + static_cast<std::ptrdiff_t>((seq[i].row0 + seq[i].n - 1) * D);
    std::copy_n(row, D, last.begin() + i * D);
    segments[i].trace->final_normed.assign(row, row + static_cast<std::ptrdiff_t>(D));
  }
  Vec head = linear(*k.gemm, last, m.head(), S, c.vocab, D);  // (S, vocab)
  std::vector<Vec> logits(S);
  for (std::size_t i = 0; i < S; ++i) {
    logits[i].assign(head.begin() + static_cast<std::ptrdiff_t>(i * c.vocab),
                     head.begin() + static_cast<std::ptrdiff_t>((i + 1) * c.vocab));
    if (hooks.final_softcap(c, seq[i].decode)) ops::softcap(f, logits[i], static_cast<float>(c.final_softcap));
  }
  return logits;
}

}  // namespace kvconf::engine
