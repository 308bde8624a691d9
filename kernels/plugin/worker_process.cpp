// One plugin worker process seen from kvconf (worker_process.hpp): spawn, hello, calls under a time limit, reaping.
#include "worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>

#include "kvconf/kernels/plugin.hpp"

extern char** environ;

namespace kvconf::kernels {

namespace {

using namespace plugin_wire;

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

std::string status_text(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return std::string("killed by ") + (abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig));
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped";
}

// Waits for the deadline; 1 when fd is ready for `events`, 0 on timeout, -1 on error.
int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    const double left = deadline - now_s();
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::ceil(std::min(left, 3600.0) * 1000.0));
    const int r = ::poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r > 0) return 1;
  }
}

}  // namespace

WorkerProcess::WorkerProcess(std::string lib, std::string worker, double timeout_s)
    : lib_(std::move(lib)), worker_(std::move(worker)), timeout_s_(timeout_s) {
  start();
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) stop(true);
}

bool WorkerProcess::read_until(void* p, std::size_t n, double deadline, bool& timed_out) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const int w = wait_fd(fd_, POLLIN, deadline);
    if (w == 0) timed_out = true;
    if (w <= 0) return false;
    const ssize_t r = ::read(fd_, c, n);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool WorkerProcess::write_until(const void* p, std::size_t n, double deadline, bool& timed_out) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const int w = wait_fd(fd_, POLLOUT, deadline);
    if (w == 0) timed_out = true;
    if (w <= 0) return false;
    const ssize_t r = ::send(fd_, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

std::string WorkerProcess::stop(bool kill_first) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (pid_ <= 0) return "not running";
  int status = 0;
  if (!kill_first) {
    // The socket closed: the worker is exiting. Give it a moment to finish, then make sure.
    const double until = now_s() + 1.0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (now_s() > until) {
        kill_first = true;
        break;
      }
      ::usleep(1000);
    }
    if (!kill_first) {
      pid_ = -1;
      return status_text(status);
    }
  }
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status_text(status);
}

void WorkerProcess::start() {
  const std::string who = "plugin " + lib_ + ": ";
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw PluginError(who + "socketpair failed: " + strerror(errno));
  int child = sv[1];
  if (child == kWorkerFd) {  // dup2 onto itself would keep FD_CLOEXEC: move it out of the way first
    child = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    ::close(sv[1]);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, child, kWorkerFd);
  std::string a0 = worker_, a1 = lib_;
  char* argv[] = {a0.data(), a1.data(), nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, worker_.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(child);
  if (rc != 0) {
    ::close(sv[0]);
    throw PluginError(who + "cannot start the worker " + worker_ + ": " + strerror(rc));
  }
  pid_ = pid;
  fd_ = sv[0];

  const double deadline = now_s() + timeout_s_;
  bool timed_out = false;
  Response r;
  std::string msg, payload;
  const bool ok = read_until(&r, sizeof r, deadline, timed_out) && r.magic == kMagic &&
                  (msg.resize(r.msg_len), read_until(msg.data(), msg.size(), deadline, timed_out)) &&
                  (payload.resize(r.payload), read_until(payload.data(), payload.size(), deadline, timed_out));
  if (!ok) {
    if (timed_out) {
      stop(true);
      throw PluginError(who + "no answer within " + seconds(timeout_s_) +
                        " while loading (KVCONF_PLUGIN_TIMEOUT_S); worker killed");
    }
    throw PluginError(who + "the worker " + stop(false) + " while loading the plugin");
  }
  if (r.rc != kOk) {
    stop(true);
    throw PluginError(who + msg);
  }
  try {
    table_ = deserialize(payload);
  } catch (const std::exception& e) {
    stop(true);
    throw PluginError(who + e.what());
  }
}

WorkerProcess::Answer WorkerProcess::call(const std::string& kernel, Request rq,
                                          std::span<const std::span<const std::byte>> inputs,
                                          std::vector<std::byte>& out) {
  std::lock_guard<std::mutex> lock(m_);
  const std::string who = "plugin kernel " + kernel + ": ";
  if (pid_ <= 0) {  // the last call killed it: a fresh worker
    const std::size_t n = table_.size();
    try {
      start();
    } catch (const PluginError& e) {
      throw KernelFailure(who + "restarting the worker failed: " + e.what());
    }
    if (table_.size() != n) {
      stop(true);
      throw KernelFailure(who + "the restarted worker registered " + std::to_string(table_.size()) +
                          " kernels, the first " + std::to_string(n));
    }
  }
  rq.magic = kMagic;
  rq.payload = 0;
  for (const auto& in : inputs) rq.payload += in.size();
  const double deadline = now_s() + timeout_s_;
  bool timed_out = false;
  bool ok = write_until(&rq, sizeof rq, deadline, timed_out);
  for (const auto& in : inputs) ok = ok && write_until(in.data(), in.size(), deadline, timed_out);
  Response r;
  Answer a;
  ok = ok && read_until(&r, sizeof r, deadline, timed_out) && r.magic == kMagic;
  if (ok) {
    a.rc = r.rc;
    a.msg.resize(r.msg_len);
    out.resize(r.payload);
    ok = read_until(a.msg.data(), a.msg.size(), deadline, timed_out) &&
         read_until(out.data(), out.size(), deadline, timed_out);
  }
  if (!ok) {
    if (timed_out) {
      stop(true);
      throw KernelFailure(who + "no answer within " + seconds(timeout_s_) +
                          " (KVCONF_PLUGIN_TIMEOUT_S); worker killed and restarted for the next call");
    }
    throw KernelFailure(who + stop(false) + " (in plugin " + lib_ + "; worker restarted for the next call)");
  }
  return a;
}

}  // namespace kvconf::kernels
