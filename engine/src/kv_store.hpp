// The K/V store policy of a forward call (internal to the forward pass): the GEMM that projects K and V and the
// format K is rotated in (the model's, or fp32 under the high-precision cache remedy, ContextOptions::kv_fp32_gemm),
// how each sequence's rows enter its cache (at the hooks' row, then ForwardHooks::after_cache_store), how a cache
// grows, and the device mirrors of a GPU profile's caches (every write reported, a buffer's mirror forgotten before
// the buffer is freed).
#pragma once

#include <cstddef>
#include <vector>

#include "forward.hpp"
#include "forward_rows.hpp"

namespace kvconf::engine {

class KvStore {
 public:
  KvStore(const ModelConfig& c, const ProfileKernels& k, const ForwardCall& call, Format storage);

  // The K and V projections' GEMM: the profile's, or the fp32 remedy's.
  const kernels::GemmKernel& gemm() const { return *gemm_; }
  // The format K is rotated in: the storage format, or fp32 under the remedy (whose cache holds fp32 values).
  Format rope_format() const { return rope_format_; }
  // Grows `cache` by doubling until it holds `rows` rows per layer (rows kept); a GPU profile's mirrors of the old
  // buffers are forgotten first.
  void make_room(KvCache& cache, std::size_t rows) const;
  // Layer l's K and V rows, k, v: (n, kv_dim), each sequence's into its cache at its write row; then the hooks'
  // after_cache_store on each side; a GPU profile reports the rows written to the device mirrors.
  void store(const RowBatch& batch, std::size_t l, const std::vector<float>& k, const std::vector<float>& v) const;
  // After the call: each cache holds its sequence's rows (n = pos0 + rows, never fewer than before).
  static void commit(const RowBatch& batch);

 private:
  std::size_t kv_dim_;
  const kernels::GemmKernel* gemm_;
  Format rope_format_;
  Format storage_;
  const ForwardHooks* hooks_;
  bool cached_path_;
  bool gpu_;  // the profile runs CUDA attention: every cache buffer is mirrored on the device
};

// Drops the device mirrors of every K/V buffer of `cache` (kernels::gpu_kv_forget): before the buffers are freed,
// reallocated or rewritten wholesale. A no-op for buffers without a mirror.
void forget_device_kv(const KvCache& cache);

}  // namespace kvconf::engine
