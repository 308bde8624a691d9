// The GPU GEMMs on a CUDA build: device properties (the tensor-core parameters), one cuBLAS handle with deterministic
// settings, and run(): activations uploaded per call, weights from the device-resident cache, y copied back.
//
// cuBLAS is called as a Linear layer calls it (PyTorch addmm, vLLM, HF): row-major y (m, n) = x (m, k)·Wᵀ is
// column-major yᵀ (n, m) = W (n, k)·xᵀ, i.e. cublasGemmEx(OP_T, OP_N, n, m, k, W, ld k, x, ld k, y, ld n).
// M = 1 (decode) and M = n (prefill) are passed exactly as given: no padding of M, so cuBLAS's heuristic picks
// whatever kernel (GEMV, split-K, tensor-core GEMM) it picks for that shape.
//
// Determinism: CUBLAS_WORKSPACE_CONFIG=:4096:8 is set (setenv, unless the user set it) before the handle is
// created; one handle, one stream, cublasSetMathMode(CUBLAS_DEFAULT_MATH) (which allows cuBLAS's reduced-
// precision split-K reduction for fp16 outputs, as PyTorch's default does; see docs/GPU.md "Projections").
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm_launch.hpp"
#include "gemm_gpu_backend.hpp"
#include "gemm_gpu_state.hpp"
#include "kvconf/kernels/cublas.hpp"
#include "kvconf/kernels/gpu.hpp"

namespace kvconf::kernels {
namespace gpu_gemm {
namespace {

// Device 0's compute capability and name, once per process (for the tensor-core parameters); the skip reason
// itself is gpu_unavailable()'s (kernels/cuda/device.cpp), shared with the CUDA attention kernels.
struct Probe {
  int major = 0, minor = 0;  // 0.0: no usable device
  std::string name;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    if (gpu_unavailable()) return r;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
      cudaGetLastError();
      return r;
    }
    r.major = prop.major;
    r.minor = prop.minor;
    r.name = prop.name;
    return r;
  }();
  return p;
}

const char* cublas_error(cublasStatus_t s) { return cublasGetStatusString(s); }

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("kvconf cuda.gemm: ") + what + ": " + cublas_error(s));
}

// A grow-only device buffer.
struct DeviceBuffer {
  void* p = nullptr;
  std::size_t bytes = 0;
  void* get(std::size_t need) {
    if (need > bytes) {
      if (p != nullptr) cudaFree(p);
      p = nullptr;
      bytes = 0;
      check_cuda(cudaMalloc(&p, need), "scratch allocation");
      bytes = need;
    }
    return p;
  }
};

struct Context {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  DeviceBuffer x, y;
};

// Created on first use, under gpu_mutex(); lives until process exit (never destroyed: the CUDA runtime may be
// torn down first).
Context& context() {
  static Context* c = nullptr;
  if (c != nullptr) return *c;
  // Deterministic cuBLAS workspaces (cuBLAS docs, "Results reproducibility"): must be in the environment
  // before the handle exists. A value the user set is kept.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  auto* n = new Context;
  check_cuda(cudaSetDevice(0), "cudaSetDevice(0)");
  check_cuda(cudaStreamCreate(&n->stream), "stream creation");  // blocking: ordered after stream 0 work
  check_cublas(cublasCreate(&n->handle), "cublasCreate");
  check_cublas(cublasSetStream(n->handle, n->stream), "cublasSetStream");
  check_cublas(cublasSetMathMode(n->handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode(CUBLAS_DEFAULT_MATH)");
  check_cublas(cublasSetPointerMode(n->handle, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  c = n;
  return *c;
}

const char* which_name(Which w) {
  switch (w) {
    case Which::cublas_f16_acc32:
      return "cuda.gemm.cublas.f16.acc32";
    case Which::cublas_f16_acc16:
      return "cuda.gemm.cublas.f16.acc16";
    case Which::cublas_f32:
      return "cuda.gemm.cublas.f32";
    case Which::fixed_f16:
      return "cuda.gemm.fixed.f16";
    case Which::rowdot_f16:
      return "cuda.gemm.rowdot.f32acc";
  }
  return "cuda.gemm.?";
}

// cublasGemmEx for row-major y (m, n) = x (m, k)·Wᵀ with W (n, k): column-major yᵀ = op_T(W)·op_N(xᵀ).
void cublas_linear(Context& ctx, Which which, const void* dw, const void* dx, void* dy, int m, int n, int k) {
  const bool f32 = which == Which::cublas_f32;
  const cudaDataType_t t = f32 ? CUDA_R_32F : CUDA_R_16F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (which == Which::cublas_f16_acc16) compute = CUBLAS_COMPUTE_16F;
  if (f32) compute = CUBLAS_COMPUTE_32F_PEDANTIC;  // fp32 FMAs, never TF32 tensor cores
  // alpha = 1, beta = 0 in the compute type's scalar type (fp16 bits for COMPUTE_16F).
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const std::uint16_t alpha16 = 0x3c00, beta16 = 0x0000;
  const bool h = compute == CUBLAS_COMPUTE_16F;
  check_cublas(cublasGemmEx(ctx.handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k,
                            h ? static_cast<const void*>(&alpha16) : &alpha32, dw, t, k, dx, t, k,
                            h ? static_cast<const void*>(&beta16) : &beta32, dy, t, n, compute, CUBLAS_GEMM_DEFAULT),
               which_name(which));
}

}  // namespace

std::mutex& gpu_mutex() {
  static std::mutex m;
  return m;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("kvconf cuda.gemm: ") + what + ": " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}

Reason unavailable() { return gpu_unavailable(); }

void run(Which which, const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
  const char* name = which_name(which);
  if (x.size() != s.m * s.k || w.size() != s.n * s.k || y.size() != s.m * s.n)
    throw std::invalid_argument(std::string(name) + ": x, w, y must hold m·k, n·k, m·n values (m=" +
                                std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + ")");
  if (auto why = unavailable()) throw std::runtime_error(std::string(name) + ": " + *why);
  if (s.m == 0 || s.n == 0) return;
  if (s.k == 0) {  // an empty reduction is +0 (numerics::dot); cuBLAS is not asked about k = 0
    std::fill(y.begin(), y.end(), 0.0f);
    return;
  }
  if (s.m > INT_MAX || s.n > INT_MAX || s.k > INT_MAX)
    throw std::invalid_argument(std::string(name) + ": m, n, k must fit cuBLAS's int dimensions");

  const std::lock_guard<std::mutex> lock(gpu_mutex());
  Context& ctx = context();
  const Format dev = which == Which::cublas_f32 ? Format::fp32 : Format::fp16;
  const std::size_t esz = dev == Format::fp16 ? 2 : 4;
  const void* dw = device_weights(w, dev);
  void* dx = ctx.x.get(x.size() * esz);
  void* dy = ctx.y.get(y.size() * esz);

  std::vector<std::uint16_t> xh, yh;  // fp16 staging (host)
  if (dev == Format::fp16) {
    xh.resize(x.size());
    to_fp16_bits(x, xh.data());
    check_cuda(cudaMemcpyAsync(dx, xh.data(), x.size() * esz, cudaMemcpyHostToDevice, ctx.stream), "x upload");
  } else {
    check_cuda(cudaMemcpyAsync(dx, x.data(), x.size() * esz, cudaMemcpyHostToDevice, ctx.stream), "x upload");
  }

  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  const auto* x16 = static_cast<const std::uint16_t*>(dx);
  const auto* w16 = static_cast<const std::uint16_t*>(dw);
  auto* y16 = static_cast<std::uint16_t*>(dy);
  switch (which) {
    case Which::cublas_f16_acc32:
    case Which::cublas_f16_acc16:
    case Which::cublas_f32:
      cublas_linear(ctx, which, dw, dx, dy, m, n, k);
      break;
    case Which::fixed_f16:
      check_cuda(launch_gemm_fixed_f16(x16, w16, y16, s.m, s.n, s.k, ctx.stream), "gemm_fixed_f16 launch");
      break;
    case Which::rowdot_f16:
      check_cuda(launch_gemm_rowdot_f16(x16, w16, y16, s.m, s.n, s.k, ctx.stream), "gemm_rowdot_f16 launch");
      break;
  }

  if (dev == Format::fp16) {
    yh.resize(y.size());
    check_cuda(cudaMemcpyAsync(yh.data(), dy, y.size() * esz, cudaMemcpyDeviceToHost, ctx.stream), "y download");
    check_cuda(cudaStreamSynchronize(ctx.stream), name);
    from_fp16_bits(yh.data(), y);
  } else {
    check_cuda(cudaMemcpyAsync(y.data(), dy, y.size() * esz, cudaMemcpyDeviceToHost, ctx.stream), "y download");
    check_cuda(cudaStreamSynchronize(ctx.stream), name);
  }
}

}  // namespace gpu_gemm

TensorCoreParams gpu_tensor_core_params() {
  const auto& p = gpu_gemm::probe();
  if (p.major == 7) return TensorCoreParams::v100();
  if (p.major == 8) return TensorCoreParams::a100();
  return TensorCoreParams::h100();  // sm_90, sm_100 (B200, RZ variant: same k and neab) and no device
}

std::string gpu_tensor_core_model() {
  const auto& p = gpu_gemm::probe();
  if (p.major == 0)
    return "h100 (preset; no device: " + gpu_unavailable().value_or("device properties unavailable") + ")";
  const std::string sm = "sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " + p.name;
  if (p.major == 7) return "v100 (" + sm + ")";
  if (p.major == 8) return "a100 (" + sm + ")";
  return "h100 (" + sm + ")";
}

}  // namespace kvconf::kernels
