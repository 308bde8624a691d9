// Private to kernels/cuda, CUDA builds only: the uploaded call that run_attention (attention_host.cpp) hands a
// kernel's launch step (attention_<stem>.cpp): the device arguments (DevAttn, filled by run_attention with the
// buffers, dimensions and visible key ranges), the call's sizes, and device scratch that lives until run_attention
// has synchronised after the launch.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_launch.hpp"

namespace kvconf::kernels::cuda {

inline void check(cudaError_t e, const char* who, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(who) + ": " + what + " failed: " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

// A device allocation freed on scope exit.
class DevBuf {
 public:
  DevBuf(std::size_t bytes, const char* who) {
    if (bytes > 0) check(cudaMalloc(&p_, bytes), who, "cudaMalloc");
  }
  ~DevBuf() {
    if (p_) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};

struct DeviceCall {
  DevAttn a;
  bool f16 = false;
  const char* who = "";
  std::size_t n_q = 0, n_kv = 0, heads = 0, dv = 0;
  // `floats` fp32 values of device scratch, freed when the call is done (after the synchronisation).
  float* scratch(std::size_t floats) {
    buffers.push_back(std::make_unique<DevBuf>(floats * sizeof(float), who));
    return buffers.back()->as<float>();
  }
  std::vector<std::unique_ptr<DevBuf>> buffers;
};

}  // namespace kvconf::kernels::cuda
