// Trace folders written on first use by an engine adapter and shared by every test process: each is written into a
// fresh temporary folder and renamed into place, so concurrent test processes never see a half-written set; several
// folders of one adapter can be written by one process of it (write_many). Also what the adapter tests do with them:
// read a folder's traces, compare logits.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kvconf/analysis/metrics.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/protocol/trace.hpp"

namespace kvconf::testing {

// Runs a shell command with its output in `log`; on failure sets *why to the command and the log's tail.
inline bool run_logged(const std::string& cmd, const std::filesystem::path& log, std::string* why) {
  if (std::system((cmd + " > \"" + log.string() + "\" 2>&1").c_str()) == 0) {
    std::filesystem::remove(log);
    return true;
  }
  if (why) {
    std::FILE* f = std::fopen(log.c_str(), "r");
    std::string text;
    char buf[512];
    while (f && std::fgets(buf, sizeof buf, f)) text += buf;
    if (f) std::fclose(f);
    *why = "failed: " + cmd + "\n" + text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
  }
  return false;
}

// A file's part of a cache key: its content's FNV-1a hash (files up to 1 MiB: sources, configs, prompt sets), else
// its size and modification time (weights, programs, libraries: rewritten whenever they change); "-" when missing.
inline std::string fingerprint(const std::filesystem::path& f) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto size = fs::file_size(f, ec);
  if (ec) return f.filename().string() + ":-";
  if (size > (1u << 20))
    return f.filename().string() + ":" + std::to_string(size) + "@" +
           std::to_string(fs::last_write_time(f, ec).time_since_epoch().count());
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64 (offset basis, prime 2^40 + 2^8 + 0xb3)
  std::FILE* in = std::fopen(f.c_str(), "rb");
  for (int c; in && (c = std::fgetc(in)) != EOF;) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  if (in) std::fclose(in);
  return f.filename().string() + ":" + std::to_string(h);
}

// The fingerprints of every regular file directly in `dir` whose name ends with `suffix`, in name order.
inline std::string folder_fingerprint(const std::filesystem::path& dir, const std::string& suffix = "") {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::string key;
  for (const auto& f : files) key += fingerprint(f) + ";";
  return key;
}

// The file a cached folder's key is kept in (written before the folder is renamed into place).
inline const char* kKeyFile = ".kvconf-cache-key";

// Whether `dir` holds a folder made with `key`; a folder made by something else is removed (to be written again).
inline bool is_current(const std::filesystem::path& dir, const std::string& key) {
  namespace fs = std::filesystem;
  fs::create_directories(dir.parent_path());
  if (!fs::is_directory(dir)) return false;
  std::string held;
  if (std::FILE* in = std::fopen((dir / kKeyFile).c_str(), "rb")) {
    for (int c; (c = std::fgetc(in)) != EOF;) held += static_cast<char>(c);
    std::fclose(in);
  }
  if (held == key) return true;
  std::error_code ec;
  fs::remove_all(dir, ec);
  return false;
}

// This process's empty temporary folder name beside `dir` (nothing there yet).
inline std::filesystem::path temporary_beside(const std::filesystem::path& dir) {
  const std::filesystem::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
  std::filesystem::remove_all(tmp);
  return tmp;
}

// The written folder `tmp` renamed to `dir` with its key (another process may have won the race: then its folder
// stays and ours goes).
inline void put_in_place(const std::filesystem::path& tmp, const std::filesystem::path& dir, const std::string& key) {
  if (std::FILE* out = std::fopen((tmp / kKeyFile).c_str(), "wb")) {
    std::fwrite(key.data(), 1, key.size(), out);
    std::fclose(out);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir, ec);
  if (ec) std::filesystem::remove_all(tmp);
}

// `dir`, written by the shell command command(tmp) into a temporary folder beside it and renamed into place (another
// process may win the race: then its folder stays and ours goes); empty with *why set when the command failed (its
// temporary folder removed, its log kept). `key` says what made it (the command, the adapter's sources, the engine's
// version and library, the fixture, the options): a folder made under another key is written again.
inline std::filesystem::path write_once(const std::filesystem::path& dir, std::string* why,
                                        const std::function<std::string(const std::filesystem::path&)>& command,
                                        const std::string& key = "") {
  if (is_current(dir, key)) return dir;
  const std::filesystem::path tmp = temporary_beside(dir);
  if (!run_logged(command(tmp), dir.string() + ".log" + std::to_string(::getpid()), why)) {
    std::filesystem::remove_all(tmp);  // what the failed command left; its log stays
    return {};
  }
  put_in_place(tmp, dir, key);
  return dir;
}

// The shell command running `script` under `python` with `args`, each quoted.
inline std::string script_command(const std::string& python, const std::filesystem::path& script,
                                  const std::vector<std::string>& args) {
  std::string c = "\"" + python + "\" \"" + script.string() + "\"";
  for (const std::string& a : args) c += " \"" + a + "\"";
  return c;
}

// A command line's arguments as one string, for a cache key.
inline std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += a + " ";
  return s;
}

// A folder of traces one command line of an adapter script writes: where it goes, what makes it (its key) and the
// script's arguments given the (temporary) folder to write into.
struct CachedRun {
  std::filesystem::path dir;
  std::string key;
  std::function<std::vector<std::string>(const std::filesystem::path&)> args;
};

// The run's folder, written when not current by its own process of `python` running `script` (write_once); empty
// with *why set when that failed.
inline std::filesystem::path write_one(const CachedRun& r, const std::string& python,
                                       const std::filesystem::path& script, std::string* why) {
  return write_once(
      r.dir, why, [&](const std::filesystem::path& tmp) { return script_command(python, script, r.args(tmp)); },
      r.key);
}

// Every run's folder, those not current written by one process of `python` running adapters/hf/run_many.py over
// `script` (one import of the engine for all of them) and put in place; false with *why set when that process failed
// (then none is put in place and their temporary folders are removed). *written: how many it wrote.
inline bool write_many(const std::vector<CachedRun>& runs, const std::string& python,
                       const std::filesystem::path& script, std::string* why, std::size_t* written = nullptr) {
  namespace fs = std::filesystem;
  std::vector<std::pair<const CachedRun*, fs::path>> missing;  // (run, its temporary folder)
  nlohmann::json argvs = nlohmann::json::array();
  for (const CachedRun& r : runs)
    if (!is_current(r.dir, r.key)) {
      missing.emplace_back(&r, temporary_beside(r.dir));
      argvs.push_back(r.args(missing.back().second));
    }
  if (written) *written = missing.size();
  if (missing.empty()) return true;
  const fs::path list = missing.front().first->dir.parent_path() / ("runs." + std::to_string(::getpid()) + ".json");
  if (std::FILE* out = std::fopen(list.c_str(), "wb")) {
    const std::string text = argvs.dump(1);
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
  }
  const fs::path run_many = script.parent_path().parent_path() / "hf" / "run_many.py";
  const bool ok =
      run_logged(script_command(python, run_many, {script.string(), list.string()}), list.string() + ".log", why);
  fs::remove(list);
  if (!ok) {
    for (const auto& [r, tmp] : missing) fs::remove_all(tmp);  // what the failed process left; its log stays
    return false;
  }
  for (const auto& [r, tmp] : missing) put_in_place(tmp, r->dir, r->key);
  return true;
}

// Every trace in `dir` (its .safetensors files, sorted by name: per prompt ....off before ....on).
inline std::vector<protocol::Trace> read_traces(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<protocol::Trace> out;
  for (const auto& f : files) out.push_back(protocol::read_trace(f));
  return out;
}

// The traces of an adapter run (write(run, &why): its folder, written on first use), expected two per prompt; a folder
// that could not be written is a test failure with the adapter's reason.
template <class Run, class Write>
std::vector<protocol::Trace> run_traces(const Run& run, Write write) {
  std::string why;
  const std::filesystem::path dir = write(run, &why);
  if (dir.empty()) {
    ADD_FAILURE() << why;
    return {};
  }
  std::vector<protocol::Trace> out = read_traces(dir);
  EXPECT_EQ(out.size(), 2u * static_cast<std::size_t>(run.prompts)) << dir;
  return out;
}

// The logits (T, V) `ctx` computes cache OFF at every step of the trace's sequence (those that chose each token).
inline std::vector<std::vector<float>> replay_off(engine::Context& ctx, const protocol::Trace& t) {
  std::vector<std::vector<float>> z;
  std::vector<int> seq = t.prompt_ids;
  for (int tok : t.generated_ids) {
    z.push_back(ctx.recompute(seq));
    seq.push_back(tok);
  }
  return z;
}

// max over the steps both have of ‖a[s] − b[s]‖∞, logits (T, V).
inline double max_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double d = 0.0;
  for (std::size_t s = 0; s < std::min(a.size(), b.size()); ++s) d = std::max(d, analysis::max_abs_diff(a[s], b[s]));
  return d;
}

}  // namespace kvconf::testing
