// The host side of the CUDA attention kernels (built with CUDA only; nocuda.cpp stands in without it): checks the
// call, brings the cache rows [0, n_kv) to the device (fp16 bit patterns or floats) — for a buffer the engine
// tracks (gpu_kv_track), through its device mirror, uploading only the rows the mirror lacks (kv_mirror.hpp); for
// any other buffer, a fresh device copy of every filled row — with the unused rows [n_kv, capacity) NaN on the
// device (so a kernel that read them would poison its output), uploads q, computes each query row's visible keys
// with the CPU kernels' rule, runs the kernel's launch step on the default stream, synchronises, and downloads
// the output. Synchronous and single-stream: results are deterministic run to run, mirror or not.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_common.hpp"  // kernels/cpu: check_call, visible_keys
#include "cuda_attention.hpp"
#include "device_call.hpp"
#include "kv_mirror.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::kernels::cuda {
namespace {

// Host staging of n values (floats holding values of f) in the device storage format: fp16 bit patterns or floats.
std::vector<unsigned char> stage(Format f, const float* x, std::size_t n) {
  std::vector<unsigned char> b;
  if (f == Format::fp16) {
    b.resize(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
      const auto bits = static_cast<std::uint16_t>(encode(Format::fp16, static_cast<double>(x[i])));
      std::memcpy(b.data() + 2 * i, &bits, 2);
    }
  } else {
    b.resize(n * 4);
    std::memcpy(b.data(), x, n * 4);
  }
  return b;
}

std::shared_ptr<void> dev_alloc(std::size_t bytes, const char* who) {
  void* p = nullptr;
  if (bytes > 0) check(cudaMalloc(&p, bytes), who, "cudaMalloc");
  return std::shared_ptr<void>(p, [](void* q) {
    if (q) cudaFree(q);
  });
}

// The device copy of one cache buffer `host` (cap rows of `row` values) for a call reading rows [0, n_kv) whose
// last n_new rows it has just written: on return, device rows [0, n_kv) equal the host's in format f and rows
// [n_kv, cap) are NaN (all-ones bytes are NaN in fp16, 0xFFFF, and fp32, 0xFFFFFFFF). A tracked buffer's mirror
// is kept between calls (only the rows its plan names are copied); an untracked buffer gets a fresh allocation
// that the returned pointer owns. Every byte copied is counted in gpu_kv_stats().
std::shared_ptr<void> device_cache(const char* who, Format f, const float* host, std::size_t cap, std::size_t row,
                                   std::size_t n_kv, std::size_t n_new, const char* what) {
  const std::size_t row_bytes = row * (f == Format::fp16 ? 2 : 4);
  KvMirrorTable& table = kv_mirrors();
  const std::optional<KvSyncPlan> plan = table.plan(host, KvMirrorShape{cap, row, f}, n_kv, n_new);
  const auto upload = [&](void* dev, std::size_t first, std::size_t end) {
    if (end <= first) return;
    const auto staged = stage(f, host + first * row, (end - first) * row);
    check(cudaMemcpy(static_cast<unsigned char*>(dev) + first * row_bytes, staged.data(), staged.size(),
                     cudaMemcpyHostToDevice),
          who, what);
  };
  if (!plan) {
    std::shared_ptr<void> mem = dev_alloc(cap * row_bytes, who);
    check(cudaMemset(mem.get(), 0xFF, cap * row_bytes), who, "cudaMemset");
    upload(mem.get(), 0, n_kv);
    count_kv_upload(n_kv * row_bytes, false);
    return mem;
  }
  try {
    std::shared_ptr<void> mem = plan->device;
    if (!mem) {  // a new mirror: allocated at capacity, all NaN
      mem = dev_alloc(cap * row_bytes, who);
      check(cudaMemset(mem.get(), 0xFF, cap * row_bytes), who, "cudaMemset");
    }
    if (plan->poison_end > plan->poison_begin)  // stale rows past n_kv back to NaN
      check(cudaMemset(static_cast<unsigned char*>(mem.get()) + plan->poison_begin * row_bytes, 0xFF,
                       (plan->poison_end - plan->poison_begin) * row_bytes),
            who, "cudaMemset");
    upload(mem.get(), plan->upload_begin, plan->upload_end);
    count_kv_upload(plan->upload_rows() * row_bytes, true);
    table.commit(host, plan->generation, mem, n_kv);
    return mem;
  } catch (...) {
    table.forget(host);  // the device copy is in an unknown state: start over next time
    throw;
  }
}

}  // namespace

void run_attention(const char* who, LaunchFn launch, Format f, const AttentionCall& c, std::span<const float> q,
                   std::span<const float> k_cache, std::span<const float> v_cache, std::span<float> out) {
  if (f != Format::fp16 && f != Format::fp32)
    throw std::invalid_argument(std::string(who) + ": format must be fp16 or fp32");
  const cpu::attn::Dims D = cpu::attn::check_call(who, c, q.size(), k_cache.size(), v_cache.size(), out.size());
  const bool f16 = f == Format::fp16;
  const std::size_t es = f16 ? 2 : 4;  // bytes per element on the device
  const std::size_t krow = D.kv_heads * D.d, vrow = D.kv_heads * D.dv;

  DevBuf dq(D.n_q * D.heads * D.d * es, who), dout(D.n_q * D.heads * D.dv * es, who);
  // (cap, H_kv, d) and (cap, H_kv, d_v) on the device: rows [0, n_kv) the host's, [n_kv, cap) NaN.
  const std::shared_ptr<void> dk = device_cache(who, f, k_cache.data(), D.cap, krow, D.n_kv, D.n_q, "cudaMemcpy k");
  const std::shared_ptr<void> dv = device_cache(who, f, v_cache.data(), D.cap, vrow, D.n_kv, D.n_q, "cudaMemcpy v");
  const auto hq = stage(f, q.data(), q.size());
  check(cudaMemcpy(dq.get(), hq.data(), hq.size(), cudaMemcpyHostToDevice), who, "cudaMemcpy q");

  std::vector<int> lo(D.n_q), hi(D.n_q);  // (n_q) visible keys per row, as the CPU kernels and the oracle define them
  for (std::size_t i = 0; i < D.n_q; ++i) {
    const cpu::attn::KeyRange r = cpu::attn::visible_keys(c.params, D.n_kv, i);
    lo[i] = static_cast<int>(r.lo);
    hi[i] = static_cast<int>(r.hi);
  }
  DevBuf dlo(D.n_q * sizeof(int), who), dhi(D.n_q * sizeof(int), who);
  check(cudaMemcpy(dlo.get(), lo.data(), D.n_q * sizeof(int), cudaMemcpyHostToDevice), who, "cudaMemcpy key_lo");
  check(cudaMemcpy(dhi.get(), hi.data(), D.n_q * sizeof(int), cudaMemcpyHostToDevice), who, "cudaMemcpy key_hi");

  DeviceCall call;
  call.f16 = f16;
  call.who = who;
  call.n_q = D.n_q;
  call.n_kv = D.n_kv;
  call.heads = D.heads;
  call.dv = D.dv;
  DevAttn& a = call.a;
  a.q = dq.get();
  a.k = dk.get();
  a.v = dv.get();
  a.out = dout.get();
  a.key_lo = dlo.as<int>();
  a.key_hi = dhi.as<int>();
  a.n_q = static_cast<int>(D.n_q);
  a.heads = static_cast<int>(D.heads);
  a.kv_heads = static_cast<int>(D.kv_heads);
  a.d = static_cast<int>(D.d);
  a.dv = static_cast<int>(D.dv);
  a.scale = static_cast<float>(c.params.scale);
  a.softcap = static_cast<float>(c.params.softcap);
  a.bc = static_cast<int>(flash_bc(D.d));

  // The kernel's launch step (its description file) sets its plan's fields, takes scratch and launches.
  if (launch == nullptr) throw std::logic_error(std::string(who) + ": no launch step");
  check(static_cast<cudaError_t>(launch(call, c)), who, "kernel launch");
  check(cudaDeviceSynchronize(), who, "kernel");  // before the scratch (call.buffers) is freed

  std::vector<unsigned char> ho(out.size() * es);
  check(cudaMemcpy(ho.data(), dout.get(), ho.size(), cudaMemcpyDeviceToHost), who, "cudaMemcpy out");
  if (f16) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::uint16_t bits = 0;
      std::memcpy(&bits, ho.data() + 2 * i, 2);
      out[i] = static_cast<float>(decode(Format::fp16, bits));
    }
  } else {
    std::memcpy(out.data(), ho.data(), ho.size());
  }
}

}  // namespace kvconf::kernels::cuda
