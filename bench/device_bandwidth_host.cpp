// The host side of the bandwidth probes: std::memcpy between two host buffers, the best of several timed copies.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "device_bandwidth.hpp"

namespace kvconf::bench {

Bandwidth measure_host_copy_bandwidth(std::size_t bytes, int reps) {
  std::vector<unsigned char> a(bytes, 1), b(bytes, 0);  // touched: no page faults inside the timed copies
  std::memcpy(b.data(), a.data(), bytes);               // warm-up
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(r % 2 ? a.data() : b.data(), r % 2 ? b.data() : a.data(), bytes);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return Bandwidth{2.0 * static_cast<double>(bytes) / best, bytes, reps, "host memcpy"};
}

}  // namespace kvconf::bench
