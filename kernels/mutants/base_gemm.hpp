// Private to kvconf::kernel_mutants: the correct base GEMM the GEMM mutants are built from (fp16 inputs,
// one fp32 FMA chain per output element in ascending k, one rounding to fp16), and its one-bug switches.
#pragma once

#include <string>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels::mutants {

enum class GemmBug {
  none,
  fp16_accumulation,    // accumulates in fp16 (HFMA) while KernelInfo and path() say fp32
  m1_drops_last_k,      // the M = 1 (decode) path sums only the first K − 1 products
  m1_splitk_invariant,  // the M = 1 path uses split-K(4) with fp16 partials (honestly reported) while claiming
                        // cache_invariant
};

struct GemmDesign {
  std::string name;
  std::string mirrors;
  bool claims_cache_invariant = true;
  GemmBug bug = GemmBug::none;
};

GemmKernel make_gemm_kernel(const GemmDesign& design);

}  // namespace kvconf::kernels::mutants
