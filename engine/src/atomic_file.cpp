// Atomic file writes (temp file + fsync + rename) for reports and results.
#include "kvconf/engine/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace kvconf::engine {

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error("cannot write " + path.string() + ": " + what + ": " + std::strerror(errno));
  };
  std::error_code ec;
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) throw std::runtime_error("cannot create directory " + path.parent_path().string() + ": " + ec.message());
  }
  std::string tmpl = path.string() + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) fail("mkstemp");
  // mkstemp creates 0600; reports and baselines are meant to be read by others, as a plain open() would leave them.
  if (::fchmod(fd, 0644) != 0) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    fail("fchmod");
  }
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(tmpl.c_str());
      fail("write");
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    fail("fsync/close");
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    ::unlink(tmpl.c_str());
    fail("rename");
  }
}

}  // namespace kvconf::engine
