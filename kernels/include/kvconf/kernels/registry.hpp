// One registry of kernels under test. Backends add their kernels with an explicit
// register_<backend>_kernels(Registry&) call (no static initializers); suites instantiate over it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::kernels {

class Registry {
 public:
  // Each throws std::invalid_argument on an empty or duplicate name (names are unique across kinds).
  void add(GemmKernel k);
  void add(NormKernel k);
  void add(AttentionKernel k);

  const std::vector<GemmKernel>& gemm() const { return gemm_; }
  const std::vector<NormKernel>& norm() const { return norm_; }
  const std::vector<AttentionKernel>& attention() const { return attention_; }

  // nullptr when absent.
  const GemmKernel* find_gemm(std::string_view name) const;
  const NormKernel* find_norm(std::string_view name) const;
  const AttentionKernel* find_attention(std::string_view name) const;

  std::vector<std::string> names() const;  // every kernel, in registration order per kind

 private:
  void claim(const std::string& name);
  std::vector<std::string> names_;
  std::vector<GemmKernel> gemm_;
  std::vector<NormKernel> norm_;
  std::vector<AttentionKernel> attention_;
};

// The CPU emulations of notes/kernels.md (G1–G4, R1–R2, A1, A2, A4, A6, A7) in fp16, bf16 and fp32 versions.
void register_cpu_kernels(Registry& r);

// A registry holding the CPU kernels (what the default suites and `kvconf` use).
Registry cpu_registry();

}  // namespace kvconf::kernels
