// JsonlStore: append + fsync per record, resume by key, torn-line tolerance; parse_shard (result_store.hpp).
#include "kvconf/protocol/result_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::protocol {

namespace {

// Lines of `file`; `torn` is set when the file does not end with a newline (its last line was cut by a kill);
// `complete_bytes` is the length of the file up to and including its last newline.
std::vector<std::string> read_lines(const std::filesystem::path& file, bool& torn, std::size_t& complete_bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw BadInput("cannot read " + file.string() + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < all.size()) {
    const std::size_t nl = all.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(all.substr(start));
      torn = true;
      break;
    }
    lines.push_back(all.substr(start, nl - start));
    start = nl + 1;
  }
  complete_bytes = start;
  return lines;
}

// `torn`: the file does not end with a newline; `dropped_torn`: that last line did not parse and was left out.
std::vector<nlohmann::json> parse_lines(const std::filesystem::path& file, bool& dropped_torn, bool& torn,
                                        std::size_t& complete_bytes) {
  std::vector<std::string> lines = read_lines(file, torn, complete_bytes);
  std::vector<nlohmann::json> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(lines[i]));
    } catch (const nlohmann::json::exception& e) {  // also out_of_range: a number beyond double
      if (torn && i + 1 == lines.size()) {          // the record being written when the run was killed
        dropped_torn = true;
        continue;
      }
      throw BadInput(file.string() + " line " + std::to_string(i + 1) + ": not a JSON record (" + e.what() + ")");
    }
  }
  return out;
}

}  // namespace

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& file) {
  bool dropped = false, torn = false;
  std::size_t complete = 0;
  return parse_lines(file, dropped, torn, complete);
}

JsonlStore::JsonlStore(std::filesystem::path file, bool resume,
                       std::function<std::string(const nlohmann::json&)> key_of)
    : file_(std::move(file)), key_of_(std::move(key_of)) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(file_, ec);
  if (exists && !resume && std::filesystem::file_size(file_, ec) > 0)
    throw BadInput(file_.string() + " exists: pass --resume to continue that run, or choose another --out");
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw BadInput("cannot open " + file_.string() + " for appending: " + std::strerror(errno));
  // One writer per results file: a second kvconf process on the same --out would interleave records.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw BadInput(file_.string() + " is being written by another kvconf process; wait for it or choose another --out");
  }
  if (exists && resume) {
    try {
      bool torn = false;
      std::size_t complete_bytes = 0;
      records_ = parse_lines(file_, dropped_torn_, torn, complete_bytes);
      for (std::size_t i = 0; i < records_.size(); ++i) {
        try {
          keys_.insert(key_of_(records_[i]));
        } catch (const std::exception& e) {
          throw BadInput(file_.string() + " record " + std::to_string(i + 1) + ": " + e.what());
        }
      }
      // So that the next append starts on a fresh line (we hold the lock; the file is ours): cut a torn tail off
      // (one ftruncate: the finished records before it are never rewritten, so a kill here loses none of them), or
      // end a last record that is whole but lacks its newline.
      if (dropped_torn_) {
        if (::ftruncate(fd_, static_cast<off_t>(complete_bytes)) != 0 || ::fsync(fd_) != 0)
          throw BadInput("cannot cut the torn last line off " + file_.string() + ": " + std::strerror(errno));
      } else if (torn) {
        if (::write(fd_, "\n", 1) != 1 || ::fsync(fd_) != 0)
          throw BadInput("cannot end the last line of " + file_.string() + ": " + std::strerror(errno));
      }
    } catch (...) {
      ::close(fd_);
      fd_ = -1;
      throw;
    }
  }
}

JsonlStore::~JsonlStore() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlStore::append(const nlohmann::json& record) {
  const std::string key = key_of_(record);
  const std::string line = record.dump() + "\n";
  // Where this record starts: on a failed write or fsync (a full disk) the file is cut back to it, so it never holds
  // a torn line or a record that may not be on disk, and a --resume once there is space redoes only this one.
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  const auto fail = [&](const char* what) {
    const int err = errno;
    if (start >= 0 && ::ftruncate(fd_, start) == 0) ::fsync(fd_);
    throw std::runtime_error("cannot " + std::string(what) + " " + file_.string() + ": " + std::strerror(err));
  };
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t w = ::write(fd_, line.data() + done, line.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("append to");
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd_) != 0) fail("fsync");
  records_.push_back(record);
  keys_.insert(key);
}

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard s;
  auto parse = [&](std::string_view part, std::size_t& v) {
    const auto* end = part.data() + part.size();
    auto [p, ec] = std::from_chars(part.data(), end, v);
    return !part.empty() && ec == std::errc() && p == end;
  };
  if (slash == std::string::npos || !parse(std::string_view(text).substr(0, slash), s.index) ||
      !parse(std::string_view(text).substr(slash + 1), s.count) || s.count == 0 || s.index >= s.count)
    throw BadInput("--shard '" + text + "': expected I/N with 0 <= I < N (e.g. 0/4)");
  return s;
}

}  // namespace kvconf::protocol
