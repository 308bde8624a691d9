// Helpers of the crash-safety tests (crash_support.hpp): fork/exec/SIGKILL of kvconf and the on-disk checks.
#include "crash_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace kvconf::crash {

Exit run_kvconf(const Launch& l) {
  std::vector<std::string> argv = l.wrapper;
  const char* exe = std::getenv("KVCONF_CRASH_EXE");  // another kvconf build (a planted fault: docs/CRASH_SAFETY.md)
  argv.push_back(exe && *exe ? exe : KVCONF_EXE);
  argv.insert(argv.end(), l.args.begin(), l.args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = ::open(l.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int efd = l.err.empty() ? fd : ::open(l.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || efd < 0) ::_exit(126);
    ::dup2(fd, 1);
    ::dup2(efd, 2);
    for (const auto& [k, v] : l.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  Exit e;
  const bool by_progress = l.kill_lines > 0;
  double limit = l.kill_after >= 0 && !by_progress ? l.kill_after : l.timeout;
  bool planned = !by_progress && l.kill_after >= 0;  // a kill (not a hang timeout) is due at `limit`
  std::uintmax_t seen_size = 0;
  int st = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::error_code ec;
    if (e.watch_seen < 0 && !l.watch.empty() && fs::exists(l.watch, ec)) e.watch_seen = e.seconds;
    if (r == pid) break;
    if (by_progress && !planned) {
      const std::uintmax_t size = fs::file_size(l.kill_file, ec);
      if (!ec && size != seen_size) {  // count again only when the file grew
        seen_size = size;
        if (count_lines(l.kill_file) >= l.kill_lines) {
          limit = e.seconds + l.kill_extra;
          planned = true;
        }
      }
    }
    if (e.seconds >= limit) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      e.killed = true;
      if (!planned) e.status = -2;  // a hang: past the timeout
      return e;
    }
    const double left = limit - e.seconds;
    std::this_thread::sleep_for(std::chrono::duration<double>(left < 0.002 ? left : 0.002));
  }
  if (WIFEXITED(st)) e.status = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) e.signal = WTERMSIG(st);
  return e;
}

std::size_t count_lines(const fs::path& file) {
  const std::string text = read_text(file);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Store read_store(const fs::path& file, const KeyOf& key_of) {
  Store s;
  std::error_code ec;
  if (!fs::exists(file, ec)) return s;
  const std::string all = read_text(file);
  std::size_t start = 0, line_no = 0;
  while (start < all.size()) {
    const std::size_t nl = all.find('\n', start);
    const bool last = nl == std::string::npos;
    const std::string line = all.substr(start, last ? std::string::npos : nl - start);
    start = last ? all.size() : nl + 1;
    ++line_no;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      if (last) {
        s.torn_tail = true;
      } else {
        s.problems.push_back(file.string() + " line " + std::to_string(line_no) + ": not a JSON record");
      }
      continue;
    }
    if (last) s.torn_tail = true;  // whole, but without its newline
    const std::string key = key_of(j);
    if (!s.records.emplace(key, without_timing(j)).second)
      s.problems.push_back(file.string() + " line " + std::to_string(line_no) + ": duplicate of " + key);
  }
  return s;
}

nlohmann::json without_timing(nlohmann::json j) {
  if (j.is_object()) {
    j.erase("seconds");
    j.erase("meta");
    for (auto& [k, v] : j.items()) v = without_timing(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = without_timing(v);
  }
  return j;
}

namespace {

std::string last_line(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  const std::size_t nl = text.rfind('\n', end == 0 ? 0 : end - 1);
  return text.substr(nl == std::string::npos ? 0 : nl + 1);
}

}  // namespace

std::vector<std::string> torn_reports(const fs::path& dir, const fs::path& reference_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const std::string text = read_text(e.path());
    if (name == "report.json" || name == "manifest.json" || name == "selfcheck.json") {
      try {
        if (nlohmann::json::parse(text).is_discarded()) throw std::runtime_error("discarded");
      } catch (const std::exception&) {
        out.push_back(e.path().string() + ": not whole JSON (" + std::to_string(text.size()) + " bytes)");
      }
    } else if (name == "report.md" || name == "report.html" || name == "junit.xml") {
      const std::string want = last_line(read_text(reference_dir / name));
      if (text.empty() || text.back() != '\n' || last_line(text) != want)
        out.push_back(e.path().string() + ": cut short (" + std::to_string(text.size()) + " bytes, last line '" +
                      last_line(text).substr(0, 60) + "')");
    }
  }
  return out;
}

std::size_t temp_leftovers(const fs::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
  return n;
}

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_text(e.path());
  return out;
}

}  // namespace kvconf::crash
