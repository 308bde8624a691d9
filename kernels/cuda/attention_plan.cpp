// Plans of the CUDA attention kernels, computed on the host (cuda_attention.hpp): the online-softmax key block
// and the split-KV decode's split count (FA2's num_splits_heuristic, notes/kernels.md §2.2).
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_common.hpp"  // kernels/cpu: fa2_standard_bc, fa2_split_bn, num_splits_heuristic
#include "cuda_attention.hpp"

namespace kvconf::kernels::cuda {

using cpu::attn::num_splits_heuristic;  // the CPU A2 emulation's, so both plan the same splits

std::size_t flash_bc(std::size_t d) { return cpu::attn::fa2_standard_bc(d); }

SplitKvPlan splitkv_plan(const AttentionCall& c) {
  const ref::AttentionShape& s = c.shape;
  SplitKvPlan p;
  p.bn = cpu::attn::fa2_split_bn(s.d);
  p.n_blocks = std::max<std::size_t>(1, (c.cap() + p.bn - 1) / p.bn);
  const bool swapped = s.n_heads > s.n_kv_heads && c.params.window == 0 && s.d % 8 == 0;
  const std::size_t heads = swapped ? s.n_kv_heads : s.n_heads;
  const std::size_t rows = swapped ? s.n_heads / s.n_kv_heads : 1;
  const std::size_t m_blocks = (rows + 63) / 64;
  p.splits = static_cast<std::size_t>(
      num_splits_heuristic(static_cast<int>(heads * m_blocks), 2 * kHeuristicSMs, static_cast<int>(p.n_blocks), 128));
  p.blocks_per_split = (p.n_blocks + p.splits - 1) / p.splits;
  return p;
}

}  // namespace kvconf::kernels::cuda
