// The torch_ops calls, forwarded to the module of their device — kvconf_torch_ops (CPU) or kvconf_torch_cuda_ops
// (CUDA), both built from torch_ops.cpp — loaded on its first call: the paths are fixed at build time
// (KVCONF_TORCH_OPS_MODULE, KVCONF_TORCH_CUDA_OPS_MODULE; empty when this libtorch has no CUDA) unless
// KVCONF_TORCH_OPS / KVCONF_TORCH_CUDA_OPS name other files. A module that cannot be loaded makes its kernels
// unsupported with the loader's reason (never a crash).
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "torch_ops.hpp"

namespace kvconf::kernels::torch_ops {
namespace {

struct Loaded {
  const Table* table = nullptr;
  std::string error;
};

Loaded load(const char* env_name, const std::string& built) {
  Loaded r;
  const char* env = std::getenv(env_name);
  const std::string path = env && *env ? env : built;
  if (path.empty()) {
    r.error = "this libtorch has no CUDA (the CUDA torch kernels need a CUDA build of torch)";
    return r;
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    r.error = "cannot load the libtorch module " + path + ": " + (e ? e : "dlopen failed");
    return r;
  }
  using Fn = const Table* (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(h, "kvconf_torch_ops_table"));
  if (!fn) {
    r.error = path + " does not export kvconf_torch_ops_table";
    return r;
  }
  const Table* t = fn();
  if (!t || t->version != kTableVersion) {
    r.error = path + " has table version " + std::to_string(t ? t->version : -1) + ", expected " +
              std::to_string(kTableVersion);
    return r;
  }
  r.table = t;
  return r;
}

const Loaded& loaded(Device d) {
  if (d == Device::cuda) {
    static const Loaded l = load("KVCONF_TORCH_CUDA_OPS", KVCONF_TORCH_CUDA_OPS_MODULE);
    return l;
  }
  static const Loaded l = load("KVCONF_TORCH_OPS", KVCONF_TORCH_OPS_MODULE);
  return l;
}

const Table& table(Device d) {
  const Loaded& l = loaded(d);
  if (!l.table) throw std::runtime_error(l.error);
  return *l.table;
}

}  // namespace

std::optional<std::string> unavailable(Device d) {
  const Loaded& l = loaded(d);
  if (!l.table) return l.error;
  return l.table->unavailable();
}

std::string description(Device d) {
  const Loaded& l = loaded(d);
  return l.table ? l.table->description() : l.error;
}

std::optional<std::string> sdpa_choice(Device d, Sdpa forced, Format f, const AttentionCall& call, Calling how,
                                       std::string* why) {
  if (auto u = unavailable(d)) {
    if (why) *why = *u;
    return std::nullopt;
  }
  return table(d).sdpa_choice(forced, f, call, how, why);
}

void sdpa(Device d, Sdpa forced, Format f, Calling how, const AttentionCall& call, std::span<const float> q,
          std::span<const float> k_cache, std::span<const float> v_cache, std::span<float> out) {
  table(d).sdpa(forced, f, how, call, q, k_cache, v_cache, out);
}

std::optional<std::string> sdpa_batch_choice(Device d, Sdpa forced, Format f, std::span<const AttentionCall> calls,
                                             std::string* why) {
  if (auto u = unavailable(d)) {
    if (why) *why = *u;
    return std::nullopt;
  }
  return table(d).sdpa_batch_choice(forced, f, calls, why);
}

void sdpa_batch(Device d, Sdpa forced, Format f, std::span<const AttentionSeq> seqs) {
  table(d).sdpa_batch(forced, f, seqs);
}

void linear(Device d, Format f, const GemmShape& s, std::span<const float> x, std::span<const float> w,
            std::span<float> y) {
  table(d).linear(f, s, x, w, y);
}

void hf_rms_norm(Device d, Format f, const NormShape& s, const NormParams& p, std::span<const float> x,
                 std::span<const float> w, std::span<float> y) {
  table(d).hf_rms_norm(f, s, p, x, w, y);
}

}  // namespace kvconf::kernels::torch_ops
