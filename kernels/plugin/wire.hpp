// The messages between kvconf and a plugin's worker process (kvconf_plugin_worker) over one Unix stream socket
// (fd 3 in the worker): the worker's hello (load result and kernel table), then request/response pairs. Both ends
// are built from this tree, so the layouts are plain structs; nothing here crosses to the plugin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvconf::plugin_wire {

inline constexpr int kWorkerFd = 3;                   // the socket's number in the worker
inline constexpr std::uint32_t kMagic = 0x6b76706cu;  // "kvpl"

enum Op : std::uint32_t { kSupports = 1, kRun = 2 };

// Response codes.
enum Rc : std::int32_t {
  kOk = 0,
  kLoadError = 1,     // hello: the plugin was refused by the worker (message says why)
  kKernelError = 2,   // the kernel returned nonzero (message: its code and text) — also "not supported" for kSupports
  kAbiViolation = 3,  // the kernel changed a tensor descriptor (message says which field)
  kBadRequest = 4,    // the host sent something the worker cannot serve (a bug of kvconf)
};

// One call. Dims per kind: gemm {m, n, k}; norm {rows, d}; attention {n_q, n_kv, n_heads, n_kv_heads, d, d_v,
// capacity}. Followed by `payload` bytes: the input tensors in argument order, compact, in the kernel's `in` dtype.
struct Request {
  std::uint32_t magic = kMagic;
  std::uint32_t op = 0;
  std::uint32_t kernel = 0;  // index into the hello's table
  std::uint32_t one_plus_weight = 0;
  std::uint64_t dim[7] = {};
  std::int64_t q_offset = 0;
  std::int64_t window = 0;
  std::int32_t causal = 0;
  float scale = 0.0f;
  float softcap = 0.0f;
  float eps = 0.0f;
  std::uint64_t payload = 0;
};

// Followed by msg_len bytes of message, then payload bytes (run: the output tensor in the kernel's `out` dtype;
// hello: the serialized kernel table).
struct Response {
  std::uint32_t magic = kMagic;
  std::int32_t rc = kOk;
  std::uint32_t msg_len = 0;
  std::uint32_t pad = 0;
  std::uint64_t payload = 0;
};

// One descriptor as the worker read it (raw values: the host validates them).
struct KernelEntry {
  std::string name;  // empty when the descriptor's name was NULL or ""
  bool name_null = false;
  std::uint32_t abi = 0;  // the ABI version the plugin was read at (1 or 2)
  std::int32_t kind = 0, in = 0, acc = 0, out = 0, cache_invariant = 0, deterministic = 0;
  std::int32_t pv_acc = 0, flags = 0;  // version 2 (0 when read at version 1)
  std::uint32_t exp_error_ulps = 0;
  std::string mirrors;
  bool has_run = false, has_supports = false;
};

std::string serialize(const std::vector<KernelEntry>& table);
// Throws std::runtime_error on a truncated table.
std::vector<KernelEntry> deserialize(const std::string& bytes);

// Blocking I/O on a socket; false on EOF or error. MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE.
bool write_all(int fd, const void* p, std::size_t n);
bool read_all(int fd, void* p, std::size_t n);

}  // namespace kvconf::plugin_wire
