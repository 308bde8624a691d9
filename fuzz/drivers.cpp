// The fuzz drivers (drivers.hpp): each writes the input where the parser reads it and calls the entry point the CLI
// calls (tools/*_command.cpp, protocol/), then what the CLI does next with the parsed value.
#include "drivers.hpp"

#include <cxxabi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <typeinfo>

#include "kvconf/analysis/prompts.hpp"
#include "kvconf/results/records.hpp"
#include "kvconf/engine/config.hpp"
#include "kvconf/engine/error.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/engine/tokenizer.hpp"
#include "kvconf/golden/golden.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/gsm8k.hpp"
#include "kvconf/protocol/protocol_inputs.hpp"
#include "kvconf/protocol/result_store.hpp"
#include "kvconf/protocol/trace.hpp"
#include "kvconf/protocol/trace_check.hpp"
#include "kvconf/reports/report.hpp"
#include "wire.hpp"  // kernels/plugin: the worker's kernel table

namespace kvconf::fuzz {
namespace fs = std::filesystem;
using nlohmann::json;

// ---- scratch files ----

namespace {

fs::path make_scratch() {
  const char* tmp = std::getenv("TMPDIR");
  std::error_code ec;
  const fs::path base = fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::path(tmp ? tmp : "/tmp");
  // libFuzzer ends with _Exit (no atexit handlers) when its time is up or it finds a crash: a folder whose process
  // is gone is removed here instead.
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("kvconf-fuzz-", 0) != 0) continue;
    const long pid = std::strtol(n.c_str() + 12, nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
  fs::path dir = base / ("kvconf-fuzz-" + std::to_string(::getpid()));
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  std::atexit([] {
    std::error_code e;
    fs::remove_all(scratch_dir(), e);
  });
  return dir;
}

std::string_view text_of(Bytes b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

void write_file(const fs::path& p, std::string_view data) {
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (f == nullptr) throw std::logic_error("fuzz driver: cannot write scratch file " + p.string());
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), f) != data.size()) {
    std::fclose(f);
    throw std::logic_error("fuzz driver: short write to " + p.string());
  }
  std::fclose(f);
}

// A fresh, empty folder under the scratch dir.
fs::path fresh_dir(const std::string& name) {
  const fs::path d = scratch_dir() / name;
  std::error_code ec;
  fs::remove_all(d, ec);
  fs::create_directories(d);
  return d;
}

template <class E>
bool is(const std::exception& e) {
  return dynamic_cast<const E*>(&e) != nullptr;
}

}  // namespace

const fs::path& scratch_dir() {
  static const fs::path dir = make_scratch();
  return dir;
}

fs::path write_scratch(const std::string& name, std::string_view data) {
  const fs::path p = scratch_dir() / name;
  write_file(p, data);
  return p;
}

fs::path write_scratch(const std::string& name, Bytes data) { return write_scratch(name, text_of(data)); }

std::vector<std::string_view> split_parts(std::string_view all, std::string_view sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = all.find(sep);
    if (at == std::string_view::npos) break;
    parts.push_back(all.substr(0, at));
    all.remove_prefix(at + sep.size());
  }
  parts.push_back(all);
  return parts;
}

// ---- the drivers ----

namespace {

// safetensors: SafetensorsFile::open validates the header against the file; then every tensor is widened, as the
// model loader and the trace reader do.
void run_safetensors(Bytes in) {
  const auto f = engine::SafetensorsFile::open(write_scratch("in.safetensors", in));
  std::size_t n = 0;
  for (const auto& [name, t] : f->tensors()) {
    n += t.to_float().size();
    if (f->find(name) != &t) throw std::logic_error("find(" + name + ") does not return the tensor");
  }
  (void)n;
}

// config.json: parse_hf_config, then what `kvconf generate` prints of it.
void run_config(Bytes in) {
  const engine::ModelConfig c = engine::parse_hf_config(write_scratch("config.json", in));
  (void)c.describe();
  (void)c.attn_scale();
  for (std::size_t l = 0; l < c.n_layers && l < 4096; ++l) (void)c.layer_is_sliding(l);
}

// A checkpoint folder as `kvconf generate --model DIR` reads it: parts config.json, the weights, and (a third part)
// model.safetensors.index.json naming the weights file "model-00001-of-00001.safetensors".
void run_checkpoint(Bytes in) {
  const auto parts = split_parts(text_of(in));
  const fs::path dir = fresh_dir("ckpt");
  write_file(dir / "config.json", parts[0]);
  const std::string_view weights = parts.size() > 1 ? parts[1] : std::string_view();
  if (parts.size() > 2) {
    write_file(dir / "model-00001-of-00001.safetensors", weights);
    write_file(dir / "model.safetensors.index.json", parts[2]);
  } else {
    write_file(dir / "model.safetensors", weights);
  }
  const engine::Model m = engine::load_model(dir, Format::fp16);
  (void)m.n_params();
}

// llama2.c .bin: load_llama2c (the .bin branch of load_model), converted to fp16 storage as the fp16 profiles do.
void run_llama2c(Bytes in) {
  const engine::Model m = engine::load_model(write_scratch("model.bin", in), Format::fp16);
  (void)m.n_params();
}

// tokenizer.model: Tokenizer::load (libsentencepiece parses the protobuf; kvconf checks the file and the status),
// then what the protocol does with it: vocab_size against the model's, encode a prompt, decode ids below vocab_size.
void run_tokenizer(Bytes in) {
  const engine::Tokenizer t = engine::Tokenizer::load(write_scratch("tokenizer.model", in));
  const std::size_t v = t.vocab_size();
  (void)t.bos_id();
  (void)t.eos_id();
  const std::vector<int> ids = t.encode("Question: Natalia sold 48 clips in April. How many?\nAnswer:", true);
  std::vector<int> some;
  for (std::size_t i = 0; i < v && i < 64; ++i) some.push_back(static_cast<int>(i));
  (void)t.decode(some);
  std::vector<int> valid;
  for (int id : ids)
    if (id >= 0 && static_cast<std::size_t>(id) < v) valid.push_back(id);
  (void)t.decode(valid);
}

// tokenizer.json (byte-level BPE, e.g. SmolLM2's): Tokenizer::load of a *.json file (load_byte_level), with a
// tokenizer_config.json beside it when the input has a second part (split at a line =====), then what the protocol
// does with it: vocab_size, bos/eos (each -1 or an id below vocab_size), decode ids below vocab_size; decode of an id
// at vocab_size or of -1 must be refused with LoadError, and encode is refused (can_encode false).
void run_tokenizer_json(Bytes in) {
  const auto parts = split_parts(text_of(in));
  const fs::path dir = fresh_dir("tokenizer_json");
  write_file(dir / "tokenizer.json", parts[0]);
  if (parts.size() > 1) write_file(dir / "tokenizer_config.json", parts[1]);
  const engine::Tokenizer t = engine::Tokenizer::load(dir / "tokenizer.json");
  const std::size_t v = t.vocab_size();
  if (v == 0 || t.can_encode()) throw std::logic_error("tokenizer.json loaded empty or as able to encode");
  std::vector<int> some;
  for (const int id : {t.bos_id(), t.eos_id()}) {
    if (id < -1 || (id >= 0 && static_cast<std::size_t>(id) >= v))
      throw std::logic_error("bos/eos id " + std::to_string(id) + " outside [0, " + std::to_string(v) + ")");
    if (id >= 0) some.push_back(id);
  }
  for (std::size_t i = 0; i < v && i < 64; ++i) some.push_back(static_cast<int>(i));
  (void)t.decode(some);
  for (const int bad : {static_cast<int>(v), -1}) {
    try {
      (void)t.decode({0, bad});
    } catch (const engine::LoadError&) {
      continue;
    }
    throw std::logic_error("decode of id " + std::to_string(bad) + " returned (vocab_size " + std::to_string(v) +
                           "): expected LoadError");
  }
}

// The protocol's prompt options with nothing taken from ../shared (no gold lookup in the shared GSM8K file).
protocol::ProtocolOptions prompt_options(const std::string& spec) {
  protocol::ProtocolOptions o;
  o.prompts = spec;
  o.n = 2;
  o.clamp_n = true;
  o.shots = 1;
  o.max_new_tokens = 8;
  o.sample_seed = 42;
  o.shared_dir = scratch_dir() / "no-shared";
  return o;
}

// GSM8K jsonl: resolve_prompts("gsm8k:FILE") as `kvconf model --prompts gsm8k:FILE` (read_gsm8k, the seeded sample,
// the few-shot exemplars, the prompt text) with a byte tokenizer in place of SentencePiece.
void run_gsm8k(Bytes in) {
  const fs::path file = write_scratch("test.jsonl", in);
  const protocol::ProtocolOptions o = prompt_options("gsm8k:" + file.string());
  const protocol::ModelSource m{"fuzz", scratch_dir(), {}};
  const auto encode = [](const std::string& text) {
    std::vector<int> ids{1};
    for (unsigned char c : text) ids.push_back(3 + c);
    return ids;
  };
  const protocol::PromptSet s = protocol::resolve_prompts(o, m, 512, 1u << 20, 259, encode);
  for (const auto& p : s.prompts) (void)protocol::last_number(protocol::cut_at_stop(p.gold.value_or("")));
}

// Prompt-set files: resolve_prompts("ids:FILE") as `kvconf model --prompts ids:FILE` (analysis::read_prompts, the
// vocabulary check, the seeded sample).
void run_prompts(Bytes in) {
  const fs::path file = write_scratch("prompts.json", in);
  const protocol::ProtocolOptions o = prompt_options("ids:" + file.string());
  const protocol::ModelSource m{"fuzz", scratch_dir(), {}};
  (void)protocol::resolve_prompts(o, m, 512, 1u << 20, 0, [](const std::string&) { return std::vector<int>{1}; });
}

// Golden baselines: read_baseline as `kvconf golden check`, then check() against an empty run and a round trip.
void run_golden(Bytes in) {
  const golden::Baseline b = golden::read_baseline(write_scratch("tokens-fp16-eager.json", in));
  (void)golden::check(b, {}, {});
  const json again = golden::to_json(golden::baseline_from_json(golden::to_json(b), "round-trip"));
  if (again != golden::to_json(b)) throw std::logic_error("golden baseline does not round-trip through to_json");
}

// The result store with resume: JsonlStore(file, resume=true) keyed as `kvconf model`/`check` (first byte even) or
// `kvconf run`'s kernel sweep (odd), then the records parsed as those commands do, then one append.
void run_result_store(Bytes in) {
  const bool pairs = in.empty() || in[0] % 2 == 0;
  const Bytes body = in.empty() ? in : in.subspan(1);
  const fs::path file = write_scratch("pairs.jsonl", body);
  std::function<std::string(const json&)> key_of;
  if (pairs)
    key_of = [](const json& j) { return results::run_pair_from_json(j).key(); };
  else
    key_of = [](const json& j) { return results::kernel_case_from_json(j).key(); };
  protocol::JsonlStore store(file, /*resume=*/true, key_of);
  for (const json& j : store.records()) {
    if (pairs)
      (void)results::run_pair_from_json(j);
    else
      (void)results::kernel_case_from_json(j);
  }
  if (!store.records().empty()) {
    const json first = store.records().front();
    if (!store.has(key_of(first))) throw std::logic_error("a resumed record's key is not in the store");
    store.append(first);
  }
  (void)protocol::read_jsonl(file);
}

// kvconf report: a result folder (parts pairs.jsonl, kernels.jsonl, manifest.json; an empty part is no file) read by
// read_results, then the rules and every report rendering `kvconf report` writes.
void run_report(Bytes in) {
  const auto parts = split_parts(text_of(in));
  const fs::path dir = fresh_dir("result");
  const char* names[] = {"pairs.jsonl", "kernels.jsonl", "manifest.json"};
  for (std::size_t i = 0; i < parts.size() && i < 3; ++i)
    if (!parts[i].empty()) write_file(dir / names[i], parts[i]);
  reports::ReportInput r = reports::read_results({dir});
  r.title = "fuzz";
  const auto v = reports::evaluate_rules(r);
  const json rj = reports::report_json(r, v);
  (void)reports::report_markdown(rj);
  (void)reports::report_html(rj);
  (void)reports::junit_xml(r.title, v);
  (void)reports::terminal_summary(r, v);
}

// kvconf.trace/1: read_trace as `kvconf check --on/--off`, then the pair check on the trace and its cache-OFF twin.
void run_trace(Bytes in) {
  const protocol::Trace t = protocol::read_trace(write_scratch("trace.safetensors", in));
  protocol::TracePair p{t, t};
  p.scenario_side.cache_on = true;
  p.reference_side.cache_on = false;
  p.reference_side.k_rows.clear();
  p.reference_side.v_rows.clear();
  p.reference_side.kv_rows = p.reference_side.kv_dim = 0;
  (void)protocol::check_trace_pair(p, nullptr);
}

// The plugin worker's kernel table (its hello): plugin_wire::deserialize, and serialize of the result reading back
// to the same table.
void run_plugin_table(Bytes in) {
  const auto t = plugin_wire::deserialize(std::string(text_of(in)));
  const auto again = plugin_wire::deserialize(plugin_wire::serialize(t));
  if (again.size() != t.size()) throw std::logic_error("kernel table does not round-trip");
  for (std::size_t i = 0; i < t.size(); ++i)
    if (again[i].name != t[i].name || again[i].mirrors != t[i].mirrors || again[i].kind != t[i].kind)
      throw std::logic_error("kernel table entry " + std::to_string(i) + " does not round-trip");
}

}  // namespace

const std::vector<Driver>& drivers() {
  static const std::vector<Driver> all = {
      {"safetensors", run_safetensors, is<engine::LoadError>, "engine::LoadError"},
      {"config", run_config, is<engine::LoadError>, "engine::LoadError"},
      {"checkpoint", run_checkpoint, is<engine::LoadError>, "engine::LoadError"},
      {"llama2c", run_llama2c, is<engine::LoadError>, "engine::LoadError"},
      {"tokenizer", run_tokenizer, is<engine::LoadError>, "engine::LoadError"},
      {"tokenizer_json", run_tokenizer_json, is<engine::LoadError>, "engine::LoadError"},
      {"gsm8k", run_gsm8k, is<protocol::BadInput>, "protocol::BadInput"},
      {"prompts", run_prompts, is<protocol::BadInput>, "protocol::BadInput"},
      {"golden", run_golden, is<golden::BadGoldenFile>, "golden::BadGoldenFile"},
      {"result_store", run_result_store, is<protocol::BadInput>, "protocol::BadInput"},
      // read_results documents std::runtime_error naming the file and line (report.hpp).
      {"report", run_report, is<std::runtime_error>, "std::runtime_error"},
      {"trace", run_trace, is<protocol::BadInput>, "protocol::BadInput"},
      // plugin_wire::deserialize documents std::runtime_error on a truncated table (wire.hpp).
      {"plugin_table", run_plugin_table, is<std::runtime_error>, "std::runtime_error"},
  };
  return all;
}

const Driver& driver(std::string_view name) {
  for (const Driver& d : drivers())
    if (name == d.name) return d;
  throw std::invalid_argument("no fuzz driver named '" + std::string(name) + "'");
}

int run_one(const Driver& d, const std::uint8_t* data, std::size_t size) {
  try {
    d.run(Bytes(data, size));
  } catch (const std::exception& e) {
    if (d.accepts(e)) return 0;
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> type(abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status),
                                                std::free);
    std::fprintf(stderr, "kvconf fuzz %s: %s escaped (expected %s): %s\n", d.name,
                 status == 0 ? type.get() : typeid(e).name(), d.error_type, e.what());
    std::abort();
  }
  return 0;
}

}  // namespace kvconf::fuzz
