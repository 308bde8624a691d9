// Private to kernels/cuda: what the host wrapper (attention_host.cpp) hands the device code (attention_*.cu):
// device pointers, dimensions, and the per-row visible key ranges computed on the host (so the masking rule is the
// CPU kernels' visible_keys(), never re-derived on the device).
#pragma once

#include <cuda_runtime.h>

namespace kvconf::kernels::cuda {

struct DevAttn {
  // Device storage: __half when f16, else float. q: (n_q, heads, d), k: (cap, kv_heads, d),
  // v: (cap, kv_heads, dv), out: (n_q, heads, dv).
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const int* key_lo = nullptr;  // (n_q) first visible key of each query row
  const int* key_hi = nullptr;  // (n_q) one past the last visible key (lo == hi: no visible key)
  float* part_o = nullptr;      // split-KV scratch (heads, splits, dv): per-split normalised outputs (fp32)
  float* part_lse = nullptr;    // split scratch: splitkv (heads, splits); invariant (n_q, heads, max_splits)
  int n_q = 0, heads = 0, kv_heads = 0, d = 0, dv = 0;
  float scale = 1.0f, softcap = 0.0f;  // softcap 0: none
  int bc = 64;                         // key block of the online softmax (flash2, invariant; splitkv: bn)
  int splits = 1;                      // splitkv: S
  int keys_per_split = 0;              // splitkv: blocks_per_split · bn; invariant: kInvariantSplitKeys
  int max_splits = 1;                  // invariant: ceil(n_kv / kInvariantSplitKeys) (>= 1), the scratch stride
};

// Each kernel's launcher (launch_<name>(const DevAttn&, bool f16), defined in its .cu) launches on the default stream
// and returns cudaGetLastError(); it is declared where it is called, in the kernel's description file
// (attention_<stem>.cpp), so adding a kernel touches no shared header.

}  // namespace kvconf::kernels::cuda
