// Numerics profiles: which registry kernels a model runs under and its storage format (weights, activations, KV
// cache). Each kernel picks its internal path from the call shape, as the real stack does (M = 1 vs M = n GEMMs,
// q_len = 1 decode vs prefill attention) — that is where cache-ON and cache-OFF part. DESIGN.md "Engine".
// The CPU profiles (builtin_profiles: what `kvconf run` sweeps) and the GPU profiles (gpu_profiles: cuda-fp16,
// cuda-fp32, cuda-fp16-invariant; they need a CUDA device and resolve their kernels from the GPU registry too).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kvconf/kernels/registry.hpp"
#include "kvconf/numerics/format.hpp"

namespace kvconf::engine {

struct Profile {
  std::string name;  // "fp32", "fp16-eager", "fp16-flash2", "fp16-invariant", "bf16-eager"
  Format storage = Format::fp32;
  std::string gemm;              // every projection and the LM head
  std::string attn_prefill;      // calls with q_len > 1
  std::string attn_decode;       // calls with q_len == 1
  std::string norm;              // every RMSNorm
  bool cache_invariant = false;  // claims cache-ON == cache-OFF bitwise (InvariantConformance holds it to that)
  bool requires_gpu = false;     // runs CUDA/cuBLAS kernels: needs a CUDA device (kernels::gpu_unavailable())
  std::string description;
};

// The CPU profiles: fp32, fp16-eager, fp16-flash2, fp16-invariant, bf16-eager (never a GPU one: `kvconf run` and the
// Cpu/ model suites iterate this list).
const std::vector<Profile>& builtin_profiles();
// The GPU profiles (requires_gpu): cuda-fp16, cuda-fp32, cuda-fp16-invariant (docs/GPU.md "Engine profiles").
const std::vector<Profile>& gpu_profiles();
// Either list, by name. Throws std::invalid_argument listing the known names.
const Profile& find_profile(std::string_view name);

// Why profile p cannot run here (a GPU profile without a usable CUDA device: kernels::gpu_unavailable()'s reason,
// e.g. "no CUDA device: cudaGetDeviceCount returned ..." or "built without CUDA"), or nullopt. Suites GTEST_SKIP it.
std::optional<std::string> profile_unavailable(const Profile& p);

struct Model;
// For a GPU profile: declares the model's projection and LM-head matrices immutable device-resident weights
// (kernels::pin_gpu_weights: uploaded once, no per-call checksum, never evicted) — call it once per model before a
// long run (the 7B-shaped models: 13.5 GB that the default 4 GiB weight cache would otherwise re-upload). The model
// must outlive every GPU call (or call kernels::drop_gpu_weight_cache() first). Nothing for a CPU profile.
void pin_gpu_weights(const Model& m, const Profile& p);
// Undoes one pin_gpu_weights(m, p): when no pin of a matrix remains, its device copy is freed (so a model loaded
// later at the same addresses is uploaded afresh). A Context of a GPU profile pins in its constructor and unpins in
// its destructor. Nothing for a CPU profile.
void unpin_gpu_weights(const Model& m, const Profile& p);

// Thrown by resolve() for a profile that cannot run here; what() = "profile 'cuda-fp16' needs a CUDA device: <why>".
struct DeviceUnavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A profile's kernels looked up in a registry (pointers into it: the registry must outlive this).
struct ProfileKernels {
  Profile profile;
  const kernels::GemmKernel* gemm = nullptr;
  const kernels::AttentionKernel* attn_prefill = nullptr;
  const kernels::AttentionKernel* attn_decode = nullptr;
  const kernels::NormKernel* norm = nullptr;
};
// Throws std::invalid_argument naming a kernel missing from the registry or whose formats do not match storage.
// A GPU profile first throws DeviceUnavailable when profile_unavailable(p); its kernels missing from r are then
// looked up in a process-wide registry of the GPU kernels and the CPU kernels (so callers holding
// kernels::cpu_registry() need no change; those pointers live until exit).
ProfileKernels resolve(const Profile& p, const kernels::Registry& r);

}  // namespace kvconf::engine
