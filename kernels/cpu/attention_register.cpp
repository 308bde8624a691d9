// Registration of the CPU attention kernels (notes/kernels.md §7 A1, A2, A4, A6, A7; attention_*.cpp).
#include "attention_common.hpp"
#include "cpu_kernels.hpp"

namespace kvconf::kernels::cpu {

void register_attention_kernels(Registry& r) {
  using attn::a1_flash2;
  using attn::a2_splitkv;
  using attn::a4_paged;
  using attn::a6_eager;
  using attn::a7_fixedsplit;
  for (const Format f : {Format::fp16, Format::bf16, Format::fp32}) r.add(a1_flash2(f));
  r.add(a2_splitkv(Format::fp16));
  r.add(a2_splitkv(Format::fp32));
  r.add(a4_paged(Format::fp16));
  for (const Format f : {Format::fp16, Format::bf16, Format::fp32}) r.add(a6_eager(f));
  for (const Format f : {Format::fp16, Format::bf16, Format::fp32}) r.add(a7_fixedsplit(f));
}

}  // namespace kvconf::kernels::cpu
