// kvconf-llama-trace: llama.cpp's cache-ON and cache-OFF runs of a prompt set, written as kvconf.trace/1.2 files that
// `kvconf check` judges as it judges transformers' (docs/LLAMA_CPP.md, docs/TRACES.md). Exit 0, or 2 with one line
// naming the file or option on bad input.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "kvconf/analysis/prompts.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/engine/scenario.hpp"
#include "chat_tokens.hpp"
#include "llama_run.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace kvconf;
using llama_cpp::BadInput;

namespace {

// The prompt set (analysis::read_prompts: the file the fixtures write), each id unique and usable in a file name (the
// traces are named after it), each token inside the model's vocabulary.
std::vector<analysis::Prompt> load_prompts(const std::string& path, std::size_t vocab) {
  std::vector<analysis::Prompt> prompts;
  try {
    prompts = analysis::read_prompts(path);
  } catch (const std::runtime_error& e) {
    throw BadInput(e.what());
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const analysis::Prompt& p = prompts[i];
    const std::string where = path + ": prompts[" + std::to_string(i) + "]";
    if (p.id.empty() || p.id.find_first_of("/\\") != std::string::npos || p.id == "." || p.id == "..")
      throw BadInput(where + ".id: '" + p.id + "' cannot name a file");
    if (!seen.insert(p.id).second) throw BadInput(where + ".id: duplicate id '" + p.id + "'");
    for (int t : p.ids)
      if (static_cast<std::size_t>(t) >= vocab)
        throw BadInput(where + ".ids: token " + std::to_string(t) + " is outside the model's vocabulary [0, " +
                       std::to_string(vocab) + ") (a prompt set of another tokenizer?)");
  }
  return prompts;
}

// --tokenize: each prompt's text as one user turn after `system`, in the GGUF's chat template, tokenised by
// llama.cpp (chat_tokens.hpp), written as the prompt set OUT/tokens.json (ids: llama.cpp's).
void write_tokens(const llama_cpp::Model& m, std::vector<analysis::Prompt> prompts, const std::string& prompts_path,
                  const std::string& system, const fs::path& out) {
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].text.empty())
      throw BadInput(prompts_path + ": prompts[" + std::to_string(i) + "].text: empty (--tokenize tokenises it)");
    prompts[i].ids = llama_cpp::tokenize(m, llama_cpp::chat_text(m, system, prompts[i].text));
  }
  analysis::write_prompts(out / "tokens.json", prompts);
  std::printf("%s: %zu prompts tokenised by llama.cpp\n", (out / "tokens.json").c_str(), prompts.size());
}

// The trace's model.weights: the GGUF's file type, how many tensors hold each ggml type, and the type ggml's CPU
// matrix product converts its activations to for each.
json weights_json(const llama_cpp::WeightTypes& w) {
  return {{"file_type", w.file_type}, {"tensor_types", w.tensors}, {"mul_mat_input", w.mul_mat_in}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvconf-llama-trace: llama.cpp cache-ON / cache-OFF traces (kvconf.trace/1.2) for kvconf check"};
  std::string model_path, prompts_path, out_dir, model_name, strategy = "greedy", flash = "off", paths = "on,off",
                                                             scenario = "cache";
  std::size_t chunk = 4, at_step = 3;
  std::size_t n = 1;
  bool tokenize = false;
  std::string system;
  llama_cpp::RunOptions o;
  app.add_option("--model", model_path,
                 "GGUF file: F32, F16, BF16 or quantised weights (the trace's model.weights says which)")
      ->required();
  app.add_option("--prompts", prompts_path, "prompt set JSON ({\"prompts\": [{\"id\", \"ids\"}]})")->required();
  app.add_option("--out", out_dir, "folder for the traces (created)")->required();
  app.add_option("--n", n, "the first N prompts (default 1)");
  app.add_option("--model-name", model_name, "model.name in the traces (default: the GGUF's file stem)");
  app.add_option("--paths", paths, "on,off (default), on or off");
  app.add_option("--cache-type", o.cache_type, "KV cache type: f32, f16 (llama.cpp's default), q8_0, q4_0");
  app.add_option("--flash-attn", flash, "on: flash_attn_ext; off: soft_max + mul_mat (default)");
  app.add_option("--threads", o.threads, "threads (default 1)");
  app.add_option("--batch", o.batch, "prompt evaluation's physical batch n_ubatch (default 512)");
  app.add_option("--max-new-tokens", o.max_new_tokens, "tokens per run (default 16)");
  app.add_option("--strategy", strategy, "greedy (default), topk, topp");
  app.add_option("--top-k", o.sampler.top_k, "k of topk (default 50)");
  app.add_option("--top-p", o.sampler.top_p, "p of topp (default 0.9)");
  app.add_option("--temperature", o.sampler.temperature, "temperature (default 1)");
  app.add_option("--seed", o.sampler.seed, "seed of the shared draws step_draw(seed, t) (default 0)");
  app.add_option("--scenario", scenario,
                 "cache (default: cache ON vs OFF), or both sides of chunked, prefix, refill, restore, batch, "
                 "preempt or kv_dtype (vs the plain cache-ON run; docs/SCENARIOS.md, docs/LLAMA_CPP.md). kv_dtype: "
                 "side A keeps its cache in --cache-type (q8_0 or q4_0), side B in f16 (f32 for an F32 GGUF)");
  app.add_option("--chunk", chunk, "tokens per prompt chunk of --scenario chunked (default 4)");
  app.add_option("--at-step", at_step,
                 "refill, restore: the event follows this step's token; preempt: this step's call recomputes the "
                 "prompt and every token so far over a cleared memory (default 3)");
  std::string attn_rot = "on";
  app.add_option(
      "--attn-rot", attn_rot,
      "on (llama.cpp's default): a quantised cache stores Q, K, V rotated by a Hadamard matrix "
      "(llama.cpp PR 21038); off: sets LLAMA_ATTN_ROT_DISABLE=1, the cache stores the rows themselves "
      "(--scenario kv_dtype writes --kv rows only then: rotated rows are not comparable element by element)");
  app.add_flag("--kv", o.kv,
               "also write k_rows / v_rows (the sequence's cached K and V, read from llama.cpp's saved state) for "
               "kvconf check's cached_kv rule; not for models with sliding-window layers");
  app.add_option("--kv-step", o.kv_step,
                 "cache OFF with --kv: the step whose recompute's cache is written (default 0)");
  // kvconf's own tests only (hidden from --help): a planted path lie, RunOptions::plant.
  app.add_option("--plant", o.plant)->check(CLI::IsMember({"recompute_on", "batch_alone"}))->group("");
  // kvconf's own tests only (hidden): OUT/tokens.json, the prompts' texts tokenised by llama.cpp (write_tokens), with
  // `--system` as the chat's system turn.
  app.add_flag("--tokenize", tokenize)->group("");
  app.add_option("--system", system)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    try {
      o.sampler.strategy = engine::parse_strategy(strategy);
    } catch (const std::invalid_argument& e) {
      throw BadInput("--strategy: " + std::string(e.what()));
    }
    if (flash != "on" && flash != "off") throw BadInput("--flash-attn '" + flash + "': expected on or off");
    o.flash_attn = flash == "on";
    if (paths != "on,off" && paths != "on" && paths != "off" && paths != "off,on")
      throw BadInput("--paths '" + paths + "': expected on,off, on or off");
    if (o.max_new_tokens < 1) throw BadInput("--max-new-tokens must be at least 1");
    if (!engine::parse_scenario(scenario))  // engine/scenarios.json's list
      throw BadInput("--scenario '" + scenario + "': expected " + engine::scenario_names_text());
    if (scenario == "chunked" && chunk < 1) throw BadInput("--chunk must be at least 1");
    llama_cpp::check_event_step(scenario, at_step, o.max_new_tokens);  // before the model loads
    if (o.kv && o.kv_step >= o.max_new_tokens)
      throw BadInput("--kv-step " + std::to_string(o.kv_step) + ": expected 0 to " +
                     std::to_string(o.max_new_tokens - 1) + " (--max-new-tokens " + std::to_string(o.max_new_tokens) +
                     ")");
    llama_cpp::check_cache_type(o.cache_type);  // before the model loads
    if (attn_rot != "on" && attn_rot != "off") throw BadInput("--attn-rot '" + attn_rot + "': expected on or off");
    if (attn_rot == "off") setenv("LLAMA_ATTN_ROT_DISABLE", "1", 1);       // read when a context's cache is made
    if (scenario == "kv_dtype" && !engine::parse_kv_format(o.cache_type))  // side A's cache in a narrower format
      throw BadInput("--cache-type " + o.cache_type +
                     ": --scenario kv_dtype keeps side A's cache in q8_0 or q4_0 (side B keeps f16, or f32 for an F32 "
                     "GGUF)");
    if (!fs::is_regular_file(model_path)) throw BadInput(model_path + ": --model is not a file");
    const llama_cpp::Model model(model_path, tokenize);
    const std::string dtype = model.weights().dtype();
    std::vector<analysis::Prompt> prompts = load_prompts(prompts_path, model.vocab());
    if (n < 1 || n > prompts.size())
      throw BadInput(prompts_path + ": --n " + std::to_string(n) + " but the file has " +
                     std::to_string(prompts.size()) + " prompts");
    if ((scenario == "prefix" || scenario == "batch") && prompts.size() < 2)
      throw BadInput(prompts_path + ": --scenario " + scenario +
                     " needs a second prompt (the other request: the prefix's donor, the batch's neighbours)");
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec || !fs::is_directory(out_dir)) throw BadInput(out_dir + ": --out cannot be created as a folder");
    if (tokenize) {
      prompts.resize(n);
      write_tokens(model, std::move(prompts), prompts_path, system, out_dir);
      return 0;
    }
    if (model_name.empty()) model_name = fs::path(model_path).stem().string();
    // Quantised weights lead the attention field, so that the profile names them (fp16-llama.cpp-q4_1-softmax-kvf16;
    // WeightTypes::dtype says why fp16, model.weights what the products read).
    // kv_dtype: both sides are named after side B's cache (the format side A keeps is scenario.kv_format).
    const std::string reference_cache = dtype == "float32" ? "f32" : "f16";
    const std::string attention = (model.weights().quantised() ? model.weights().file_type + "-" : std::string()) +
                                  (o.flash_attn ? "flash" : "softmax") + "-kv" +
                                  (scenario == "kv_dtype" ? reference_cache : o.cache_type) +
                                  (attn_rot == "off" ? "-norot" : "");
    // kv_dtype with llama.cpp's rotation: side A's saved rows are H·k in q8_0 / q4_0, side B's k: no K/V rows.
    const bool rotated_kv = scenario == "kv_dtype" && attn_rot == "on" && o.kv;
    if (rotated_kv)
      std::fprintf(stderr,
                   "kvconf-llama-trace: --kv: no k_rows / v_rows for --scenario kv_dtype: llama.cpp stores a quantised "
                   "cache Hadamard-rotated (--attn-rot off writes them)\n");
    const std::string version = llama_cpp::engine_version();
    for (std::size_t i = 0; i < n; ++i) {
      const analysis::Prompt& p = prompts[i];
      // The other request, as the HF adapter and kvconf's engine make it: prefix shares the prompt's first half with
      // a donor of that half and the next prompt's tokens; batch runs with a longer request (the next prompt, then
      // this one) and a shorter one (the first third of the shorter of the two).
      const std::vector<int>& other = prompts[(i + 1) % prompts.size()].ids;
      llama_cpp::ScenarioSide ss;
      ss.name = scenario;
      ss.at_step = at_step;
      ss.shared = std::max<std::size_t>(1, p.ids.size() / 2);
      ss.donor.assign(p.ids.begin(), p.ids.begin() + static_cast<std::ptrdiff_t>(ss.shared));
      ss.donor.insert(ss.donor.end(), other.begin() + (other.empty() ? 0 : 1), other.end());
      std::vector<int> longer = other;
      longer.insert(longer.end(), p.ids.begin(), p.ids.end());
      ss.batch_with = {
          longer, std::vector<int>(other.begin(), other.begin() + static_cast<std::ptrdiff_t>(std::max<std::size_t>(
                                                                      1, std::min(other.size(), p.ids.size()) / 3)))};
      for (const bool on : {true, false}) {
        if (scenario == "cache" && ((on && paths == "off") || (!on && paths == "on"))) continue;
        llama_cpp::RunOptions ro = o;  // chunked: side A feeds the prompt in chunks, side B in one call
        ro.chunk = scenario == "chunked" && on ? chunk : 0;
        if (scenario == "kv_dtype" && !on) ro.cache_type = reference_cache;  // side A: --cache-type
        const bool other_side = scenario != "cache" && scenario != "chunked" && scenario != "kv_dtype" && on;
        const llama_cpp::RunResult r = other_side ? llama_cpp::run_scenario(model, p.ids, ss, ro)
                                                  : llama_cpp::run(model, p.ids, on || scenario != "cache", ro);
        json sc = {{"name", scenario}};
        std::string side = on ? ".on" : ".off";
        if (scenario != "cache") {
          sc["side"] = on ? "scenario" : "reference";
          side = "." + scenario;
          if (scenario == "chunked") sc["chunk"] = chunk, side += std::to_string(chunk);
          if (scenario == "refill" || scenario == "restore" || scenario == "preempt")
            sc["at_step"] = at_step, side += std::to_string(at_step);
          if (scenario == "prefix") sc["shared"] = ss.shared;
          if (scenario == "kv_dtype") sc["kv_format"] = o.cache_type, side += "_" + o.cache_type;
          side += on ? ".scenario" : ".reference";
        }
        json calls = json::array();
        for (const auto& c : r.calls) calls.push_back(c.batch ? json{c.fed, c.cached, c.batch} : json{c.fed, c.cached});
        json meta = {{"format", "kvconf.trace/1.2"},
                     {"engine", {{"name", "llama.cpp"}, {"version", version}, {"attention", attention}}},
                     {"model",
                      {{"name", model_name},
                       {"path", model_path},
                       {"vocab_size", model.vocab()},
                       {"n_layers", model.n_layers()},
                       {"hidden_size", model.hidden()},
                       {"weights", weights_json(model.weights())}}},
                     {"dtype", dtype},
                     {"path", on || scenario != "cache" ? "cache_on" : "cache_off"},
                     {"strategy",
                      {{"name", engine::strategy_key(o.sampler.strategy)},
                       {"top_k", o.sampler.top_k},
                       {"top_p", o.sampler.top_p},
                       {"temperature", o.sampler.temperature},
                       {"seed", o.sampler.seed}}},
                     {"prompt_id", p.id},
                     {"prompt_ids", p.ids},
                     {"generated_ids", r.generated},
                     {"draws", r.draws},
                     {"scenario", sc},
                     {"calls", calls},
                     {"call_of_step", r.call_of_step},
                     {"cache_after", r.cache_after},
                     {"calls_reported_by", llama_cpp::kCallsReportedBy}};
        engine::TensorData logits{"logits", engine::Dtype::f32, {r.logits.size(), model.vocab()}, {}};
        for (const auto& row : r.logits) logits.values.insert(logits.values.end(), row.begin(), row.end());
        std::vector<engine::TensorData> tensors = {logits};
        if (r.kv && !rotated_kv) {  // (layers, rows, kv width), exact in f32 for an f32 or f16 cache
          const std::vector<std::size_t> shape = {r.kv->layers, r.kv->rows, r.kv->dim};
          tensors.push_back({"k_rows", engine::Dtype::f32, shape, r.kv->k});
          tensors.push_back({"v_rows", engine::Dtype::f32, shape, r.kv->v});
          if (!on && scenario == "cache") meta["kv_step"] = o.kv_step;
        }
        const fs::path file = fs::path(out_dir) / (p.id + "." + dtype + "." + attention + "." + strategy + ".s" +
                                                   std::to_string(o.sampler.seed) + side + ".safetensors");
        engine::write_safetensors(file, tensors, {{"kvconf.trace", meta.dump()}});
        std::printf("%s: %s T=%zu tokens", file.c_str(), side.c_str() + 1, r.generated.size());
        for (int t : r.generated) std::printf(" %d", t);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const BadInput& e) {
    std::fprintf(stderr, "kvconf-llama-trace: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvconf-llama-trace: %s\n", e.what());
    return 1;
  }
}
