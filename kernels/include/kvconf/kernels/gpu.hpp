// The GPU backends' entry points: whether a CUDA device can run the GPU kernels (and why not), the device's
// name, and the registrations of the CUDA attention kernels (kernels/cuda) and the cuBLAS projections
// (kernels/cublas). GPU kernels always register, whatever the machine (names are stable, so test tables,
// filters and golden keys do not depend on it); where no device can run them, their supports() returns
// gpu_unavailable()'s reason, which the suites turn into GTEST_SKIP. docs/GPU.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kvconf/kernels/registry.hpp"

namespace kvconf::kernels {

// Why the GPU kernels cannot run here, or nullopt when they can: "built without CUDA (KVCONF_ENABLE_CUDA=OFF)",
// "no CUDA device: cudaGetDeviceCount returned cudaErrorNoDevice (...)", or a device below compute capability 8.0.
// Evaluated once per process (kernels/cuda/device.cpp).
std::optional<std::string> gpu_unavailable();

// Name of CUDA device 0 ("NVIDIA H100 80GB HBM3"), for reports and per-device golden keys; "" when
// gpu_unavailable() gives a reason.
std::string gpu_device_name();

// The CUDA attention kernels cuda.attn.{simple,flash2,splitkv,invariant}.{f16,f32} (kernels/cuda).
void register_cuda_kernels(Registry& r);

// The cuBLAS projections and the fixed-order CUDA GEMM (kernels/cublas).
void register_cublas_kernels(Registry& r);

// Device KV mirrors (docs/GPU.md "Device KV mirror"). The CUDA attention kernels keep a device copy of a K or V
// cache buffer between calls and upload only the rows it lacks, for buffers whose owner opted in with
// gpu_kv_track and keeps this contract: every write other than an in-order append of the rows a call reads last
// (rows [n_kv - n_q, n_kv), always re-uploaded) is reported with gpu_kv_rows_changed, and gpu_kv_forget is called
// before the buffer is freed, reallocated or reused for other contents. Untracked buffers are uploaded whole on
// every call. All are cheap no-ops for a pointer without a mirror, and without CUDA.
void gpu_kv_track(const void* host_ptr);
// Drops the mirror of host_ptr (buffer freed or rewritten); a later buffer at the same address starts from zero.
void gpu_kv_forget(const void* host_ptr);
// Rows from first_row on were rewritten: the device copy is trusted for rows [0, first_row) at most.
void gpu_kv_rows_changed(const void* host_ptr, std::size_t first_row);

struct GpuKvStats {
  std::uint64_t bytes_uploaded = 0;    // K/V bytes copied host-to-device by the attention kernels, since start
  std::uint64_t mirrored_buffers = 0;  // cache buffers served through a mirror (one K or V buffer of one call)
  std::uint64_t full_buffers = 0;      // cache buffers uploaded whole (untracked)
  std::size_t mirrors = 0;             // tracked buffers now
};
GpuKvStats gpu_kv_stats();

// A registry holding every GPU kernel: register_cuda_kernels, then register_cublas_kernels
// (library kvconf::kernels_gpu; what the Cuda/ suites instantiate over).
Registry gpu_registry();

}  // namespace kvconf::kernels
