// Traces of HF transformers runs for the cross-check tests, written on first use by adapters/hf/kvconf_hf_trace.py
// (KVCONF_PYTHON) into the build tree and shared by every test process: each configuration is written into a fresh
// temporary folder and renamed into place, so concurrent test processes never see a half-written set; hf_traces_many
// writes several in one process (the cross-check's CTest fixture, HfTraces.EveryRunInOnePythonProcess).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "trace_dirs.hpp"

namespace kvconf::testing {

struct HfRun {
  std::string fixture;  // folder under KVCONF_FIXTURES_DIR/models
  std::string dtype = "float32";
  std::string attention = "eager";
  std::string strategy = "greedy";
  int prompts = 2, tokens = 12;
  bool hidden = false;
  std::string prompt_set = {};  // a prompt file; empty: the fixture's (prompts/gsm8k.json, stories260K's stories.json)
  std::string id() const {
    return fixture + "." + dtype + "." + attention + "." + strategy + ".n" + std::to_string(prompts) + ".t" +
           std::to_string(tokens) + (hidden ? ".h" : "") +
           (prompt_set.empty() ? "" : "." + std::filesystem::path(prompt_set).stem().string());
  }
};

// stories260K, a llama2.c .bin in the shared data.
inline std::filesystem::path stories_bin() {
  return std::filesystem::path(KVCONF_SHARED_DIR) / "models/stories260K/stories260K.bin";
}

// stories260K as an HF folder, converted once by adapters/hf/llama2c_to_hf.py.
inline std::filesystem::path stories_hf(std::string* why) {
  namespace fs = std::filesystem;
  const fs::path converter = fs::path(KVCONF_SOURCE_DIR) / "adapters/hf/llama2c_to_hf.py";
  return write_one({fs::path(KVCONF_HF_TRACES_DIR) / "stories260K-hf",
                    fingerprint(converter) + fingerprint(stories_bin()) + KVCONF_HF_ENGINE,
                    [](const fs::path& tmp) {
                      return std::vector<std::string>{stories_bin().string(), tmp.string()};
                    }},
                   KVCONF_PYTHON, converter, why);
}

// The run as a cached folder: where its traces go, what makes them (the options, every module of the adapter,
// transformers and torch, the checkpoint, the prompts: any change writes them again) and the adapter's arguments.
// Fixture "stories260K" runs the converted HF folder on the stories prompt set (nullopt, *why set, when that
// conversion failed).
inline std::optional<CachedRun> hf_cached_run(const HfRun& r, std::string* why) {
  namespace fs = std::filesystem;
  const bool stories = r.fixture == "stories260K";
  fs::path model_dir = fs::path(KVCONF_FIXTURES_DIR) / "models" / r.fixture;
  if (stories && (model_dir = stories_hf(why)).empty()) return std::nullopt;
  const std::string prompts =
      !r.prompt_set.empty()
          ? r.prompt_set
          : std::string(KVCONF_FIXTURES_DIR) + (stories ? "/prompts/stories.json" : "/prompts/gsm8k.json");
  const auto args = [=](const fs::path& out) {
    std::vector<std::string> a = {"--model", model_dir.string(), "--prompts", prompts, "--n",
                                  std::to_string(r.prompts), "--max-new-tokens", std::to_string(r.tokens), "--dtype",
                                  r.dtype, "--attention", r.attention, "--strategy", r.strategy};
    if (r.hidden) a.push_back("--hidden");
    a.insert(a.end(), {"--out", out.string()});
    return a;
  };
  const std::string key = joined(args("OUT")) + "\nadapter " +
                          folder_fingerprint(fs::path(KVCONF_SOURCE_DIR) / "adapters/hf", ".py") + "\nengine " +
                          KVCONF_HF_ENGINE + "\nmodel " + folder_fingerprint(model_dir) + "\nprompts " +
                          fingerprint(prompts);
  return CachedRun{fs::path(KVCONF_HF_TRACES_DIR) / r.id(), key, args};
}

inline std::filesystem::path hf_script() {
  return std::filesystem::path(KVCONF_SOURCE_DIR) / "adapters/hf/kvconf_hf_trace.py";
}

// The folder holding the run's traces (written by its own transformers process when missing), or empty with *why
// set to the adapter's stderr tail.
inline std::filesystem::path hf_traces(const HfRun& r, std::string* why) {
  const std::optional<CachedRun> c = hf_cached_run(r, why);
  return c ? write_one(*c, KVCONF_PYTHON, hf_script(), why) : std::filesystem::path();
}

// Every run's folder, those missing written by one transformers process (write_many: torch and transformers imported
// once); false with *why set when a conversion or that process failed. *written: how many it wrote.
inline bool hf_traces_many(const std::vector<HfRun>& runs, std::string* why, std::size_t* written = nullptr) {
  std::vector<CachedRun> cached;
  for (const HfRun& r : runs) {
    std::optional<CachedRun> c = hf_cached_run(r, why);
    if (!c) return false;
    cached.push_back(std::move(*c));
  }
  return write_many(cached, KVCONF_PYTHON, hf_script(), why, written);
}

}  // namespace kvconf::testing
