/* The kvconf kernel plugin ABI (version 2; version 1 is still read): a shared library exports two C functions and a
 * table of kernel descriptors, and kvconf runs every conformance suite on its kernels. Reference: docs/PLUGIN.md.
 *
 * Pure C (C99 and C++): no C++ types cross it. Tensors cross as DLPack DLTensor (<dlpack/dlpack.h>), always on the
 * CPU (kDLCPU), compact row-major with explicit strides, byte_offset 0, dtype the kernel's declared format.
 *
 * A plugin exports:
 *   uint32_t kvconf_plugin_abi_version(void);        returns KVCONF_PLUGIN_ABI_VERSION it was built against
 *   int kvconf_plugin_register(const struct kvconf_host* host, struct kvconf_plugin* out,
 *                              char* err, size_t err_size);
 * kvconf calls kvconf_plugin_abi_version first and calls kvconf_plugin_register only when it returns a version
 * kvconf speaks (1 or 2: host->abi_version is then that version, and the descriptors are read in its layout).
 * register fills *out and returns 0, or returns nonzero with a one-line message in err.
 *
 * Version 2 (over 1): `acc` may be FP16 or BF16 (a kernel that accumulates in a narrower format declares it), and two
 * fields follow the function pointers: `pv_acc` (attention's P·V accumulator, when it differs from `acc`) and
 * `flags` (KVCONF_FLAG_EXP2_SCALE: an attention kernel's softmax in exp2 with the scale folded with log2 e; the field
 * was named `reserved`, always 0, before that flag). A version-1 plugin's table is read as struct kvconf_kernel_desc_v1, with acc FP32 as before.
 */
#ifndef KVCONF_PLUGIN_H_
#define KVCONF_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on every change of a struct layout, a function signature or the meaning of a field. */
#define KVCONF_PLUGIN_ABI_VERSION 2u
/* The oldest version kvconf still reads. */
#define KVCONF_PLUGIN_ABI_VERSION_MIN 1u

/* Symbol names kvconf looks up with dlsym. */
#define KVCONF_PLUGIN_ABI_VERSION_SYMBOL "kvconf_plugin_abi_version"
#define KVCONF_PLUGIN_REGISTER_SYMBOL "kvconf_plugin_register"

/* Tensor formats. 0 is not a format: a field left zero is refused. */
enum kvconf_format {
  KVCONF_FP32 = 1, /* DLDataType {kDLFloat, 32, 1} */
  KVCONF_FP16 = 2, /* DLDataType {kDLFloat, 16, 1}, IEEE binary16 */
  KVCONF_BF16 = 3  /* DLDataType {kDLBfloat, 16, 1} */
};

/* What a kernel computes. 0 is not a kind. */
enum kvconf_kernel_kind {
  KVCONF_KIND_GEMM = 1,     /* y = x·Wᵀ (a Linear layer) */
  KVCONF_KIND_NORM = 2,     /* RMSNorm as HF computes it */
  KVCONF_KIND_ATTENTION = 3 /* softmax(scale·q·kᵀ, masked) · v over a KV cache */
};

/* Attention call parameters. Query row i (0 <= i < n_q) sits at absolute position pos = q_offset + i and sees the
 * keys j in [lo, hi): hi = causal ? min(n_kv, pos + 1) : n_kv; with window w > 0, lo = max(0, pos − w + 1) and,
 * when not causal, hi = min(hi, pos + w). A row that sees no key outputs +0. Logits: s = scale · (q·k); with
 * softcap c > 0, s = c · tanh(s / c). */
struct kvconf_attention_params {
  int64_t n_kv;     /* filled cache rows; rows [n_kv, capacity) of the caches must never be read */
  int64_t q_offset; /* absolute position of query row 0 */
  int64_t window;   /* sliding window, 0 = none */
  int32_t causal;   /* 1 causal, 0 not */
  float scale;      /* the float the logits are multiplied by */
  float softcap;    /* 0 = none */
  int32_t reserved; /* 0 */
};

/* RMSNorm parameters: r = 1/sqrt(mean(x²) + eps) in fp32, h = x·r in fp32; Llama (one_plus_weight 0):
 * y = fl_out(w · fl_out(h)); Gemma (one_plus_weight 1): y = fl_out(h · (1 + w)) with (1 + w) and the product in fp32.
 */
struct kvconf_norm_params {
  float eps;
  int32_t one_plus_weight;
};

/* The kernel functions. `user` is the descriptor's user pointer. Input tensors are read-only; the output tensor's
 * data is written, its descriptor (ndim, shape, strides, dtype, data, byte_offset, device) must be left unchanged.
 * Return 0 on success; nonzero with a one-line message in err (err_size bytes, NUL-terminated) on failure.
 * The same signatures serve `supports`: called with the tensors the run would get but data == NULL, it returns 0
 * when the kernel handles the call and nonzero with the reason in err when it does not (the case is skipped). */

/* x: (m, k), w: (n, k) in the kernel's `in` format; y: (m, n) in its `out` format. */
typedef int (*kvconf_gemm_fn)(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err,
                              size_t err_size);
/* x: (rows, d), w: (d) in `in`; y: (rows, d) in `out`. */
typedef int (*kvconf_norm_fn)(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y,
                              const struct kvconf_norm_params* params, char* err, size_t err_size);
/* q: (n_q, n_heads, d), k_cache: (capacity, n_kv_heads, d), v_cache: (capacity, n_kv_heads, d_v) in `in`;
 * out: (n_q, n_heads, d_v) in `out`. n_heads is a multiple of n_kv_heads; head h reads KV head h / (n_heads /
 * n_kv_heads). */
typedef int (*kvconf_attention_fn)(void* user, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache,
                                   DLTensor* out, const struct kvconf_attention_params* params, char* err,
                                   size_t err_size);

/* What an attention kernel's arithmetic does beyond its formats (the descriptor's flags, version 2). */
enum kvconf_kernel_flag {
  KVCONF_FLAG_EXP2_SCALE = 1 /* attention: the scale folded with log2 e and exp2 called on the scores (FlashAttention's
                                softmax, PyTorch's CUDA SDPA backends): three more roundings of the scores, charged as
                                a scale error of 4u + 4u² instead of 2u + 2u² (docs/PLUGIN.md) */
};

/* One kernel. Exactly the function pointers of its kind are read; run is required, supports optional (NULL: every
 * call is supported). Strings are NUL-terminated and must stay valid while the library is loaded. */
struct kvconf_kernel_desc {
  const char* name; /* [A-Za-z0-9_.-]{1,64}, unique in the plugin; registered as plugin.<lib>.<name> */
  int32_t kind;     /* enum kvconf_kernel_kind */
  int32_t in;       /* enum kvconf_format of the inputs (x and w; q, k_cache and v_cache) */
  int32_t acc;      /* enum kvconf_format of the reductions' accumulator (GEMM and norm sums, attention's q·k, and
                       P·V unless pv_acc says otherwise), with at least as many significand bits as `in`;
                       must be KVCONF_FP32 in version 1 */
  int32_t out;      /* enum kvconf_format of the output */
  int32_t cache_invariant; /* 1: claims decode and prefill outputs are bitwise equal (independent of rows in the
                              call, cache capacity and chunking); checked bitwise */
  int32_t deterministic;   /* 1: claims the same inputs give the same bits run to run */
  uint32_t exp_error_ulps; /* attention: fp32 ulps of error of the exp it uses; 0 = correctly rounded (charged 1);
                             e^x below 2^-125 may also be flushed to 0 */
  const char* mirrors;     /* optional (NULL): the real kernel this stands for, shown in reports */
  void* user;              /* passed back to run and supports */
  kvconf_gemm_fn gemm_run, gemm_supports;
  kvconf_norm_fn norm_run, norm_supports;
  kvconf_attention_fn attention_run, attention_supports;
  /* Version 2: */
  int32_t pv_acc;   /* attention: enum kvconf_format P·V is accumulated in (each key's p·v added to the running sum,
                       and the sum rescaled, with one rounding to it), at least as many significand bits as `in`;
                       0 = acc (the one field where 0 means something: a version-1 source rebuilt keeps its meaning).
                       0 for GEMM and norm kernels. */
  int32_t flags;    /* enum kvconf_kernel_flag bits; 0 = none (bits kvconf does not know are refused) */
};

/* Version 1's descriptor: version 2's without its last two fields (the layout a plugin returning 1 was built with). */
struct kvconf_kernel_desc_v1 {
  const char* name;
  int32_t kind, in, acc, out, cache_invariant, deterministic;
  uint32_t exp_error_ulps;
  const char* mirrors;
  void* user;
  kvconf_gemm_fn gemm_run, gemm_supports;
  kvconf_norm_fn norm_run, norm_supports;
  kvconf_attention_fn attention_run, attention_supports;
};

/* What kvconf tells the plugin. */
struct kvconf_host {
  uint32_t abi_version;     /* the version the host reads this plugin at: the one kvconf_plugin_abi_version returned */
  const char* host_version; /* kvconf's version, e.g. "0.1.0" */
};

/* What the plugin fills in. */
struct kvconf_plugin {
  uint32_t abi_version;                     /* set to the version kvconf_plugin_abi_version returns */
  uint32_t n_kernels;                       /* 1 .. 256 */
  const struct kvconf_kernel_desc* kernels; /* n_kernels descriptors (version 1: struct kvconf_kernel_desc_v1),
                                               valid while the library is loaded */
};

/* Marks a plugin's two entry points exported even when it builds with -fvisibility=hidden. */
#if defined(__GNUC__)
#define KVCONF_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KVCONF_PLUGIN_EXPORT
#endif

/* The two functions a plugin defines and exports. */
KVCONF_PLUGIN_EXPORT uint32_t kvconf_plugin_abi_version(void);
KVCONF_PLUGIN_EXPORT int kvconf_plugin_register(const struct kvconf_host* host, struct kvconf_plugin* out, char* err,
                                                size_t err_size);

/* Their types, as kvconf looks them up. */
typedef uint32_t (*kvconf_plugin_abi_version_fn)(void);
typedef int (*kvconf_plugin_register_fn)(const struct kvconf_host* host, struct kvconf_plugin* out, char* err,
                                         size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* KVCONF_PLUGIN_H_ */
