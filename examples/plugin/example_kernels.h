/* The example plugin's kernel functions (gemm.c, norm.c, attention.c) and the layout check they share. Each is a
 * function of include/kvconf/plugin.h; `user` points to a struct ex_variant (what the wrong-kernel build plants). */
#ifndef KVCONF_EXAMPLE_KERNELS_H_
#define KVCONF_EXAMPLE_KERNELS_H_

#include <stdio.h>

#include "kvconf/plugin.h"

/* Planted bugs for the wrong-kernel library (libkvconf_example_wrong.so); all zero in the correct plugin. */
struct ex_variant {
  int gemm_acc_fp16;      /* GEMM: round the running sum to fp16 after every addition */
  int attn_drop_last_row; /* attention: decode calls (n_q = 1) never read cache row n_kv − 1 (the newest K/V) */
};

/* 0 when t is a CPU tensor of `ndim` dimensions, compact row-major; else 1 with a message in err. */
static inline int ex_check_layout(const DLTensor* t, int ndim, const char* name, char* err, size_t err_size) {
  if (t->device.device_type != kDLCPU || t->ndim != ndim || t->dtype.lanes != 1) {
    snprintf(err, err_size, "%s: expected a CPU tensor of %d dimensions", name, ndim);
    return 1;
  }
  if (t->strides) {
    int64_t expect = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      if (t->shape[i] > 1 && t->strides[i] != expect) {
        snprintf(err, err_size, "%s: expected compact row-major strides", name);
        return 1;
      }
      expect *= t->shape[i];
    }
  }
  return 0;
}

int ex_gemm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err, size_t err_size);
int ex_norm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, const struct kvconf_norm_params* p,
            char* err, size_t err_size);
int ex_attention(void* user, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache, DLTensor* out,
                 const struct kvconf_attention_params* p, char* err, size_t err_size);
/* supports: declines value head dims different from the query head dim (the example keeps one head_dim). */
int ex_attention_supports(void* user, const DLTensor* q, const DLTensor* k_cache, const DLTensor* v_cache,
                          DLTensor* out, const struct kvconf_attention_params* p, char* err, size_t err_size);

#endif /* KVCONF_EXAMPLE_KERNELS_H_ */
