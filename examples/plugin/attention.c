/* The example attention: per query row and head, two passes over the visible keys — the max logit, then
 * p_j = exp(s_j − max) (binary64 exp rounded to fp32), Σp and Σ p·v in fp32 — and out = Σp·v / Σp rounded to out's
 * dtype. q: (n_q, H, d), k_cache: (capacity, Hkv, d), v_cache: (capacity, Hkv, d_v), out: (n_q, H, d_v).
 * The wrong build (attn_drop_last_row) plants a stale-cache bug: decode calls (n_q = 1) never read cache row n_kv − 1
 * (the newest token's K/V, as if appended after the call). */
#include <stdlib.h>

#include "example_kernels.h"
#include "fp_bits.h"

int ex_attention_supports(void* user, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache,
                          DLTensor* out, const struct kvconf_attention_params* p, char* err, size_t err_size) {
  (void)user, (void)k_cache, (void)out, (void)p;
  if (q->ndim == 3 && v_cache->ndim == 3 && q->shape[2] != v_cache->shape[2]) {
    snprintf(err, err_size, "the example attention needs d_v == d (got %lld, %lld)", (long long)v_cache->shape[2],
             (long long)q->shape[2]);
    return 1;
  }
  return 0;
}

int ex_attention(void* user, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache, DLTensor* out,
                 const struct kvconf_attention_params* p, char* err, size_t err_size) {
  const struct ex_variant* var = (const struct ex_variant*)user;
  if (ex_check_layout(q, 3, "q", err, err_size) || ex_check_layout(k_cache, 3, "k_cache", err, err_size) ||
      ex_check_layout(v_cache, 3, "v_cache", err, err_size) || ex_check_layout(out, 3, "out", err, err_size))
    return 1;
  const int64_t n_q = q->shape[0], heads = q->shape[1], d = q->shape[2];
  const int64_t kv_heads = k_cache->shape[1], d_v = v_cache->shape[2];
  const int64_t group = heads / kv_heads;
  int64_t n_kv = p->n_kv;
  if (var->attn_drop_last_row && n_q == 1 && n_kv > 0) --n_kv;
  float* s = (float*)malloc(sizeof(float) * (size_t)(n_kv > 0 ? n_kv : 1));
  float* acc = (float*)malloc(sizeof(float) * (size_t)d_v);
  if (!s || !acc) {
    free(s);
    free(acc);
    snprintf(err, err_size, "out of memory");
    return 3;
  }
  for (int64_t i = 0; i < n_q; ++i) {
    const int64_t pos = p->q_offset + i;
    int64_t lo = 0, hi = n_kv;
    if (p->causal && hi > pos + 1) hi = pos + 1;
    if (p->window > 0) {
      if (lo < pos - p->window + 1) lo = pos - p->window + 1;
      if (!p->causal && hi > pos + p->window) hi = pos + p->window;
    }
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / group;
      const size_t o = (size_t)((i * heads + h) * d_v);
      if (hi <= lo) {
        for (int64_t c = 0; c < d_v; ++c) ex_store(out, o + (size_t)c, 0.0f);
        continue;
      }
      float mx = -INFINITY;
      for (int64_t j = lo; j < hi; ++j) { /* pass 1: logits and their max */
        float dot = 0.0f;
        for (int64_t c = 0; c < d; ++c)
          dot += ex_load(q, (size_t)((i * heads + h) * d + c)) * ex_load(k_cache, (size_t)((j * kv_heads + g) * d + c));
        float z = dot * p->scale;
        if (p->softcap > 0.0f) z = (float)tanh((double)(z / p->softcap)) * p->softcap;
        s[j] = z;
        if (z > mx) mx = z;
      }
      float l = 0.0f;
      for (int64_t c = 0; c < d_v; ++c) acc[c] = 0.0f;
      for (int64_t j = lo; j < hi; ++j) { /* pass 2: weights, their sum, the weighted values */
        const float pj = (float)exp((double)(s[j] - mx));
        l += pj;
        for (int64_t c = 0; c < d_v; ++c) acc[c] += pj * ex_load(v_cache, (size_t)((j * kv_heads + g) * d_v + c));
      }
      for (int64_t c = 0; c < d_v; ++c) ex_store(out, o + (size_t)c, acc[c] / l);
    }
  }
  free(s);
  free(acc);
  return 0;
}
