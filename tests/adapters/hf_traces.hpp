// Traces of HF transformers runs for the cross-check tests, written on first use by adapters/hf/kvconf_hf_trace.py
// (KVCONF_PYTHON) into the build tree and shared by every test process: each configuration is written into a fresh
// temporary folder and renamed into place, so concurrent test processes never see a half-written set.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <unistd.h>

namespace kvconf::testing {

struct HfRun {
  std::string fixture;  // folder under KVCONF_FIXTURES_DIR/models
  std::string dtype = "float32";
  std::string attention = "eager";
  std::string strategy = "greedy";
  int prompts = 2, tokens = 12;
  bool hidden = false;
  std::string id() const {
    return fixture + "." + dtype + "." + attention + "." + strategy + ".n" + std::to_string(prompts) + ".t" +
           std::to_string(tokens) + (hidden ? ".h" : "");
  }
};

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

// stories260K (a llama2.c .bin in the shared data) as an HF folder, converted once by adapters/hf/llama2c_to_hf.py.
inline std::filesystem::path stories_hf(std::string* why) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(KVCONF_HF_TRACES_DIR) / "stories260K-hf";
  if (fs::is_directory(dir)) return dir;
  fs::create_directories(dir.parent_path());
  const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
  const std::string cmd = std::string("\"") + KVCONF_PYTHON + "\" \"" + KVCONF_SOURCE_DIR +
                          "/adapters/hf/llama2c_to_hf.py\" \"" + KVCONF_SHARED_DIR +
                          "/models/stories260K/stories260K.bin\" \"" + tmp.string() + "\"";
  if (!run_logged(cmd, tmp.string() + ".log", why)) return {};
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);
  return dir;
}

// The folder holding the run's traces, or the reason they could not be written (the adapter's stderr tail).
// Fixture "stories260K" runs the converted HF folder on the stories prompt set.
inline std::filesystem::path hf_traces(const HfRun& r, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(KVCONF_HF_TRACES_DIR);
  const fs::path dir = root / r.id();
  // Traces written by an older adapter (the script changed since) are written again.
  std::error_code age;
  const fs::path script = fs::path(KVCONF_SOURCE_DIR) / "adapters/hf/kvconf_hf_trace.py";
  if (fs::is_directory(dir) && fs::last_write_time(dir, age) < fs::last_write_time(script, age))
    fs::remove_all(dir, age);
  if (fs::is_directory(dir)) return dir;
  fs::create_directories(root);
  const bool stories = r.fixture == "stories260K";
  fs::path model_dir = fs::path(KVCONF_FIXTURES_DIR) / "models" / r.fixture;
  if (stories && (model_dir = stories_hf(why)).empty()) return {};
  const std::string prompts =
      std::string(KVCONF_FIXTURES_DIR) + (stories ? "/prompts/stories.json" : "/prompts/gsm8k.json");
  const fs::path tmp = root / (r.id() + ".tmp" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const fs::path log = root / (r.id() + ".log" + std::to_string(::getpid()));
  const std::string cmd =
      std::string("\"") + KVCONF_PYTHON + "\" \"" + KVCONF_SOURCE_DIR + "/adapters/hf/kvconf_hf_trace.py\" --model \"" +
      model_dir.string() + "\" --prompts \"" + prompts + "\" --n " + std::to_string(r.prompts) + " --max-new-tokens " +
      std::to_string(r.tokens) + " --dtype " + r.dtype + " --attention " + r.attention + " --strategy " + r.strategy +
      (r.hidden ? " --hidden" : "") + " --out \"" + tmp.string() + "\"";
  if (!run_logged(cmd, log, why)) return {};
  std::error_code ec;
  fs::rename(tmp, dir, ec);  // another process may have won the race: then its folder stays and ours goes
  if (ec) fs::remove_all(tmp);
  return dir;
}

}  // namespace kvconf::testing
