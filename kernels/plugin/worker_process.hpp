// kvconf's side of one plugin worker: starts kvconf_plugin_worker on the library, reads its kernel table, and makes
// calls with a time limit; a worker that dies (signal, exit) or misses the limit is reaped and the call throws
// KernelFailure naming the kernel and the signal; the next call starts a fresh worker. Calls are serialised.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "wire.hpp"

namespace kvconf::kernels {

class WorkerProcess {
 public:
  // Starts the worker and reads its hello; throws PluginError (prefixed "plugin <lib>: ") when it refuses the
  // library or dies loading it.
  WorkerProcess(std::string lib, std::string worker, double timeout_s);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  const std::vector<plugin_wire::KernelEntry>& table() const { return table_; }
  const std::string& lib() const { return lib_; }

  // One request. `inputs`: the input tensors' bytes, in order. Returns the response code and message; `out` gets
  // the response payload. Throws KernelFailure ("plugin kernel <kernel>: killed by SIGSEGV", "...: no answer
  // within 10 s") when the worker dies or times out.
  struct Answer {
    std::int32_t rc = 0;
    std::string msg;
  };
  Answer call(const std::string& kernel, plugin_wire::Request rq, std::span<const std::span<const std::byte>> inputs,
              std::vector<std::byte>& out);

 private:
  void start();                       // spawn + hello; throws PluginError
  std::string stop(bool kill_first);  // SIGKILL (when asked), reap; returns "killed by SIGSEGV" / "exited with 3"
  // Reads exactly n bytes before the deadline; false on EOF/error/timeout (timed_out says which).
  bool read_until(void* p, std::size_t n, double deadline, bool& timed_out);
  bool write_until(const void* p, std::size_t n, double deadline, bool& timed_out);

  std::string lib_, worker_;
  double timeout_s_;
  std::mutex m_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::vector<plugin_wire::KernelEntry> table_;
};

}  // namespace kvconf::kernels
