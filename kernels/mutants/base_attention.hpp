// Private to kvconf::kernel_mutants: the correct base attention kernel the attention mutants are built
// from (online softmax in fp32 over KV blocks aligned at key 0, P cast to fp16 before PV, fp16 output;
// optionally split-KV for decode), and the one-bug switches that turn it into a mutant.
#pragma once

#include <cstddef>
#include <string>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels::mutants {

// At most one planted bug per kernel.
enum class AttnBug {
  none,
  no_max_subtraction,      // p = exp(s) without subtracting the running max: fp16(p) overflows for large logits
  causal_off_by_one,       // the key at the query's own position is masked (j < pos instead of j <= pos)
  gqa_modulo,              // query head h reads KV head h % n_kv_heads instead of h / (n_heads / n_kv_heads)
  window_off_by_one,       // sliding window keeps pos − j <= w instead of pos − j < w (one key too many)
  softcap_missing_decode,  // the decode path (n_q = 1) skips the logit softcap
  split_combine_unscaled,  // split-KV combine adds the partial sums without the exp(m_s − m) rescale
  decode_one_ulp_bias,     // the decode path adds one fp16 ulp to output element (head 0, column 0)
  stale_cache_row,         // the decode path reads key/value row n_kv − 2 in place of the new row n_kv − 1
  unused_slot_read,        // the PV loop reads V row n_kv (first unused cache slot) with a zero weight
  capacity_blocks,         // the KV block size is chosen from the cache capacity (capacity / 4)
  ignores_q_offset,        // query row i is taken to sit at position i (q_offset ignored)
};

struct AttnDesign {
  std::string name;
  std::string mirrors;
  std::size_t block = 16;         // Bc: keys per online-softmax block, blocks aligned at key 0 (or split start)
  std::size_t decode_splits = 0;  // > 0: decode calls (n_q = 1) cut the keys into this many partitions
  bool claims_cache_invariant = true;
  AttnBug bug = AttnBug::none;
};

// An fp16 attention kernel (fp16 q/k/v, fp32 scores and softmax statistics, fp16 P, fp32 PV, fp16 out).
AttentionKernel make_attention_kernel(const AttnDesign& design);

}  // namespace kvconf::kernels::mutants
