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

// stories260K (a llama2.c .bin in the shared data) as an HF folder, converted once by adapters/hf/llama2c_to_hf.py.
inline std::filesystem::path stories_hf(std::string* why) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(KVCONF_HF_TRACES_DIR) / "stories260K-hf";
  const fs::path converter = fs::path(KVCONF_SOURCE_DIR) / "adapters/hf/llama2c_to_hf.py",
                 bin = fs::path(KVCONF_SHARED_DIR) / "models/stories260K/stories260K.bin";
  return write_once(
      dir, why,
      [&](const fs::path& tmp) {
        return "\"" + std::string(KVCONF_PYTHON) + "\" \"" + converter.string() + "\" \"" + bin.string() + "\" \"" +
               tmp.string() + "\"";
      },
      fingerprint(converter) + fingerprint(bin) + KVCONF_HF_ENGINE);
}

// The folder holding the run's traces, or the reason they could not be written (the adapter's stderr tail).
// Fixture "stories260K" runs the converted HF folder on the stories prompt set.
inline std::filesystem::path hf_traces(const HfRun& r, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(KVCONF_HF_TRACES_DIR);
  const fs::path dir = root / r.id();
  fs::create_directories(root);
  const bool stories = r.fixture == "stories260K";
  fs::path model_dir = fs::path(KVCONF_FIXTURES_DIR) / "models" / r.fixture;
  if (stories && (model_dir = stories_hf(why)).empty()) return {};
  const std::string prompts =
      !r.prompt_set.empty()
          ? r.prompt_set
          : std::string(KVCONF_FIXTURES_DIR) + (stories ? "/prompts/stories.json" : "/prompts/gsm8k.json");
  const auto command = [&](const fs::path& tmp) {
    return std::string("\"") + KVCONF_PYTHON + "\" \"" + KVCONF_SOURCE_DIR +
           "/adapters/hf/kvconf_hf_trace.py\" --model \"" + model_dir.string() + "\" --prompts \"" + prompts +
           "\" --n " + std::to_string(r.prompts) + " --max-new-tokens " + std::to_string(r.tokens) + " --dtype " +
           r.dtype + " --attention " + r.attention + " --strategy " + r.strategy + (r.hidden ? " --hidden" : "") +
           " --out \"" + tmp.string() + "\"";
  };
  // What made the traces: the options, every module of the adapter, transformers and torch, the checkpoint, the
  // prompts. Any change writes them again.
  const std::string key = command(fs::path("OUT")) + "\nadapter " +
                          folder_fingerprint(fs::path(KVCONF_SOURCE_DIR) / "adapters/hf", ".py") + "\nengine " +
                          KVCONF_HF_ENGINE + "\nmodel " + folder_fingerprint(model_dir) + "\nprompts " +
                          fingerprint(prompts);
  return write_once(dir, why, command, key);
}

}  // namespace kvconf::testing
