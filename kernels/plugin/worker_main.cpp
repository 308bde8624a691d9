// kvconf_plugin_worker: the process a plugin runs in. It loads one shared library speaking include/kvconf/plugin.h,
// sends its kernel table to kvconf over fd 3 (the hello), then serves supports/run requests: it wraps the request's
// bytes as DLTensors, calls the kernel, checks that the kernel left every tensor descriptor as it was, and sends the
// output back. A crash or hang here ends this process only; kvconf reports it and starts a fresh worker.
// Usage (by kvconf only): kvconf_plugin_worker PLUGIN.so
#include <dlfcn.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "kvconf/plugin.h"
#include "wire.hpp"

namespace {

using namespace kvconf::plugin_wire;

constexpr std::size_t kErrSize = 512;

int g_fd = kWorkerFd;
std::vector<const kvconf_kernel_desc*> g_kernels;

void respond(std::int32_t rc, const std::string& msg, const void* payload = nullptr, std::size_t n = 0) {
  Response r;
  r.rc = rc;
  r.msg_len = static_cast<std::uint32_t>(msg.size());
  r.payload = n;
  if (!write_all(g_fd, &r, sizeof r) || !write_all(g_fd, msg.data(), msg.size()) ||
      (n > 0 && !write_all(g_fd, payload, n)))
    std::_Exit(0);  // kvconf has gone
}

// The plugin's message: NUL-terminated within the buffer, first line only.
std::string one_line(const char* err) {
  std::string s(err, strnlen(err, kErrSize - 1));
  if (auto nl = s.find_first_of("\r\n"); nl != std::string::npos) s.resize(nl);
  return s.empty() ? std::string("(no message)") : s;
}

DLDataType dtype_of(std::int32_t f) {
  switch (f) {
    case KVCONF_FP32:
      return {static_cast<std::uint8_t>(kDLFloat), 32, 1};
    case KVCONF_FP16:
      return {static_cast<std::uint8_t>(kDLFloat), 16, 1};
    default:
      return {static_cast<std::uint8_t>(kDLBfloat), 16, 1};
  }
}

// A DLTensor over caller-owned storage, with a copy of its descriptor to compare after the call.
struct Tensor {
  const char* what = "";
  std::vector<std::int64_t> shape, strides, shape0, strides0;
  DLTensor t{};
  DLTensor t0{};
  Tensor(const char* name, std::vector<std::int64_t> dims, std::int32_t fmt, void* data)
      : what(name), shape(std::move(dims)) {
    strides.assign(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
    shape0 = shape;
    strides0 = strides;
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = dtype_of(fmt);
    t.shape = shape.data();
    t.strides = strides.data();
    t.byte_offset = 0;
    t0 = t;
  }
  Tensor(const Tensor&) = delete;
  std::size_t elements() const {
    std::size_t n = 1;
    for (auto d : shape0) n *= static_cast<std::size_t>(d);
    return n;
  }
  // Empty when unchanged, else which field changed.
  std::string changed() const {
    const std::string p = std::string(what) + ".";
    if (t.data != t0.data) return p + "data";
    if (t.byte_offset != t0.byte_offset) return p + "byte_offset";
    if (t.ndim != t0.ndim) return p + "ndim (" + std::to_string(t0.ndim) + " -> " + std::to_string(t.ndim) + ")";
    if (t.dtype.code != t0.dtype.code || t.dtype.bits != t0.dtype.bits || t.dtype.lanes != t0.dtype.lanes)
      return p + "dtype (code " + std::to_string(t0.dtype.code) + " bits " + std::to_string(t0.dtype.bits) +
             " -> code " + std::to_string(t.dtype.code) + " bits " + std::to_string(t.dtype.bits) + ")";
    if (t.device.device_type != t0.device.device_type || t.device.device_id != t0.device.device_id) return p + "device";
    if (t.shape != t0.shape || t.strides != t0.strides) return p + "shape/strides pointer";
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] != shape0[i])
        return p + "shape[" + std::to_string(i) + "] (" + std::to_string(shape0[i]) + " -> " +
               std::to_string(shape[i]) + ")";
      if (strides[i] != strides0[i]) return p + "strides[" + std::to_string(i) + "]";
    }
    return {};
  }
};

std::size_t bytes_of(std::int32_t fmt) { return fmt == KVCONF_FP32 ? 4 : 2; }

void serve(const Request& rq, std::vector<unsigned char>& in) {
  const kvconf_kernel_desc& k = *g_kernels[rq.kernel];
  const bool run = rq.op == kRun;
  const auto d = [&](int i) { return static_cast<std::int64_t>(rq.dim[i]); };
  unsigned char* base = in.data();
  std::size_t at = 0;
  auto input = [&](const char* name, std::vector<std::int64_t> dims) {
    auto* t = new Tensor(name, std::move(dims), k.in, nullptr);
    if (run) t->t.data = t->t0.data = base + at;
    at += t->elements() * bytes_of(k.in);
    return t;
  };
  std::vector<Tensor*> ins;
  std::vector<std::int64_t> out_dims;
  if (k.kind == KVCONF_KIND_GEMM) {
    ins = {input("x", {d(0), d(2)}), input("w", {d(1), d(2)})};
    out_dims = {d(0), d(1)};
  } else if (k.kind == KVCONF_KIND_NORM) {
    ins = {input("x", {d(0), d(1)}), input("w", {d(1)})};
    out_dims = {d(0), d(1)};
  } else {
    ins = {input("q", {d(0), d(2), d(4)}), input("k_cache", {d(6), d(3), d(4)}), input("v_cache", {d(6), d(3), d(5)})};
    out_dims = {d(0), d(2), d(5)};
  }
  struct Cleanup {
    std::vector<Tensor*>& v;
    ~Cleanup() {
      for (Tensor* t : v) delete t;
    }
  } cleanup{ins};
  if (run && at != rq.payload) {
    respond(kBadRequest,
            "request carries " + std::to_string(rq.payload) + " input bytes, expected " + std::to_string(at));
    return;
  }
  std::size_t out_n = 1;
  for (auto v : out_dims) out_n *= static_cast<std::size_t>(v);
  std::vector<unsigned char> out(run ? out_n * bytes_of(k.out) : 0);
  Tensor y(k.kind == KVCONF_KIND_ATTENTION ? "out" : "y", out_dims, k.out, run ? out.data() : nullptr);
  char err[kErrSize] = {};
  int rc = 0;
  if (k.kind == KVCONF_KIND_GEMM) {
    auto fn = run ? k.gemm_run : k.gemm_supports;
    if (fn) rc = fn(k.user, &ins[0]->t, &ins[1]->t, &y.t, err, kErrSize);
  } else if (k.kind == KVCONF_KIND_NORM) {
    kvconf_norm_params p{rq.eps, static_cast<std::int32_t>(rq.one_plus_weight)};
    auto fn = run ? k.norm_run : k.norm_supports;
    if (fn) rc = fn(k.user, &ins[0]->t, &ins[1]->t, &y.t, &p, err, kErrSize);
  } else {
    kvconf_attention_params p{d(1), rq.q_offset, rq.window, rq.causal, rq.scale, rq.softcap, 0};
    auto fn = run ? k.attention_run : k.attention_supports;
    if (fn) rc = fn(k.user, &ins[0]->t, &ins[1]->t, &ins[2]->t, &y.t, &p, err, kErrSize);
  }
  err[kErrSize - 1] = '\0';
  std::string changed = y.changed();
  for (const Tensor* t : ins)
    if (changed.empty()) changed = t->changed();
  if (!changed.empty()) {
    respond(kAbiViolation, std::string(run ? "run" : "supports") + " changed the descriptor of " + changed);
    return;
  }
  if (rc != 0) {
    respond(kKernelError, run ? "returned " + std::to_string(rc) + ": " + one_line(err) : one_line(err));
    return;
  }
  respond(kOk, {}, out.data(), out.size());
}

// Loads the plugin; on failure responds kLoadError with the reason and returns false.
bool load(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    respond(kLoadError, std::string("dlopen failed: ") + (e ? e : "unknown error"));
    return false;
  }
  auto* version = reinterpret_cast<kvconf_plugin_abi_version_fn>(dlsym(h, KVCONF_PLUGIN_ABI_VERSION_SYMBOL));
  auto* reg = reinterpret_cast<kvconf_plugin_register_fn>(dlsym(h, KVCONF_PLUGIN_REGISTER_SYMBOL));
  for (auto [fn, name] :
       {std::pair<void*, const char*>{reinterpret_cast<void*>(version), KVCONF_PLUGIN_ABI_VERSION_SYMBOL},
        {reinterpret_cast<void*>(reg), KVCONF_PLUGIN_REGISTER_SYMBOL}})
    if (fn == nullptr) {
      respond(kLoadError, std::string("missing symbol ") + name +
                              " (a plugin exports kvconf_plugin_abi_version and kvconf_plugin_register, "
                              "include/kvconf/plugin.h)");
      return false;
    }
  const std::uint32_t v = version();
  if (v < KVCONF_PLUGIN_ABI_VERSION_MIN || v > KVCONF_PLUGIN_ABI_VERSION) {
    respond(kLoadError, "ABI version " + std::to_string(v) + ", expected " +
                            std::to_string(KVCONF_PLUGIN_ABI_VERSION_MIN) + " to " +
                            std::to_string(KVCONF_PLUGIN_ABI_VERSION) + " (the versions this kvconf reads)");
    return false;
  }
  const kvconf_host host{v, KVCONF_VERSION};  // the plugin is read at the version it speaks
  kvconf_plugin out{};
  char err[kErrSize] = {};
  const int rc = reg(&host, &out, err, kErrSize);
  err[kErrSize - 1] = '\0';
  if (rc != 0) {
    respond(kLoadError, "kvconf_plugin_register returned " + std::to_string(rc) + ": " + one_line(err));
    return false;
  }
  if (out.abi_version != v) {
    respond(kLoadError, "kvconf_plugin_register filled abi_version = " + std::to_string(out.abi_version) +
                            ", expected " + std::to_string(v) + " (what kvconf_plugin_abi_version returned)");
    return false;
  }
  if (out.n_kernels == 0 || out.n_kernels > 256 || out.kernels == nullptr) {
    respond(kLoadError, "kvconf_plugin_register filled n_kernels = " + std::to_string(out.n_kernels) +
                            (out.kernels ? "" : " and kernels = NULL") + ", expected 1 .. 256 descriptors");
    return false;
  }
  std::vector<KernelEntry> table;
  // Version 1's descriptors are version 2's without the trailing fields: read each through its own layout's stride,
  // version 1's copied into a version-2 descriptor whose trailing fields stay 0 (kept for the worker's life).
  static_assert(offsetof(kvconf_kernel_desc, pv_acc) == sizeof(kvconf_kernel_desc_v1));
  static std::deque<kvconf_kernel_desc> v1_copies;
  for (std::uint32_t i = 0; i < out.n_kernels; ++i) {
    const kvconf_kernel_desc* kp = &out.kernels[i];
    if (v == 1) {
      kvconf_kernel_desc& copy = v1_copies.emplace_back();
      std::memcpy(&copy, reinterpret_cast<const kvconf_kernel_desc_v1*>(out.kernels) + i,
                  sizeof(kvconf_kernel_desc_v1));
      kp = &copy;
    }
    const kvconf_kernel_desc& k = *kp;
    g_kernels.push_back(&k);
    KernelEntry e;
    e.abi = v;
    e.pv_acc = k.pv_acc;
    e.flags = k.flags;
    e.name_null = k.name == nullptr;
    if (k.name) e.name.assign(k.name, strnlen(k.name, 1024));
    e.kind = k.kind;
    e.in = k.in;
    e.acc = k.acc;
    e.out = k.out;
    e.cache_invariant = k.cache_invariant;
    e.deterministic = k.deterministic;
    e.exp_error_ulps = k.exp_error_ulps;
    if (k.mirrors) e.mirrors.assign(k.mirrors, strnlen(k.mirrors, 1024));
    e.has_run = k.kind == KVCONF_KIND_GEMM   ? k.gemm_run != nullptr
                : k.kind == KVCONF_KIND_NORM ? k.norm_run != nullptr
                                             : k.attention_run != nullptr;
    e.has_supports = k.kind == KVCONF_KIND_GEMM   ? k.gemm_supports != nullptr
                     : k.kind == KVCONF_KIND_NORM ? k.norm_supports != nullptr
                                                  : k.attention_supports != nullptr;
    table.push_back(std::move(e));
  }
  const std::string bytes = serialize(table);
  respond(kOk, {}, bytes.data(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive kvconf
  if (argc != 2) {
    std::fprintf(stderr, "kvconf_plugin_worker: started by kvconf only (usage: kvconf_plugin_worker PLUGIN.so)\n");
    return 2;
  }
  if (getppid() == 1) return 0;
  if (!load(argv[1])) return 0;
  std::vector<unsigned char> in;
  for (;;) {
    Request rq;
    if (!read_all(g_fd, &rq, sizeof rq)) return 0;  // kvconf closed the socket
    if (rq.magic != kMagic || rq.kernel >= g_kernels.size() || (rq.op != kRun && rq.op != kSupports)) {
      respond(kBadRequest, "malformed request");
      return 0;
    }
    in.resize(rq.payload);
    if (rq.payload > 0 && !read_all(g_fd, in.data(), rq.payload)) return 0;
    serve(rq, in);
  }
}
