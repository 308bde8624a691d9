// The kernel table's byte layout in the worker's hello, and blocking socket I/O (wire.hpp).
#include "wire.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kvconf::plugin_wire {

namespace {

void put_u32(std::string& s, std::uint32_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_str(std::string& s, const std::string& v) {
  put_u32(s, static_cast<std::uint32_t>(v.size()));
  s += v;
}

struct Reader {
  const std::string& s;
  std::size_t at = 0;
  std::uint32_t u32() {
    std::uint32_t v = 0;
    if (at + sizeof v > s.size()) throw std::runtime_error("truncated kernel table from the worker");
    std::memcpy(&v, s.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const std::uint32_t n = u32();
    if (at + n > s.size()) throw std::runtime_error("truncated kernel table from the worker");
    std::string v = s.substr(at, n);
    at += n;
    return v;
  }
};

}  // namespace

std::string serialize(const std::vector<KernelEntry>& table) {
  std::string s;
  put_u32(s, static_cast<std::uint32_t>(table.size()));
  for (const KernelEntry& e : table) {
    put_str(s, e.name);
    put_u32(s, e.name_null);
    put_u32(s, e.abi);
    for (std::int32_t v : {e.kind, e.in, e.acc, e.out, e.cache_invariant, e.deterministic, e.pv_acc, e.flags})
      put_u32(s, static_cast<std::uint32_t>(v));
    put_u32(s, e.exp_error_ulps);
    put_str(s, e.mirrors);
    put_u32(s, e.has_run);
    put_u32(s, e.has_supports);
  }
  return s;
}

std::vector<KernelEntry> deserialize(const std::string& bytes) {
  Reader r{bytes};
  // Every entry takes at least kMinEntry bytes: a count the bytes cannot hold is refused before anything is allocated.
  constexpr std::size_t kMinEntry = 14 * sizeof(std::uint32_t);
  const std::uint32_t n = r.u32();
  if (n > (bytes.size() - r.at) / kMinEntry)
    throw std::runtime_error("truncated kernel table from the worker: " + std::to_string(n) + " kernels announced, " +
                             std::to_string(bytes.size() - r.at) + " bytes follow (at least " +
                             std::to_string(kMinEntry) + " per kernel)");
  std::vector<KernelEntry> t(n);
  for (KernelEntry& e : t) {
    e.name = r.str();
    e.name_null = r.u32() != 0;
    e.abi = r.u32();
    for (std::int32_t* v :
         {&e.kind, &e.in, &e.acc, &e.out, &e.cache_invariant, &e.deterministic, &e.pv_acc, &e.flags})
      *v = static_cast<std::int32_t>(r.u32());
    e.exp_error_ulps = r.u32();
    e.mirrors = r.str();
    e.has_run = r.u32() != 0;
    e.has_supports = r.u32() != 0;
  }
  return t;
}

bool write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace kvconf::plugin_wire
