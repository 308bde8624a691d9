// The K/V store policy of a forward call (kv_store.hpp).
#include "kv_store.hpp"

#include <algorithm>

#include "kvconf/kernels/gpu.hpp"

namespace kvconf::engine {

KvStore::KvStore(const ModelConfig& c, const ProfileKernels& k, const ForwardCall& call, Format storage)
    : kv_dim_(c.kv_dim()),
      gemm_(call.kv_fp32_gemm ? call.kv_fp32_gemm : k.gemm),
      rope_format_(call.kv_fp32_gemm ? Format::fp32 : storage),
      storage_(storage),
      hooks_(call.hooks),
      cached_path_(call.cached_path),
      gpu_(k.profile.requires_gpu) {}

void KvStore::make_room(KvCache& cache, std::size_t rows) const {
  if (rows <= cache.capacity) return;
  std::size_t cap = std::max<std::size_t>(cache.capacity, 1);
  while (cap < rows) cap *= 2;
  if (gpu_) forget_device_kv(cache);
  for (auto* side : {&cache.k, &cache.v})
    for (std::vector<float>& layer : *side) layer.resize(cap * cache.kv_dim, 0.0f);
  cache.capacity = cap;
}

void KvStore::store(const RowBatch& batch, std::size_t l, const std::vector<float>& k,
                    const std::vector<float>& v) const {
  const std::size_t kvd = kv_dim_;
  for (const SeqRows& s : batch.seqs()) {
    KvCache& cache = *s.cache;
    std::ranges::copy(RowBatch::rows_of(k, s, kvd),
                      cache.k[l].begin() + static_cast<std::ptrdiff_t>(s.write_row * kvd));
    std::ranges::copy(RowBatch::rows_of(v, s, kvd),
                      cache.v[l].begin() + static_cast<std::ptrdiff_t>(s.write_row * kvd));
    for (std::vector<float>* side : {&cache.k[l], &cache.v[l]})
      hooks_->after_cache_store(*side, s.write_row * kvd, (s.write_row + s.n) * kvd, storage_, cached_path_, s.decode);
    if (gpu_) {  // an append (write_row = pos0 = the rows the mirror lacks), or a hook's rewrite of an earlier row
      for (const std::vector<float>* side : {&cache.k[l], &cache.v[l]}) {
        kernels::gpu_kv_track(side->data());
        kernels::gpu_kv_rows_changed(side->data(), s.write_row);
      }
    }
  }
}

void KvStore::commit(const RowBatch& batch) {
  for (const SeqRows& s : batch.seqs()) s.cache->n = std::max(s.cache->n, s.pos0 + s.n);
}

void forget_device_kv(const KvCache& cache) {
  for (const auto* side : {&cache.k, &cache.v})
    for (const std::vector<float>& layer : *side)
      if (!layer.empty()) kernels::gpu_kv_forget(layer.data());
}

}  // namespace kvconf::engine
