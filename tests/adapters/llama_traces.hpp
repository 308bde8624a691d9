// Traces of llama.cpp runs for the llama.cpp tests, written on first use by kvconf-llama-trace (adapters/llama_cpp)
// from the fixtures' GGUF files (build/gguf) into the build tree, shared by every test process (trace_dirs.hpp).
#pragma once

#include <filesystem>
#include <string>

#include "trace_dirs.hpp"

namespace kvconf::testing {

struct LlamaRun {
  std::string fixture;             // a GGUF under KVCONF_GGUF_DIR: <fixture>.<weights>.gguf, or stories260K
  std::string weights = "f32";     // f32 | f16 (with `gguf`: its weights' name, e.g. q4_1)
  std::string cache_type = "f32";  // f32 | f16 | q8_0 | q4_0
  bool flash = false;
  std::string strategy = "greedy";
  int prompts = 2, tokens = 12;
  // Another scenario's two sides than cache ON/OFF (chunked, prefix, refill, restore, batch), and its options: chunked
  // feeds the prompt in calls of `chunk` tokens, refill and restore act after step `at_step`.
  std::string scenario = "";
  int chunk = 4, at_step = 3;
  // A prompt set of its own (a file the test wrote; its stem names the run), else the fixture's (stories260K's
  // token-id prompts or GSM8K's).
  std::string prompt_file = "";
  bool kv = false;  // --kv: the K/V rows read from llama.cpp's saved state (cache OFF: step 0's recompute)
  std::string plant = "";  // a planted path lie (kvconf-llama-trace's hidden --plant): recompute_on, batch_alone
  std::string gguf = "";   // a GGUF file of its own (SmolLM2's original Q4_1), else <fixture>.<weights>.gguf
  bool attn_rot = true;    // --attn-rot on (llama.cpp's default Hadamard rotation of a quantised cache) or off
  std::string gguf_file() const {
    return gguf.empty() ? std::string(KVCONF_GGUF_DIR) + "/" + fixture + "." + weights + ".gguf" : gguf;
  }
  std::string id() const {
    return fixture + "." + weights + ".kv" + cache_type + (flash ? ".fa" : ".sm") + "." + strategy + ".n" +
           std::to_string(prompts) + ".t" + std::to_string(tokens) +
           (scenario.empty() ? "" : "." + scenario + ".c" + std::to_string(chunk) + ".a" + std::to_string(at_step)) +
           (prompt_file.empty() ? "" : "." + std::filesystem::path(prompt_file).stem().string()) + (kv ? ".kv" : "") +
           (plant.empty() ? "" : ".plant-" + plant) + (attn_rot ? "" : ".norot");
  }
};

// The folder holding the run's traces, or the reason they could not be written (the adapter's stderr tail).
inline std::filesystem::path llama_traces(const LlamaRun& r, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(KVCONF_LLAMA_TRACES_DIR) / r.id();
  const auto command = [&](const fs::path& tmp) {
    return std::string("\"") + KVCONF_LLAMA_TRACE_EXE + "\" --model \"" + r.gguf_file() + "\" --model-name " +
           r.fixture + " --prompts \"" +
           (r.prompt_file.empty() ? std::string(KVCONF_FIXTURES_DIR) + "/prompts/" +
                                        (r.fixture == "stories260K" ? "stories" : "gsm8k") + ".json"
                                  : r.prompt_file) +
           "\" --n " + std::to_string(r.prompts) + " --max-new-tokens " + std::to_string(r.tokens) + " --cache-type " +
           r.cache_type + " --flash-attn " + (r.flash ? "on" : "off") + " --strategy " + r.strategy +
           (r.scenario.empty() ? std::string()
                               : " --scenario " + r.scenario + " --chunk " + std::to_string(r.chunk) + " --at-step " +
                                     std::to_string(r.at_step)) +
           (r.kv ? " --kv" : "") + (r.plant.empty() ? "" : " --plant " + r.plant) +
           (r.attn_rot ? "" : " --attn-rot off") + " --out \"" + tmp.string() + "\"";
  };
  // What made the traces: the options, the adapter program, llama.cpp's libraries, the GGUF and the prompts. Any
  // change writes them again.
  const std::string prompts = r.prompt_file.empty() ? std::string(KVCONF_FIXTURES_DIR) + "/prompts/" +
                                                          (r.fixture == "stories260K" ? "stories" : "gsm8k") + ".json"
                                                    : r.prompt_file;
  const std::string key = command(fs::path("OUT")) + "\nadapter " + fingerprint(KVCONF_LLAMA_TRACE_EXE) +
                          "\nengine " + folder_fingerprint(fs::path(KVCONF_LLAMA_CPP_LIB_DIR), ".so") + "\nmodel " +
                          fingerprint(r.gguf_file()) +
                          "\nprompts " + fingerprint(prompts);
  return write_once(dir, why, command, key);
}

}  // namespace kvconf::testing
