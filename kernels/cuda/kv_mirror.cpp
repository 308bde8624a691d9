// The device KV mirrors' host-side bookkeeping (kv_mirror.hpp) and the public entry points gpu_kv_track,
// gpu_kv_forget, gpu_kv_rows_changed, gpu_kv_stats (kvconf/kernels/gpu.hpp). Built with and without CUDA: without
// it nothing ever plans an upload, so the table only records what the engine declares.
#include "kv_mirror.hpp"

#include <algorithm>
#include <atomic>

#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels {
namespace cuda {

void KvMirrorTable::track(const void* host) {
  if (!host) return;
  std::lock_guard<std::mutex> lock(mu_);
  entries_.try_emplace(host);  // an existing mirror is kept
}

bool KvMirrorTable::tracked(const void* host) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.count(host) != 0;
}

void KvMirrorTable::forget(const void* host) {
  std::shared_ptr<void> release;  // freed after the lock is dropped
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = entries_.find(host);
    if (it == entries_.end()) return;
    release = std::move(it->second.device);
    entries_.erase(it);
  }
}

void KvMirrorTable::rows_changed(const void* host, std::size_t first_row) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(host);
  if (it == entries_.end()) return;
  it->second.synced = std::min(it->second.synced, first_row);
}

std::optional<KvSyncPlan> KvMirrorTable::plan(const void* host, const KvMirrorShape& shape, std::size_t n_kv,
                                              std::size_t n_new) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(host);
  if (it == entries_.end()) return std::nullopt;
  Entry& e = it->second;
  if (!e.shaped || !(e.shape == shape)) {  // first use, or another capacity / row width / format: start over
    e = Entry{};
    e.shaped = true;
    e.shape = shape;
    e.generation = next_generation_++;
  }
  n_kv = std::min(n_kv, shape.capacity);
  n_new = std::min(n_new, n_kv);
  KvSyncPlan p;
  p.generation = e.generation;
  p.device = e.device;
  const std::size_t synced = p.device ? e.synced : 0;  // no allocation yet: nothing on the device
  const std::size_t high = p.device ? e.high : 0;
  p.upload_begin = std::min(synced, n_kv - n_new);
  p.upload_end = n_kv;
  if (high > n_kv) {
    p.poison_begin = n_kv;
    p.poison_end = high;
  } else {
    p.poison_begin = p.poison_end = n_kv;
  }
  // Rows [upload_begin, n_kv) may hold stale device data too; they are overwritten by the upload.
  return p;
}

void KvMirrorTable::commit(const void* host, std::uint64_t generation, std::shared_ptr<void> device, std::size_t n_kv) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(host);
  if (it == entries_.end() || it->second.generation != generation) return;
  Entry& e = it->second;
  e.device = std::move(device);
  e.synced = e.high = std::min(n_kv, e.shape.capacity);
}

std::size_t KvMirrorTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::optional<std::size_t> KvMirrorTable::synced(const void* host) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(host);
  if (it == entries_.end()) return std::nullopt;
  return it->second.device ? it->second.synced : 0;
}

KvMirrorTable& kv_mirrors() {
  static KvMirrorTable t;
  return t;
}

namespace {
std::atomic<std::uint64_t> g_bytes{0}, g_mirrored{0}, g_full{0};
}  // namespace

void count_kv_upload(std::uint64_t bytes, bool mirrored) {
  g_bytes += bytes;
  (mirrored ? g_mirrored : g_full) += 1;
}

}  // namespace cuda

void gpu_kv_track(const void* host_ptr) { cuda::kv_mirrors().track(host_ptr); }
void gpu_kv_forget(const void* host_ptr) { cuda::kv_mirrors().forget(host_ptr); }
void gpu_kv_rows_changed(const void* host_ptr, std::size_t first_row) {
  cuda::kv_mirrors().rows_changed(host_ptr, first_row);
}

GpuKvStats gpu_kv_stats() {
  GpuKvStats s;
  s.bytes_uploaded = cuda::g_bytes.load();
  s.mirrored_buffers = cuda::g_mirrored.load();
  s.full_buffers = cuda::g_full.load();
  s.mirrors = cuda::kv_mirrors().size();
  return s;
}

}  // namespace kvconf::kernels
