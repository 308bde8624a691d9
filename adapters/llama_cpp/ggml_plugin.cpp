// libkvconf_ggml_plugin.so: ggml's CPU kernels as kvconf plugin kernels (include/kvconf/plugin.h, docs/LLAMA_CPP.md
// "ggml's kernels"), called as llama.cpp's graph calls them: mul_mat with f32 or f16 weights (activations in f32,
// which ggml converts to the weights' type itself) and rms_norm followed by the weight's mul. Each call builds one ggml
// graph in a fresh context and computes it on one thread (ggml_graph_compute_with_ctx).
#include <ggml-cpu.h>
#include <ggml.h>
#include <kvconf/plugin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

// A ggml context sized for `bytes` of tensor data plus the tensors, one graph and the compute's work buffer
// (ggml_graph_compute_with_ctx takes it from the context: flash attention needs a few rows per thread); freed on
// scope exit.
struct Ctx {
  ggml_context* ctx = nullptr;
  explicit Ctx(std::size_t bytes) {
    ggml_init_params p{2 * bytes + 32 * ggml_tensor_overhead() + ggml_graph_overhead() + (4u << 20), nullptr, false};
    ctx = ggml_init(p);
  }
  ~Ctx() {
    if (ctx) ggml_free(ctx);
  }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
};

bool is_f32(const DLTensor* t) { return t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->dtype.lanes == 1; }
bool is_f16(const DLTensor* t) { return t->dtype.code == kDLFloat && t->dtype.bits == 16 && t->dtype.lanes == 1; }

const void* data_of(const DLTensor* t) { return static_cast<const char*>(t->data) + t->byte_offset; }

// The DLTensor's values (fp32 or fp16) into ggml tensor `g` of type F32 (an fp16 input widened exactly) or F16.
int load(ggml_tensor* g, const DLTensor* t, char* err, std::size_t err_size) {
  const std::int64_t n = ggml_nelements(g);
  if (g->type == GGML_TYPE_F32 && is_f32(t)) {
    std::memcpy(g->data, data_of(t), static_cast<std::size_t>(n) * sizeof(float));
  } else if (g->type == GGML_TYPE_F32 && is_f16(t)) {
    ggml_fp16_to_fp32_row(static_cast<const ggml_fp16_t*>(data_of(t)), static_cast<float*>(g->data), n);
  } else if (g->type == GGML_TYPE_F16 && is_f16(t)) {
    std::memcpy(g->data, data_of(t), static_cast<std::size_t>(n) * sizeof(ggml_fp16_t));
  } else {
    std::snprintf(err, err_size, "ggml plugin: a tensor of dtype (%d, %d) where the kernel takes %s", t->dtype.code,
                  t->dtype.bits, g->type == GGML_TYPE_F16 ? "fp16" : "fp32 or fp16");
    return 1;
  }
  return 0;
}

int compute(ggml_context* ctx, ggml_tensor* out, char* err, std::size_t err_size) {
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, out);
  if (ggml_graph_compute_with_ctx(ctx, gf, 1) != GGML_STATUS_SUCCESS) {
    std::snprintf(err, err_size, "ggml plugin: ggml_graph_compute_with_ctx failed");
    return 1;
  }
  return 0;
}

// user: the weights' ggml type (GGML_TYPE_F32 or GGML_TYPE_F16), as the GGUF stores them.
// y (m, n) = x (m, k) · w (n, k)ᵀ: ggml_mul_mat(w as ne {k, n}, x as ne {k, m}) → ne {n, m}, F32.
int gemm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err, std::size_t err_size) {
  const auto wtype = static_cast<ggml_type>(reinterpret_cast<std::intptr_t>(user));
  if (x->ndim != 2 || w->ndim != 2 || y->ndim != 2 || w->shape[1] != x->shape[1] || y->shape[0] != x->shape[0] ||
      y->shape[1] != w->shape[0]) {
    std::snprintf(err, err_size, "ggml plugin: gemm shapes do not match");
    return 2;
  }
  if (!x->data) return 0;  // supports: every shape
  const std::int64_t m = x->shape[0], k = x->shape[1], n = w->shape[0];
  Ctx c(static_cast<std::size_t>((m * k + n * k + m * n) * 4 + 64));
  if (!c.ctx) return std::snprintf(err, err_size, "ggml plugin: ggml_init failed"), 1;
  ggml_tensor* wt = ggml_new_tensor_2d(c.ctx, wtype, k, n);          // ne {k, n}: W's rows
  ggml_tensor* xt = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, k, m);  // ne {k, m}: the activations, f32 as llama.cpp's
  if (load(wt, w, err, err_size) || load(xt, x, err, err_size)) return 1;
  ggml_tensor* yt = ggml_mul_mat(c.ctx, wt, xt);  // ne {n, m}, F32
  if (compute(c.ctx, yt, err, err_size)) return 1;
  std::memcpy(static_cast<char*>(y->data) + y->byte_offset, yt->data, static_cast<std::size_t>(m * n) * sizeof(float));
  return 0;
}

// y (rows, d) = rms_norm(x) · w (Llama), or · (1 + w) with 1 + w formed in fp32 (Gemma: llama.cpp's converter stores
// 1 + w in the GGUF), all in F32 as llama.cpp's graph computes it.
int norm(void*, const DLTensor* x, const DLTensor* w, DLTensor* y, const kvconf_norm_params* p, char* err,
         std::size_t err_size) {
  if (x->ndim != 2 || w->ndim != 1 || y->ndim != 2 || w->shape[0] != x->shape[1]) {
    std::snprintf(err, err_size, "ggml plugin: rms_norm shapes do not match");
    return 2;
  }
  if (!x->data) return 0;
  const std::int64_t rows = x->shape[0], d = x->shape[1];
  Ctx c(static_cast<std::size_t>((3 * rows * d + 2 * d) * 4 + 64));
  if (!c.ctx) return std::snprintf(err, err_size, "ggml plugin: ggml_init failed"), 1;
  ggml_tensor* xt = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, d, rows);
  ggml_tensor* wt = ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, d);
  if (load(xt, x, err, err_size) || load(wt, w, err, err_size)) return 1;
  if (p->one_plus_weight)
    for (std::int64_t i = 0; i < d; ++i) static_cast<float*>(wt->data)[i] += 1.0f;
  ggml_tensor* yt = ggml_mul(c.ctx, ggml_rms_norm(c.ctx, xt, p->eps), wt);
  if (compute(c.ctx, yt, err, err_size)) return 1;
  std::memcpy(static_cast<char*>(y->data) + y->byte_offset, yt->data,
              static_cast<std::size_t>(rows * d) * sizeof(float));
  return 0;
}

// Whether query row `pos` sees key j (plugin.h's kvconf_attention_params).
bool visible(const kvconf_attention_params* p, std::int64_t pos, std::int64_t j) {
  std::int64_t hi = p->causal ? std::min<std::int64_t>(p->n_kv, pos + 1) : p->n_kv, lo = 0;
  if (p->window > 0) {
    lo = std::max<std::int64_t>(0, pos - p->window + 1);
    if (!p->causal) hi = std::min(hi, pos + p->window);
  }
  return j >= lo && j < hi;
}

// user: null = llama.cpp's soft_max + mul_mat path, non-null = ggml_flash_attn_ext. q (n_q, H, d), caches (capacity,
// Hkv, d | d_v) in fp16 (only rows [0, n_kv) are read), out (n_q, H, d_v) in fp32.
int attention(void* user, const DLTensor* q, const DLTensor* kc, const DLTensor* vc, DLTensor* out,
              const kvconf_attention_params* p, char* err, std::size_t err_size) {
  const bool flash = user != nullptr;
  if (q->ndim != 3 || kc->ndim != 3 || vc->ndim != 3 || out->ndim != 3) {
    std::snprintf(err, err_size, "ggml plugin: attention tensors must be 3-d");
    return 2;
  }
  const std::int64_t nq = q->shape[0], H = q->shape[1], d = q->shape[2], Hkv = kc->shape[1], dv = vc->shape[2];
  const std::int64_t nkv = p->n_kv;
  if (nkv < 1) return std::snprintf(err, err_size, "ggml plugin: attention over an empty cache"), 2;
  if (!q->data) return 0;
  const std::size_t bytes = static_cast<std::size_t>(
      (nq * H * d + 2 * nkv * Hkv * (d + dv) + nq * nkv * (H + 2) + 3 * nq * H * dv) * 4 + 4096);
  Ctx c(bytes);
  if (!c.ctx) return std::snprintf(err, err_size, "ggml plugin: ggml_init failed"), 1;
  ggml_tensor* qt = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F32, d, H, nq);     // ne {d, H, n_q}: the rows as given
  ggml_tensor* kt = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, d, Hkv, nkv);  // ne {d, Hkv, n_kv}: the filled rows
  ggml_tensor* vt = ggml_new_tensor_3d(c.ctx, GGML_TYPE_F16, dv, Hkv, nkv);
  if (load(qt, q, err, err_size) || load(kt, kc, err, err_size) || load(vt, vc, err, err_size)) return 1;
  // The mask: 0 where a row sees a key, -inf elsewhere; ne {n_kv, n_q} (F16 for flash attention, F32 for soft_max).
  ggml_tensor* mask = ggml_new_tensor_2d(c.ctx, flash ? GGML_TYPE_F16 : GGML_TYPE_F32, nkv, nq);
  for (std::int64_t i = 0; i < nq; ++i)
    for (std::int64_t j = 0; j < nkv; ++j) {
      const float m = visible(p, p->q_offset + i, j) ? 0.0f : -INFINITY;
      if (flash)
        static_cast<ggml_fp16_t*>(mask->data)[i * nkv + j] = ggml_fp32_to_fp16(m);
      else
        static_cast<float*>(mask->data)[i * nkv + j] = m;
    }
  ggml_tensor* qp = ggml_permute(c.ctx, qt, 0, 2, 1, 3);  // ne {d, n_q, H}
  ggml_tensor* kp = ggml_permute(c.ctx, kt, 0, 2, 1, 3);  // ne {d, n_kv, Hkv}
  ggml_tensor* res = nullptr;
  if (flash) {
    ggml_tensor* vp = ggml_permute(c.ctx, vt, 0, 2, 1, 3);                           // ne {d_v, n_kv, Hkv}
    res = ggml_flash_attn_ext(c.ctx, qp, kp, vp, mask, p->scale, 0.0f, p->softcap);  // ne {d_v, H, n_q}
    ggml_prec_set_acc(res, GGML_PREC_F32);  // as llama.cpp's graph asks (src/llama-graph.cpp)
  } else {
    ggml_tensor* kq = ggml_mul_mat(c.ctx, kp, qp);  // ne {n_kv, n_q, H}, F32 (ggml rounds q to f16: exact here)
    float sm_scale = p->scale;
    if (p->softcap > 0.0f) {  // as llama.cpp's Gemma-2 graph: the scale first, then c·tanh(s / c)
      kq = ggml_scale(c.ctx, kq, p->scale / p->softcap);
      kq = ggml_scale(c.ctx, ggml_tanh(c.ctx, kq), p->softcap);
      sm_scale = 1.0f;
    }
    kq = ggml_soft_max_ext(c.ctx, kq, mask, sm_scale, 0.0f);                   // ne {n_kv, n_q, H}
    ggml_tensor* vtr = ggml_cont(c.ctx, ggml_permute(c.ctx, vt, 1, 2, 0, 3));  // ne {n_kv, d_v, Hkv}
    ggml_tensor* kqv = ggml_mul_mat(c.ctx, vtr, kq);                           // ne {d_v, n_q, H}: P rounded to f16
    res = ggml_permute(c.ctx, kqv, 0, 2, 1, 3);                                // ne {d_v, H, n_q}
  }
  res = ggml_cont(c.ctx, res);
  if (compute(c.ctx, res, err, err_size)) return 1;
  std::memcpy(static_cast<char*>(out->data) + out->byte_offset, res->data,
              static_cast<std::size_t>(nq * H * dv) * sizeof(float));
  return 0;
}

void* as_user(ggml_type t) { return reinterpret_cast<void*>(static_cast<std::intptr_t>(t)); }

const kvconf_kernel_desc kernels[] = {
    {"mul_mat.f32", KVCONF_KIND_GEMM, KVCONF_FP32, KVCONF_FP32, KVCONF_FP32, 0, 1, 0,
     "ggml CPU ggml_mul_mat, f32 weights, f32 activations (llama.cpp's projections of an f32 GGUF)",
     as_user(GGML_TYPE_F32), gemm, gemm, nullptr, nullptr, nullptr, nullptr},
    {"mul_mat.f16", KVCONF_KIND_GEMM, KVCONF_FP16, KVCONF_FP32, KVCONF_FP32, 0, 1, 0,
     "ggml CPU ggml_mul_mat, f16 weights; ggml rounds the f32 activations to f16 itself (vec_dot_type), f32 result",
     as_user(GGML_TYPE_F16), gemm, gemm, nullptr, nullptr, nullptr, nullptr},
    {"rms_norm.f32", KVCONF_KIND_NORM, KVCONF_FP32, KVCONF_FP32, KVCONF_FP32, 0, 1, 0,
     "ggml CPU ggml_rms_norm then ggml_mul by the weight (llama.cpp's attn_norm / ffn_norm)", nullptr, nullptr, nullptr,
     norm, norm, nullptr, nullptr},
    {"attn.soft_max.f16", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP32, KVCONF_FP32, 0, 1, 1,
     "llama.cpp's attention without flash attention over an f16 cache: ggml_mul_mat(K, Q), ggml_soft_max_ext, "
     "ggml_mul_mat(Vt, P) (which rounds P to f16)",
     nullptr, nullptr, nullptr, nullptr, nullptr, attention, attention},
    // Over an f16 V, ggml's CPU flash attention accumulates P·V key by key in fp16 (ggml-cpu/ops.cpp: VKQ16,
    // ggml_vec_mad_f16 and ggml_vec_scale_f16; q·k and the softmax in f32): pv_acc says so (ABI version 2).
    {"attn.flash_attn_ext.f16", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP32, KVCONF_FP32, 0, 1, 1,
     "llama.cpp's flash attention over an f16 cache: ggml_flash_attn_ext, F32 precision, P·V accumulated in f16",
     reinterpret_cast<void*>(1), nullptr, nullptr, nullptr, nullptr, attention, attention, KVCONF_FP16, 0},
};

}  // namespace

extern "C" KVCONF_PLUGIN_EXPORT uint32_t kvconf_plugin_abi_version(void) { return KVCONF_PLUGIN_ABI_VERSION; }

extern "C" KVCONF_PLUGIN_EXPORT int kvconf_plugin_register(const kvconf_host* host, kvconf_plugin* out, char* err,
                                                           size_t err_size) {
  if (host->abi_version != KVCONF_PLUGIN_ABI_VERSION) {
    std::snprintf(err, err_size, "built for ABI %u, host speaks %u", KVCONF_PLUGIN_ABI_VERSION, host->abi_version);
    return 1;
  }
  ggml_cpu_init();  // ggml's fp16 tables (GELU, exp) and CPU features, once
  out->abi_version = KVCONF_PLUGIN_ABI_VERSION;
  out->n_kernels = static_cast<uint32_t>(sizeof kernels / sizeof kernels[0]);
  out->kernels = kernels;
  return 0;
}
