// Device-resident weights of the GPU GEMMs (cublas.hpp): one device copy per (host pointer, element count,
// device format), checked by a 64-bit checksum of the host values unless pinned, evicted least recently used
// beyond KVCONF_GPU_WEIGHT_CACHE_MB; and the host fp16 conversions the uploads use.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(KVCONF_HAVE_F16C)
#include <immintrin.h>
#endif

#include "gemm_gpu_state.hpp"
#include "kvconf/kernels/cublas.hpp"

namespace kvconf::kernels {
namespace gpu_gemm {
namespace {

struct Entry {
  const float* host = nullptr;
  std::size_t count = 0;
  Format fmt = Format::fp16;
  std::uint64_t checksum = 0;
  bool pinned = false;
  void* device = nullptr;
  std::size_t bytes = 0;
  std::uint64_t last_use = 0;
};

struct Cache {
  std::vector<Entry> entries;
  std::vector<std::pair<const float*, std::size_t>> pinned;  // pin_gpu_weights ranges, once per pin not yet unpinned
  std::uint64_t clock = 0;
  std::size_t uploads = 0, hits = 0;
};

Cache& cache() {
  static Cache c;
  return c;
}

// 64-bit checksum of the float bit patterns: four interleaved multiply-xor lanes (order-sensitive), mixed.
std::uint64_t checksum(std::span<const float> v) {
  std::uint64_t h[4] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull, 0x2545f4914f6cdd1dull};
  constexpr std::uint64_t kMul = 0x100000001b3ull;
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (int l = 0; l < 4; ++l) {
      std::uint32_t b;
      std::memcpy(&b, &v[i + l], 4);
      h[l] = (h[l] ^ b) * kMul;
    }
  for (; i < v.size(); ++i) {
    std::uint32_t b;
    std::memcpy(&b, &v[i], 4);
    h[0] = (h[0] ^ b) * kMul;
  }
  std::uint64_t z = h[0] ^ (h[1] * 31) ^ (h[2] * 961) ^ (h[3] * 29791) ^ v.size();
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool is_pinned(const float* p, std::size_t count) {
  for (const auto& [hp, n] : cache().pinned)
    if (p >= hp && p + count <= hp + n) return true;
  return false;
}

std::size_t budget_bytes() {
  std::size_t mb = 4096;
  if (const char* s = std::getenv("KVCONF_GPU_WEIGHT_CACHE_MB"); s != nullptr && *s != '\0')
    mb = static_cast<std::size_t>(std::strtoull(s, nullptr, 10));
  return mb << 20;
}

void free_entry(Entry& e) {
  if (e.device != nullptr) cudaFree(e.device);  // errors ignored: freeing during teardown
  e.device = nullptr;
}

// Evicts unpinned entries, least recently used first, until `incoming` more bytes fit the budget (or none left).
void make_room(std::size_t incoming) {
  auto& es = cache().entries;
  const std::size_t budget = budget_bytes();
  for (;;) {
    std::size_t held = 0;
    for (const Entry& e : es)
      if (!e.pinned) held += e.bytes;
    if (held + incoming <= budget) return;
    auto victim = es.end();
    for (auto it = es.begin(); it != es.end(); ++it)
      if (!it->pinned && (victim == es.end() || it->last_use < victim->last_use)) victim = it;
    if (victim == es.end()) return;
    free_entry(*victim);
    es.erase(victim);
  }
}

void upload(Entry& e, std::span<const float> w) {
  if (e.fmt == Format::fp16) {
    std::vector<std::uint16_t> bits(w.size());
    to_fp16_bits(w, bits.data());
    check_cuda(cudaMemcpy(e.device, bits.data(), e.bytes, cudaMemcpyHostToDevice), "weight upload");
  } else {
    check_cuda(cudaMemcpy(e.device, w.data(), e.bytes, cudaMemcpyHostToDevice), "weight upload");
  }
  // cudaMemcpy from pageable memory may return before the DMA lands: finish it before any GEMM reads it.
  check_cuda(cudaDeviceSynchronize(), "weight upload");
  ++cache().uploads;
}

}  // namespace

void to_fp16_bits(std::span<const float> v, std::uint16_t* out) {
  std::size_t i = 0;
#if defined(KVCONF_HAVE_F16C)
  for (; i + 8 <= v.size(); i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(v.data() + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < v.size(); ++i) out[i] = static_cast<std::uint16_t>(encode(Format::fp16, static_cast<double>(v[i])));
}

void from_fp16_bits(const std::uint16_t* in, std::span<float> out) {
  std::size_t i = 0;
#if defined(KVCONF_HAVE_F16C)
  for (; i + 8 <= out.size(); i += 8)
    _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
#endif
  for (; i < out.size(); ++i) out[i] = static_cast<float>(decode(Format::fp16, in[i]));
}

const void* device_weights(std::span<const float> w, Format fmt) {
  if (fmt != Format::fp16 && fmt != Format::fp32)
    throw std::invalid_argument("kvconf cuda.gemm: device weights are fp16 or fp32");
  Cache& c = cache();
  const std::uint64_t now = ++c.clock;
  const bool pinned = is_pinned(w.data(), w.size());
  for (Entry& e : c.entries) {
    if (e.host != w.data() || e.count != w.size() || e.fmt != fmt) continue;
    e.last_use = now;
    if (pinned) e.pinned = true;  // pinned after its first upload: never evicted from now on
    if (e.pinned) {
      ++c.hits;
      return e.device;
    }
    const std::uint64_t h = checksum(w);
    if (h == e.checksum) {
      ++c.hits;
      return e.device;
    }
    e.checksum = h;  // same buffer, new contents: upload into the same device allocation
    upload(e, w);
    return e.device;
  }
  Entry e;
  e.host = w.data();
  e.count = w.size();
  e.fmt = fmt;
  e.pinned = pinned;
  e.checksum = pinned ? 0 : checksum(w);
  e.bytes = std::max<std::size_t>(1, w.size() * (fmt == Format::fp16 ? 2 : 4));
  e.last_use = now;
  if (!pinned) make_room(e.bytes);
  if (cudaMalloc(&e.device, e.bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the out-of-memory error, evict every unpinned copy and retry once
    for (Entry& old : c.entries)
      if (!old.pinned) free_entry(old);
    std::erase_if(c.entries, [](const Entry& x) { return x.device == nullptr; });
    check_cuda(cudaMalloc(&e.device, e.bytes), "weight allocation");
  }
  try {
    upload(e, w);
  } catch (...) {
    free_entry(e);
    throw;
  }
  c.entries.push_back(e);
  return e.device;
}

}  // namespace gpu_gemm

void drop_gpu_weight_cache() {
  const std::lock_guard<std::mutex> lock(gpu_gemm::gpu_mutex());
  auto& c = gpu_gemm::cache();
  for (auto& e : c.entries) gpu_gemm::free_entry(e);
  c.entries.clear();
  c.pinned.clear();
  c.uploads = c.hits = 0;
}

GpuWeightCacheStats gpu_weight_cache_stats() {
  const std::lock_guard<std::mutex> lock(gpu_gemm::gpu_mutex());
  const auto& c = gpu_gemm::cache();
  GpuWeightCacheStats s;
  s.entries = c.entries.size();
  for (const auto& e : c.entries) s.bytes += e.bytes;
  s.uploads = c.uploads;
  s.hits = c.hits;
  return s;
}

void pin_gpu_weights(const float* host, std::size_t count) {
  const std::lock_guard<std::mutex> lock(gpu_gemm::gpu_mutex());
  gpu_gemm::cache().pinned.emplace_back(host, count);
}

void unpin_gpu_weights(const float* host, std::size_t count) {
  const std::lock_guard<std::mutex> lock(gpu_gemm::gpu_mutex());
  auto& c = gpu_gemm::cache();
  const auto it = std::find(c.pinned.begin(), c.pinned.end(), std::make_pair(host, count));
  if (it == c.pinned.end()) return;
  c.pinned.erase(it);
  if (std::find(c.pinned.begin(), c.pinned.end(), std::make_pair(host, count)) != c.pinned.end()) return;
  // The last pin is gone: the host buffer may now be freed and its address reused, so its device copies go too.
  for (auto& e : c.entries)
    if (e.host >= host && e.host + e.count <= host + count && !gpu_gemm::is_pinned(e.host, e.count))
      gpu_gemm::free_entry(e);
  std::erase_if(c.entries, [](const auto& x) { return x.device == nullptr; });
}

}  // namespace kvconf::kernels
