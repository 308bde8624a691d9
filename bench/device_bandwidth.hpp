// Memory-bandwidth probes for the decode benchmark's roofline: the device's measured copy bandwidth (cudaMemcpy
// device-to-device, timed with CUDA events) and, for CPU profiles, the host's (std::memcpy). Bandwidth counts the
// bytes read plus the bytes written (2 × the copy size), the convention of CUDA's bandwidthTest sample.
// CUDA build: device_bandwidth_cuda.cpp; without CUDA: device_bandwidth_stub.cpp (the device probe gives a reason).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace kvconf::bench {

struct Bandwidth {
  double bytes_per_s = 0.0;  // (read + written) bytes per second, the best of `reps` timed copies
  std::size_t copy_bytes = 0;
  int reps = 0;
  std::string what;  // "cudaMemcpy D2D on NVIDIA H100 80GB HBM3", "host memcpy"
};

// Why the device probe cannot run here (kernels::gpu_unavailable()'s reason, "built without CUDA", or a failed
// allocation), or nullopt.
std::optional<std::string> device_bandwidth_unavailable();

// Copies `bytes` device to device `reps` times after one warm-up copy; throws std::runtime_error with the reason when
// device_bandwidth_unavailable() or a CUDA call fails.
Bandwidth measure_device_copy_bandwidth(std::size_t bytes = std::size_t{1} << 30, int reps = 10);

// The same with std::memcpy between two host buffers (for CPU profiles).
Bandwidth measure_host_copy_bandwidth(std::size_t bytes = std::size_t{1} << 28, int reps = 5);

}  // namespace kvconf::bench
