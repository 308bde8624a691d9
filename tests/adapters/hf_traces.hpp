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
  std::string fixture;         // folder under KVCONF_FIXTURES_DIR/models
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

// The folder holding the run's traces, or the reason they could not be written (the adapter's stderr tail).
inline std::filesystem::path hf_traces(const HfRun& r, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(KVCONF_HF_TRACES_DIR);
  const fs::path dir = root / r.id();
  if (fs::is_directory(dir)) return dir;
  fs::create_directories(root);
  const fs::path tmp = root / (r.id() + ".tmp" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const fs::path log = root / (r.id() + ".log" + std::to_string(::getpid()));
  const std::string cmd = std::string("\"") + KVCONF_PYTHON + "\" \"" + KVCONF_SOURCE_DIR +
                          "/adapters/hf/kvconf_hf_trace.py\" --model \"" + KVCONF_FIXTURES_DIR + "/models/" +
                          r.fixture + "\" --prompts \"" + KVCONF_FIXTURES_DIR + "/prompts/gsm8k.json\" --n " +
                          std::to_string(r.prompts) + " --max-new-tokens " + std::to_string(r.tokens) + " --dtype " +
                          r.dtype + " --attention " + r.attention + " --strategy " + r.strategy +
                          (r.hidden ? " --hidden" : "") + " --out \"" + tmp.string() + "\" > \"" + log.string() +
                          "\" 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    if (why) {
      std::FILE* f = std::fopen(log.c_str(), "r");
      std::string text;
      char buf[512];
      while (f && std::fgets(buf, sizeof buf, f)) text += buf;
      if (f) std::fclose(f);
      *why = "the HF adapter failed: " + cmd + "\n" + text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
    }
    return {};
  }
  fs::remove(log);
  std::error_code ec;
  fs::rename(tmp, dir, ec);  // another process may have won the race: then its folder stays and ours goes
  if (ec) fs::remove_all(tmp);
  return dir;
}

}  // namespace kvconf::testing
