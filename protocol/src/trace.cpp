// Reading kvconf.trace/1 files (trace.hpp): the safetensors container through the engine's reader, the JSON metadata
// checked field by field, logits checked for shape and finiteness, token ids against the vocabulary.
#include "kvconf/protocol/trace.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/safetensors.hpp"
#include "kvconf/protocol/bad_input.hpp"

namespace kvconf::protocol {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

[[noreturn]] void bad(const fs::path& file, const std::string& field, const std::string& what) {
  throw BadInput(file.string() + ": field '" + field + "': " + what);
}

const json& member(const fs::path& file, const json& obj, const std::string& path, const std::string& name) {
  const std::string field = path.empty() ? name : path + "." + name;
  if (!obj.contains(name)) bad(file, field, "missing");
  return obj.at(name);
}

std::string str(const fs::path& file, const json& obj, const std::string& path, const std::string& name,
                bool non_empty = true) {
  const json& v = member(file, obj, path, name);
  if (!v.is_string() || (non_empty && v.get<std::string>().empty()))
    bad(file, path.empty() ? name : path + "." + name, "expected a non-empty string, got " + v.dump());
  return v.get<std::string>();
}

std::uint64_t uint(const fs::path& file, const json& v, const std::string& field, std::uint64_t min = 0) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0) ||
      v.get<std::uint64_t>() < min)
    bad(file, field, "expected an integer >= " + std::to_string(min) + ", got " + v.dump());
  return v.get<std::uint64_t>();
}

double number(const fs::path& file, const json& v, const std::string& field) {
  if (!v.is_number()) bad(file, field, "expected a number, got " + v.dump());
  return v.get<double>();
}

std::vector<int> ids(const fs::path& file, const json& obj, const std::string& name, std::size_t vocab) {
  const json& v = member(file, obj, "", name);
  if (!v.is_array() || v.empty()) bad(file, name, "expected a non-empty array of token ids");
  std::vector<int> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string f = name + "[" + std::to_string(i) + "]";
    if (!v[i].is_number_integer()) bad(file, f, "expected a token id (integer), got " + v[i].dump());
    const std::int64_t id = v[i].get<std::int64_t>();
    if (id < 0 || static_cast<std::uint64_t>(id) >= vocab)
      bad(file, f, "token id " + std::to_string(id) + " outside the vocabulary [0, " + std::to_string(vocab) + ")");
    out.push_back(static_cast<int>(id));
  }
  return out;
}

std::string short_dtype(const std::string& d) { return d == "float32" ? "fp32" : d == "float16" ? "fp16" : "bf16"; }

// The side's name (engine/scenarios.json): "cache_on" / "cache_off" for the cache scenario, else "<scenario>
// scenario-side" / "<scenario> reference-side".
std::string side_name(engine::Scenario s, bool side_a) {
  const engine::ScenarioInfo& info = engine::scenario_info(s);
  const std::string side = side_a ? info.side_a : info.side_b;
  return side == "cache_on" || side == "cache_off" ? side : std::string(info.name) + " " + side + "-side";
}

// 1.1's scenario {name, side, chunk, at_step, shared, kv_format} and calls / call_of_step (docs/TRACES.md); in a 1
// trace they are refused (a reader of 1 would ignore them).
void read_scenario(const fs::path& file, const json& m, bool v11, Trace& t) {
  for (const char* k : {"scenario", "calls", "call_of_step"})
    if (!v11 && m.contains(k)) bad(file, k, std::string("needs format '") + kTraceFormat11 + "'");
  const std::size_t T = t.generated_ids.size();
  if (m.contains("scenario")) {
    const json& s = m["scenario"];
    if (!s.is_object()) bad(file, "scenario", "expected an object");
    const std::string name = str(file, s, "scenario", "name");
    const std::optional<engine::Scenario> parsed = engine::parse_scenario(name);
    if (!parsed) bad(file, "scenario.name", "'" + name + "', expected " + engine::scenario_names_text());
    t.scenario = *parsed;
    const engine::ScenarioInfo& info = engine::scenario_info(t.scenario);
    if (std::string(info.side_a) != "cache_on") {  // the sides are scenario.side, both cache-ON
      const std::string side = str(file, s, "scenario", "side");
      if (side != info.side_a && side != info.side_b)
        bad(file, "scenario.side", "'" + side + "', expected " + info.side_a + " or " + info.side_b);
      t.side_a = side == info.side_a;
      if (!t.cache_on) bad(file, "path", "cache_off in a " + name + " trace (both sides of it use a cache)");
    }
    const std::string option = info.option;  // the one this scenario needs
    if (s.contains("chunk")) t.chunk = uint(file, s["chunk"], "scenario.chunk", 1);
    if (s.contains("at_step")) t.at_step = uint(file, s["at_step"], "scenario.at_step", 1);
    if (s.contains("shared")) t.shared = uint(file, s["shared"], "scenario.shared", 1);
    if (s.contains("kv_format")) {
      t.kv_format = str(file, s, "scenario", "kv_format");
      if (!engine::parse_kv_format(t.kv_format))
        bad(file, "scenario.kv_format", "'" + t.kv_format + "', expected " + engine::kv_format_names_text());
    }
    if (option == "kv_format" && t.kv_format.empty())
      bad(file, "scenario.kv_format", "required for " + name + ": " + engine::kv_format_names_text());
    if (option == "chunk" && t.chunk == 0) bad(file, "scenario.chunk", "required for the " + name + " scenario");
    if (option == "at_step" && (t.at_step == 0 || t.at_step >= T))
      bad(file, "scenario.at_step", "required for " + name + ", from 1 to " + std::to_string(T) + " - 1");
    if (option == "shared" && (t.shared == 0 || t.shared >= t.prompt_ids.size()))
      bad(file, "scenario.shared", "required for " + name + ", from 1 to len(prompt_ids) - 1");
  }
  if (m.contains("calls") != m.contains("call_of_step"))
    bad(file, m.contains("calls") ? "call_of_step" : "calls", "missing (calls and call_of_step come together)");
  if (!m.contains("calls")) return;
  const json& c = m["calls"];
  if (!c.is_array() || c.empty()) bad(file, "calls", "expected a non-empty array of [fed, cached] pairs");
  for (std::size_t i = 0; i < c.size(); ++i) {
    const std::string f = "calls[" + std::to_string(i) + "]";
    if (!c[i].is_array() || c[i].size() < 2 || c[i].size() > 3)
      bad(file, f, "expected [tokens fed, cached rows] or [tokens fed, cached rows, rows of the whole call]");
    engine::CallRecord call{uint(file, c[i][0], f + "[0]", 1), uint(file, c[i][1], f + "[1]")};
    if (c[i].size() == 3) {
      call.batch = uint(file, c[i][2], f + "[2]", 1);
      if (call.batch < call.fed) bad(file, f + "[2]", "a call of fewer rows than this sequence fed");
    }
    t.calls.push_back(call);
  }
  const json& cs = m["call_of_step"];
  if (!cs.is_array() || cs.size() != T) bad(file, "call_of_step", "expected " + std::to_string(T) + " call indices");
  for (std::size_t i = 0; i < T; ++i) {
    const std::size_t k = uint(file, cs[i], "call_of_step[" + std::to_string(i) + "]");
    if (k >= t.calls.size() || (i > 0 && k <= t.call_of_step.back()))
      bad(file, "call_of_step[" + std::to_string(i) + "]", "expected an index into calls, increasing");
    t.call_of_step.push_back(k);
  }
}

// 1.2's engine report beside calls: cache_after (one count per call) and calls_reported_by; both required with calls,
// refused in 1 and 1.1 (a reader of those would ignore them).
void read_engine_report(const fs::path& file, const json& m, bool v12, Trace& t) {
  for (const char* k : {"cache_after", "calls_reported_by"})
    if (!v12 && m.contains(k)) bad(file, k, std::string("needs format '") + kTraceFormat12 + "'");
  if (!v12 || t.calls.empty()) {
    if (v12 && (m.contains("cache_after") || m.contains("calls_reported_by")))
      bad(file, "calls", "missing (cache_after and calls_reported_by describe the calls)");
    return;
  }
  t.calls_reported_by = str(file, m, "", "calls_reported_by");
  const json& a = member(file, m, "", "cache_after");
  if (!a.is_array() || a.size() != t.calls.size())
    bad(file, "cache_after", "expected " + std::to_string(t.calls.size()) + " row counts (one per call)");
  for (std::size_t i = 0; i < a.size(); ++i)
    t.cache_after.push_back(uint(file, a[i], "cache_after[" + std::to_string(i) + "]"));
}

// A vLLM trace (docs/VLLM.md) is judged by the path vLLM's scheduler reported: it must carry the calls (1.2) and its
// engine_report object with vLLM's own counts, whatever the scenario (an adapter that drops them would be judged on
// its logits alone).
void read_vllm_report(const fs::path& file, const json& m, Trace& t) {
  if (t.engine != "vllm") return;
  if (t.calls.empty())
    bad(file, "calls", std::string("missing: a vLLM trace carries vLLM's report of its path (format '") +
                           kTraceFormat12 + "', docs/VLLM.md)");
  const json& r = member(file, m, "", "engine_report");
  if (!r.is_object()) bad(file, "engine_report", "expected an object (vLLM's counts of its path), got " + r.dump());
  for (const char* k : {"num_cached_tokens", "num_preemptions"})
    uint(file, member(file, r, "engine_report", k), std::string("engine_report.") + k);
}

}  // namespace

std::string Trace::profile() const {
  return short_dtype(dtype) + "-" + engine + "-" + attention +
         (scenario == engine::Scenario::cache ? "" : "+" + scenario_options());
}

std::string Trace::scenario_options() const {
  // The options a folder may hold several of (chunk sizes, event steps); prefix's shared rows follow the prompt.
  const engine::ScenarioInfo& info = engine::scenario_info(scenario);
  if (!info.option_in_profile) return info.name;
  const std::string option = info.option;
  if (option == "kv_format") return std::string(info.name) + "_" + kv_format;  // kv_dtype_q8_0
  return info.name + std::to_string(option == "chunk" ? chunk : option == "at_step" ? at_step : shared);
}

std::string Trace::pair_key() const {
  std::string k = model_name + "|" + dtype + "|" + engine + "|" + engine_version + "|" + attention + "|" + strategy;
  if (strategy != "greedy")
    k += "|k" + std::to_string(top_k) + "|p" + json(top_p).dump() + "|t" + json(temperature).dump();
  return k + "|s" + std::to_string(seed) + "|" + prompt_id +
         (scenario == engine::Scenario::cache ? "" : "|" + scenario_options());
}

Trace read_trace(const fs::path& file) {
  std::shared_ptr<const engine::SafetensorsFile> st;
  try {
    st = engine::SafetensorsFile::open(file);
  } catch (const std::exception& e) {
    throw BadInput(file.string() + ": not a readable safetensors trace (" + e.what() + ")");
  }
  const auto& md = st->metadata();
  const auto it = md.find("kvconf.trace");
  if (it == md.end()) bad(file, "__metadata__.kvconf.trace", "missing (not a kvconf.trace/1 file; docs/TRACES.md)");
  json m;
  try {
    m = json::parse(it->second);
  } catch (const json::exception& e) {
    bad(file, "__metadata__.kvconf.trace", std::string("not JSON (") + e.what() + ")");
  }
  if (!m.is_object()) bad(file, "__metadata__.kvconf.trace", "expected a JSON object");
  Trace t;
  t.file = file;
  const std::string format = str(file, m, "", "format");
  if (format != kTraceFormat && format != kTraceFormat11 && format != kTraceFormat12)
    bad(file, "format",
        "'" + format + "', expected '" + kTraceFormat + "', '" + kTraceFormat11 + "' or '" + kTraceFormat12 + "'");
  const bool v11 = format != kTraceFormat;
  const json& eng = member(file, m, "", "engine");
  if (!eng.is_object()) bad(file, "engine", "expected an object");
  t.engine = str(file, eng, "engine", "name");
  t.engine_version = str(file, eng, "engine", "version", false);
  t.attention = str(file, eng, "engine", "attention");
  const json& model = member(file, m, "", "model");
  if (!model.is_object()) bad(file, "model", "expected an object");
  t.model_name = str(file, model, "model", "name");
  if (model.contains("path")) t.model_path = str(file, model, "model", "path", false);
  t.vocab = uint(file, member(file, model, "model", "vocab_size"), "model.vocab_size", 1);
  if (model.contains("n_layers")) t.n_layers = uint(file, model["n_layers"], "model.n_layers", 1);
  if (model.contains("hidden_size")) t.hidden_size = uint(file, model["hidden_size"], "model.hidden_size", 1);
  t.dtype = str(file, m, "", "dtype");
  if (t.dtype != "float32" && t.dtype != "float16" && t.dtype != "bfloat16")
    bad(file, "dtype", "'" + t.dtype + "', expected float32, float16 or bfloat16");
  const std::string path = str(file, m, "", "path");
  if (path != "cache_on" && path != "cache_off") bad(file, "path", "'" + path + "', expected cache_on or cache_off");
  t.cache_on = path == "cache_on";
  const json& s = member(file, m, "", "strategy");
  if (!s.is_object()) bad(file, "strategy", "expected an object");
  t.strategy = str(file, s, "strategy", "name");
  if (t.strategy != "greedy" && t.strategy != "topk" && t.strategy != "topp")
    bad(file, "strategy.name", "'" + t.strategy + "', expected greedy, topk or topp");
  if (s.contains("top_k")) t.top_k = uint(file, s["top_k"], "strategy.top_k", 1);
  if (s.contains("top_p")) t.top_p = number(file, s["top_p"], "strategy.top_p");
  if (!(t.top_p > 0.0 && t.top_p <= 1.0)) bad(file, "strategy.top_p", "expected a number in (0, 1]");
  if (s.contains("temperature")) t.temperature = number(file, s["temperature"], "strategy.temperature");
  if (!(t.temperature > 0.0) || !std::isfinite(t.temperature))
    bad(file, "strategy.temperature", "expected a number > 0");
  if (s.contains("seed")) t.seed = uint(file, s["seed"], "strategy.seed");
  t.prompt_id = str(file, m, "", "prompt_id");
  t.prompt_ids = ids(file, m, "prompt_ids", t.vocab);
  t.generated_ids = ids(file, m, "generated_ids", t.vocab);
  const std::size_t T = t.generated_ids.size();
  if (m.contains("draws")) {
    const json& d = m["draws"];
    if (!d.is_array() || d.size() != T)
      bad(file, "draws", "expected " + std::to_string(T) + " numbers (one per generated token)");
    for (std::size_t i = 0; i < d.size(); ++i) {
      const double u = number(file, d[i], "draws[" + std::to_string(i) + "]");
      if (!(u >= 0.0 && u < 1.0)) bad(file, "draws[" + std::to_string(i) + "]", "expected a number in [0, 1)");
      t.draws.push_back(u);
    }
  }
  t.side_a = t.cache_on;
  read_scenario(file, m, v11, t);
  read_engine_report(file, m, format == kTraceFormat12, t);
  read_vllm_report(file, m, t);
  if (m.contains("kv_step")) {
    if (!v11) bad(file, "kv_step", std::string("needs format '") + kTraceFormat11 + "'");
    t.kv_step = uint(file, m["kv_step"], "kv_step");
    if (*t.kv_step >= T) bad(file, "kv_step", "expected a step from 0 to " + std::to_string(T) + " - 1");
  }
  const engine::TensorView* lg = st->find("logits");
  if (!lg) bad(file, "logits", "missing tensor");
  if (lg->shape.size() != 2 || lg->shape[0] != T || lg->shape[1] != t.vocab)
    bad(
        file, "logits",
        "shape [" +
            [&] {
              std::string s2;
              for (std::size_t i = 0; i < lg->shape.size(); ++i) s2 += (i ? "," : "") + std::to_string(lg->shape[i]);
              return s2;
            }() +
            "], expected [" + std::to_string(T) + "," + std::to_string(t.vocab) +
            "] (len(generated_ids), model.vocab_size)");
  t.logits_dtype = engine::dtype_name(lg->dtype);
  const std::vector<float> all = lg->to_float();
  t.logits.resize(T);
  for (std::size_t r = 0; r < T; ++r) {
    t.logits[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * t.vocab),
                       all.begin() + static_cast<std::ptrdiff_t>((r + 1) * t.vocab));
    const auto nf = std::find_if(t.logits[r].begin(), t.logits[r].end(), [](float x) { return !std::isfinite(x); });
    if (nf != t.logits[r].end())
      bad(file, "logits",
          "non-finite value " + std::to_string(*nf) + " at row " + std::to_string(r) + ", column " +
              std::to_string(nf - t.logits[r].begin()));
  }
  if (const engine::TensorView* hs = st->find("hidden_states")) {
    if (t.n_layers == 0 || t.hidden_size == 0)
      bad(file, "model.n_layers", "required (with model.hidden_size) when the trace has hidden_states");
    const std::size_t L1 = t.n_layers + 1, H = t.hidden_size;
    if (hs->shape != std::vector<std::size_t>{T, L1, H})
      bad(file, "hidden_states",
          "expected shape [" + std::to_string(T) + "," + std::to_string(L1) + "," + std::to_string(H) +
              "] (T, model.n_layers + 1, model.hidden_size)");
    const std::vector<float> v = hs->to_float();
    t.hidden.assign(T, std::vector<std::vector<float>>(L1));
    for (std::size_t r = 0; r < T; ++r)
      for (std::size_t l = 0; l < L1; ++l)
        t.hidden[r][l].assign(v.begin() + static_cast<std::ptrdiff_t>((r * L1 + l) * H),
                              v.begin() + static_cast<std::ptrdiff_t>((r * L1 + l + 1) * H));
  }
  const engine::TensorView* kr = st->find("k_rows");
  const engine::TensorView* vr = st->find("v_rows");
  if (kr || vr) {
    const char* name = kr ? "k_rows" : "v_rows";
    if (!kr || !vr) bad(file, kr ? "v_rows" : "k_rows", "missing (k_rows and v_rows come together)");
    if (!t.cache_on && !t.kv_step)
      bad(file, name, "present in a cache_off trace without kv_step (the step whose recompute computed them)");
    if (t.cache_on && t.kv_step) bad(file, "kv_step", "given in a cache_on trace (its rows are its cache's)");
    if (t.n_layers == 0) bad(file, "model.n_layers", "required when the trace has k_rows and v_rows");
    if (kr->shape.size() != 3 || kr->shape[0] != t.n_layers || kr->shape[1] == 0 || kr->shape[2] == 0)
      bad(file, "k_rows",
          "expected shape [" + std::to_string(t.n_layers) + ",N,D_kv] (model.n_layers, rows, kv width)");
    if (vr->shape != kr->shape) bad(file, "v_rows", "shape differs from k_rows'");
    t.kv_rows = kr->shape[1];
    t.kv_dim = kr->shape[2];
    if (t.kv_step && t.kv_rows != t.prompt_ids.size() + *t.kv_step)
      bad(file, "k_rows",
          std::to_string(t.kv_rows) + " rows, but the recompute of step kv_step = " + std::to_string(*t.kv_step) +
              " computes " + std::to_string(t.prompt_ids.size() + *t.kv_step));
    if (t.kv_rows > t.prompt_ids.size() + T)
      bad(file, "k_rows",
          std::to_string(t.kv_rows) + " rows, more than the " + std::to_string(t.prompt_ids.size() + T) +
              " positions of the prompt and the tokens");
    t.k_rows = kr->to_float();
    t.v_rows = vr->to_float();
    for (const auto* side : {&t.k_rows, &t.v_rows})
      for (std::size_t i = 0; i < side->size(); ++i)
        if (!std::isfinite((*side)[i]))
          bad(file, side == &t.k_rows ? "k_rows" : "v_rows", "non-finite value at flat index " + std::to_string(i));
  }
  return t;
}

TracePair make_trace_pair(Trace on, Trace off) {
  if (on.scenario == engine::Scenario::cache && off.scenario == engine::Scenario::cache) {
    if (!on.cache_on) bad(on.file, "path", "cache_off, but given as --on (expected cache_on)");
    if (off.cache_on) bad(off.file, "path", "cache_on, but given as --off (expected cache_off)");
  }
  if (on.scenario != off.scenario)
    throw BadInput(on.file.string() + " and " + off.file.string() + " are not a pair: scenario " +
                   engine::scenario_name(on.scenario) + " vs " + engine::scenario_name(off.scenario));
  if (!on.side_a) bad(on.file, "scenario.side", "reference, but given as --on (expected the scenario side)");
  if (off.side_a) bad(off.file, "scenario.side", "scenario, but given as --off (expected the reference side)");
  if (on.chunk != off.chunk || on.at_step != off.at_step || on.shared != off.shared || on.kv_format != off.kv_format)
    bad(off.file, "scenario", "options differ from " + on.file.string() + "'s");
  if (on.pair_key() != off.pair_key())
    throw BadInput(on.file.string() + " and " + off.file.string() +
                   " are not a pair: they differ in model, dtype, engine, strategy or prompt_id (" + on.pair_key() +
                   " vs " + off.pair_key() + ")");
  if (on.prompt_ids != off.prompt_ids)
    bad(off.file, "prompt_ids", "differs from " + on.file.string() + "'s: the two paths ran different prompts");
  if (!on.draws.empty() && !off.draws.empty()) {
    const std::size_t n = std::min(on.draws.size(), off.draws.size());
    for (std::size_t i = 0; i < n; ++i)
      if (on.draws[i] != off.draws[i])
        bad(off.file, "draws[" + std::to_string(i) + "]",
            "differs from " + on.file.string() + "'s: the paths must share their draws");
  }
  return {std::move(on), std::move(off)};
}

std::vector<TracePair> read_trace_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw BadInput(dir.string() + ": not a directory (--dir)");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
  if (ec) throw BadInput(dir.string() + ": cannot list the directory (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  if (files.empty()) throw BadInput(dir.string() + ": no .safetensors traces in the directory");
  std::map<std::string, std::pair<std::vector<Trace>, std::vector<Trace>>> by_key;
  for (const fs::path& f : files) {
    Trace t = read_trace(f);
    auto& slot = by_key[t.pair_key()];
    (t.side_a ? slot.first : slot.second).push_back(std::move(t));
  }
  std::vector<TracePair> pairs;
  for (auto& [key, slot] : by_key) {
    auto& [ons, offs] = slot;
    for (auto* side : {&ons, &offs})
      if (side->size() > 1)
        throw BadInput((*side)[1].file.string() + ": a second " + side_name((*side)[1].scenario, (*side)[1].side_a) +
                       " trace for the pair of " + (*side)[0].file.string() + " (" + key + ")");
    if (ons.empty() || offs.empty()) {
      const Trace& lone = ons.empty() ? offs[0] : ons[0];
      const std::string missing = side_name(lone.scenario, ons.empty());
      throw BadInput(lone.file.string() + ": no " + missing + " trace in " + dir.string() + " to pair it with (" + key +
                     ")");
    }
    pairs.push_back(make_trace_pair(std::move(ons[0]), std::move(offs[0])));
  }
  return pairs;
}

}  // namespace kvconf::protocol
