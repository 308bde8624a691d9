// The torch_ops calls, forwarded to the module kvconf_torch_ops (torch_ops.cpp), which is loaded on the first call:
// its path is fixed at build time (KVCONF_TORCH_OPS_MODULE) unless KVCONF_TORCH_OPS names another file. A module
// that cannot be loaded makes every torch kernel unsupported with the loader's reason (never a crash).
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

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
    const char* env = std::getenv("KVCONF_TORCH_OPS");
    const std::string path = env && *env ? env : KVCONF_TORCH_OPS_MODULE;
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
  }();
  return l;
}

const Table& table() {
  const Loaded& l = loaded();
  if (!l.table) throw std::runtime_error(l.error);
  return *l.table;
}

}  // namespace

std::optional<std::string> unavailable() {
  const Loaded& l = loaded();
  if (!l.table) return l.error;
  return l.table->unavailable();
}

std::string description() {
  const Loaded& l = loaded();
  return l.table ? l.table->description() : l.error;
}

std::optional<std::string> sdpa_choice(Sdpa forced, Format f, const AttentionCall& call, Calling how,
                                       std::string* why) {
  if (auto u = unavailable()) {
    if (why) *why = *u;
    return std::nullopt;
  }
  return table().sdpa_choice(forced, f, call, how, why);
}

void sdpa(Sdpa forced, Format f, Calling how, const AttentionCall& call, std::span<const float> q,
          std::span<const float> k_cache, std::span<const float> v_cache, std::span<float> out) {
  table().sdpa(forced, f, how, call, q, k_cache, v_cache, out);
}

void linear(Format f, const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
  table().linear(f, s, x, w, y);
}

void hf_rms_norm(Format f, const NormShape& s, const NormParams& p, std::span<const float> x,
                 std::span<const float> w, std::span<float> y) {
  table().hf_rms_norm(f, s, p, x, w, y);
}

}  // namespace kvconf::kernels::torch_ops
