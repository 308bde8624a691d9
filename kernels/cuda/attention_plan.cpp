// Plans of the CUDA attention kernels, computed on the host (cuda_attention.hpp): the online-softmax key block
// and the split-KV decode's split count (FA2's num_splits_heuristic, notes/kernels.md §2.2).
#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_common.hpp"  // kernels/cpu: fa2_standard_bc, fa2_split_bn
#include "cuda_attention.hpp"

namespace kvconf::kernels::cuda {
namespace {

// flash_api.cpp num_splits_heuristic (L281–315, notes §2.2): one split when the grid already fills 80 % of the
// SMs; otherwise the smallest eligible split count whose wave efficiency is within 85 % of the best (a count is
// eligible when it changes ceil(n_blocks / s)). Written from the notes' description.
int num_splits_heuristic(int work, int num_sms, int num_n_blocks, int max_splits) {
  if (static_cast<float>(work) >= 0.8f * static_cast<float>(num_sms)) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  auto ceildiv = [](int a, int b) { return (a + b - 1) / b; };
  auto eligible = [&](int s) { return s == 1 || ceildiv(num_n_blocks, s) != ceildiv(num_n_blocks, s - 1); };
  std::vector<float> eff(static_cast<std::size_t>(std::max(max_splits, 0)), 0.0f);
  float best = 0.0f;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) continue;
    const float waves = static_cast<float>(work * s) / static_cast<float>(num_sms);
    eff[static_cast<std::size_t>(s - 1)] = waves / std::ceil(waves);
    best = std::max(best, eff[static_cast<std::size_t>(s - 1)]);
  }
  for (int s = 1; s <= max_splits; ++s)
    if (eligible(s) && eff[static_cast<std::size_t>(s - 1)] >= 0.85f * best) return s;
  return 1;
}

}  // namespace

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
  p.splits = static_cast<std::size_t>(num_splits_heuristic(static_cast<int>(heads * m_blocks), 2 * kHeuristicSMs,
                                                           static_cast<int>(p.n_blocks), 128));
  p.blocks_per_split = (p.n_blocks + p.splits - 1) / p.splits;
  return p;
}

}  // namespace kvconf::kernels::cuda
