// Private to kernels/cuda (and its unit test): the host-side bookkeeping of the device KV mirrors — for each host
// K or V cache buffer an engine opted in (gpu_kv_track), how many rows the device copy holds, which device rows are
// stale, and the device allocation. Pure C++ (no CUDA): the table plans uploads, the CUDA host wrapper
// (attention_host.cpp) executes them. docs/GPU.md "Device KV mirror".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kvconf/numerics/format.hpp"

namespace kvconf::kernels::cuda {

// What a mirror is for: a host buffer of `capacity` rows of `row_elems` values, stored on the device in `format`.
struct KvMirrorShape {
  std::size_t capacity = 0;   // rows
  std::size_t row_elems = 0;  // values per row (n_kv_heads · head_dim)
  Format format = Format::fp16;
  bool operator==(const KvMirrorShape&) const = default;
};

// What to do before a launch reads host rows [0, n_kv) through the mirror. Device state it establishes (with
// commit): rows [0, n_kv) equal the host's, rows [n_kv, capacity) are NaN.
struct KvSyncPlan {
  std::uint64_t generation = 0;  // the mirror's life: a new one after forget or a shape change
  std::shared_ptr<void> device;  // the device allocation (capacity rows); null: allocate and fill with NaN
  std::size_t upload_begin = 0;  // host rows [upload_begin, upload_end) to copy to the device
  std::size_t upload_end = 0;
  std::size_t poison_begin = 0;  // device rows [poison_begin, poison_end) to refill with NaN (stale rows past
  std::size_t poison_end = 0;    // n_kv left by an earlier, longer call or a rewrite)
  std::size_t upload_rows() const { return upload_end - upload_begin; }
};

// The mirrors by host address. Thread-safe (one mutex). Opt-in: untracked buffers get no plan (the wrapper then
// uploads every filled row, as it does for any caller that never promised to report rewrites).
class KvMirrorTable {
 public:
  // Opt in: `host` is a KV cache buffer whose owner reports rewrites (rows_changed) and frees (forget).
  void track(const void* host);
  bool tracked(const void* host) const;
  // Drop the mirror (the buffer is freed, reallocated or wholly rewritten); its device memory is released once no
  // in-flight plan holds it. A later track at the same address starts from zero.
  void forget(const void* host);
  // Host rows from first_row on were rewritten: the device copy holds at most rows [0, first_row).
  void rows_changed(const void* host, std::size_t first_row);

  // The plan for a call that reads rows [0, n_kv) of a tracked buffer, whose last n_new rows [n_kv − n_new, n_kv)
  // the caller may just have written (they are uploaded whatever the record says: a call's own rows are never
  // trusted). nullopt when `host` is not tracked. A shape different from the mirror's starts a new generation.
  std::optional<KvSyncPlan> plan(const void* host, const KvMirrorShape& shape, std::size_t n_kv, std::size_t n_new);
  // The plan was carried out: the device (its allocation `device`) now holds rows [0, n_kv), NaN beyond. Ignored
  // when the mirror was forgotten or restarted since the plan (generation differs).
  void commit(const void* host, std::uint64_t generation, std::shared_ptr<void> device, std::size_t n_kv);

  std::size_t size() const;
  // The rows the device copy holds ([0, synced)), or nullopt when untracked; for tests and reports.
  std::optional<std::size_t> synced(const void* host) const;

 private:
  struct Entry {
    bool shaped = false;  // shape set by a first plan
    KvMirrorShape shape;
    std::uint64_t generation = 0;
    std::size_t synced = 0;  // device rows [0, synced) equal the host's
    std::size_t high = 0;    // device rows [high, capacity) are NaN; [synced, high) stale
    std::shared_ptr<void> device;
  };
  mutable std::mutex mu_;
  std::unordered_map<const void*, Entry> entries_;
  std::uint64_t next_generation_ = 1;
};

// The process-wide table behind gpu_kv_track / gpu_kv_forget / gpu_kv_rows_changed and the CUDA wrapper.
KvMirrorTable& kv_mirrors();

// Adds one cache buffer's host-to-device bytes of one call to gpu_kv_stats() (mirrored: through a mirror).
void count_kv_upload(std::uint64_t bytes, bool mirrored);

}  // namespace kvconf::kernels::cuda
