// Numerics profiles: which registry kernels a model runs under and its storage format (weights, activations, KV
// cache). Each kernel picks its internal path from the call shape, as the real stack does (M = 1 vs M = n GEMMs,
// q_len = 1 decode vs prefill attention) — that is where cache-ON and cache-OFF part. DESIGN.md "Engine".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/format.hpp"

namespace kvconf::engine {

struct Profile {
  std::string name;          // "fp32", "fp16-eager", "fp16-flash2", "fp16-invariant", "bf16-eager"
  Format storage = Format::fp32;
  std::string gemm;          // every projection and the LM head
  std::string attn_prefill;  // calls with q_len > 1
  std::string attn_decode;   // calls with q_len == 1
  std::string norm;          // every RMSNorm
  bool cache_invariant = false;  // claims cache-ON == cache-OFF bitwise (InvariantConformance holds it to that)
  std::string description;
};

const std::vector<Profile>& builtin_profiles();
// Throws std::invalid_argument listing the known names.
const Profile& find_profile(std::string_view name);

// A profile's kernels looked up in a registry (pointers into it: the registry must outlive this).
struct ProfileKernels {
  Profile profile;
  const kernels::GemmKernel* gemm = nullptr;
  const kernels::AttentionKernel* attn_prefill = nullptr;
  const kernels::AttentionKernel* attn_decode = nullptr;
  const kernels::NormKernel* norm = nullptr;
};
// Throws std::invalid_argument naming a kernel missing from the registry or whose formats do not match storage.
ProfileKernels resolve(const Profile& p, const kernels::Registry& r);

}  // namespace kvconf::engine
