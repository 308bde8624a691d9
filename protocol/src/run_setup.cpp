// load_run, prepare_out, write_manifest (run_setup.hpp): the checks and loading shared by run_protocol and
// run_experiments, before any pair runs.
#include "run_setup.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/sampling.hpp"
#include "kvconf/engine/scenario.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/gsm8k.hpp"
#include "kvconf/protocol/results_dir.hpp"

namespace kvconf::protocol::detail {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

// The options that need no file, checked and parsed in one pass: each profile name is looked up once (and its
// kernels resolved against s.registry), each strategy parsed once; the rest is range-checked here and used as given.
void resolve_options(const ProtocolOptions& o, RunSetup& s) {
  if (o.profiles.empty()) throw BadInput("--profile: no profile given (e.g. fp16-eager)");
  for (const std::string& p : o.profiles) {
    if (s.kernels.count(p)) throw BadInput("--profile: a profile is listed twice");
    const engine::Profile* profile = nullptr;
    try {
      profile = &engine::find_profile(p);
    } catch (const std::invalid_argument& e) {
      throw BadInput(std::string("--profile: ") + e.what());
    }
    try {
      s.kernels.emplace(p, engine::resolve(*profile, *s.registry));
    } catch (const std::invalid_argument& e) {
      throw BadInput("--profile " + p + ": " + e.what());
    }
  }
  if (o.strategies.empty()) throw BadInput("--strategies: no strategy given (greedy, topk, topp)");
  for (const std::string& st : o.strategies) {
    if (s.strategies.count(st)) throw BadInput("--strategies: a strategy is listed twice");
    try {
      s.strategies.emplace(st, engine::parse_strategy(st));
    } catch (const std::invalid_argument& e) {
      throw BadInput(std::string("--strategies: ") + e.what());
    }
  }
  const std::set<std::uint64_t> seu(o.seeds.begin(), o.seeds.end());
  if (o.seeds.empty()) throw BadInput("--seeds: no seed given (e.g. 0-4)");
  if (seu.size() != o.seeds.size()) throw BadInput("--seeds: a seed is listed twice");
  if (o.n == 0) throw BadInput("--n must be >= 1 (got 0)");
  if (o.max_new_tokens == 0) throw BadInput("--max-new-tokens must be >= 1 (got 0)");
  if (o.top_k == 0) throw BadInput("--top-k must be >= 1 (got 0)");
  if (!(o.top_p > 0.0 && o.top_p <= 1.0))
    throw BadInput("--top-p must be in (0, 1] (got " + std::to_string(o.top_p) + ")");
  if (!(o.temperature > 0.0) || !std::isfinite(o.temperature))
    throw BadInput("--temperature must be > 0 (got " + std::to_string(o.temperature) + ")");
  if (o.shard.count == 0 || o.shard.index >= o.shard.count)
    throw BadInput("--shard '" + o.shard.str() + "': expected I/N with 0 <= I < N");
  if (o.out.empty()) throw BadInput("--out is required (the results directory)");
  if (o.scenarios.empty())
    throw BadInput("--scenario: no scenario given (all, " + engine::scenario_names_text() + ")");
  for (std::size_t i = 0; i < o.scenarios.size(); ++i) {
    const std::string& sc = o.scenarios[i];
    if (!engine::parse_scenario(sc))
      throw BadInput("--scenario: '" + sc + "' is not a scenario (expected all, or " + engine::scenario_names_text() +
                     ")");
    if (std::find(o.scenarios.begin(), o.scenarios.begin() + static_cast<std::ptrdiff_t>(i), sc) !=
        o.scenarios.begin() + static_cast<std::ptrdiff_t>(i))
      throw BadInput("--scenario: '" + sc + "' is listed twice");
    if (std::string(engine::scenario_info(*engine::parse_scenario(sc)).option) == "at_step" && o.max_new_tokens < 3)
      throw BadInput("--scenario " + sc + " needs --max-new-tokens >= 3 (its event falls after step " +
                     "max(1, steps / 3) and must leave a step after it; got " + std::to_string(o.max_new_tokens) + ")");
  }
}

// What the run does: compared on --resume (every field), written to OUT/manifest.json.
json manifest_options(const ProtocolOptions& o, const PromptSet& ps, const fs::path& tokenizer) {
  json j = {{"model", o.model},
            {"profiles", o.profiles},
            {"strategies", o.strategies},
            {"prompts", ps.spec},
            {"tokenizer", tokenizer.string()},
            {"n", ps.n},
            {"sample_seed", o.sample_seed},
            {"seeds", o.seeds},
            {"max_new_tokens", o.max_new_tokens},
            {"top_k", o.top_k},
            {"top_p", o.top_p},
            {"temperature", o.temperature},
            {"shots", o.shots},
            {"layer_drift", o.layer_drift},
            {"shard", o.shard.str()}};
  // Only when not the protocol's own pair: manifests of runs without --scenario stay as they were (and resumable).
  if (o.scenarios != std::vector<std::string>{"cache"}) j["scenarios"] = o.scenarios;
  return j;
}

const char* option_flag(const std::string& field) {
  static const std::map<std::string, const char*> flags = {{"model", "--model"},
                                                           {"profiles", "--profile"},
                                                           {"strategies", "--strategies"},
                                                           {"prompts", "--prompts"},
                                                           {"tokenizer", "--tokenizer"},
                                                           {"n", "--n"},
                                                           {"sample_seed", "--sample-seed"},
                                                           {"seeds", "--seeds"},
                                                           {"max_new_tokens", "--max-new-tokens"},
                                                           {"top_k", "--top-k"},
                                                           {"top_p", "--top-p"},
                                                           {"temperature", "--temperature"},
                                                           {"shots", "--shots"},
                                                           {"layer_drift", "--no-layer-drift"},
                                                           {"shard", "--shard"},
                                                           {"scenarios", "--scenario"},
                                                           {"experiments", "--experiment"}};
  const auto it = flags.find(field);
  return it == flags.end() ? "an option" : it->second;
}

}  // namespace

bool RunSetup::is_reference(const std::string& profile) const {
  const engine::ProfileKernels& pk = kernels.at(profile);
  return pk.profile.storage == Format::fp32 && pk.gemm == k32.gemm && pk.attn_prefill == k32.attn_prefill &&
         pk.attn_decode == k32.attn_decode && pk.norm == k32.norm;
}

RunSetup load_run(const ProtocolOptions& o, const json& extra) {
  RunSetup s;
  s.registry = std::make_unique<kernels::Registry>(kernels::cpu_registry());
  resolve_options(o, s);
  s.src = resolve_model(o);
  s.k32 = engine::resolve(engine::find_profile("fp32"), *s.registry);

  Models& models = s.models;
  for (const auto& [name, pk] : s.kernels) {
    const Format st = pk.profile.storage;
    if (models.by_storage.count(st)) continue;
    try {
      std::unique_ptr<engine::Model> m = std::make_unique<engine::Model>(engine::load_model(s.src.path, st));
      models.by_storage[st] = m.get();
      models.owned.push_back(std::move(m));
    } catch (const engine::LoadError& e) {
      throw BadInput(std::string("--model: ") + e.what());
    }
  }
  for (const auto& [st, m] : models.by_storage) {
    if (st == Format::fp32) {
      models.ref_by_storage[st] = m;
      continue;
    }
    auto ref = std::make_unique<engine::Model>(engine::convert(*m, Format::fp32));
    models.ref_by_storage[st] = ref.get();
    models.owned.push_back(std::move(ref));
  }
  s.cfg = &models.by_storage.begin()->second->config;

  const fs::path tok_file = tokenizer_path(o, s.src);
  std::error_code ec;
  if (fs::is_regular_file(tok_file, ec)) {
    try {
      s.tok.emplace(engine::Tokenizer::load(tok_file));
    } catch (const std::exception& e) {
      throw BadInput(std::string("--tokenizer: ") + e.what());
    }
  } else if (!o.tokenizer.empty()) {
    throw BadInput(o.tokenizer.string() + ": no such file (--tokenizer)");
  }
  if (s.tok && !o.tokenizer.empty() && s.tok->vocab_size() > s.cfg->vocab)
    throw BadInput("--tokenizer " + o.tokenizer.string() + " has " + std::to_string(s.tok->vocab_size()) +
                   " pieces but the model " + o.model + " has a vocabulary of " + std::to_string(s.cfg->vocab));
  s.ps = resolve_prompts(o, s.src, s.cfg->vocab, s.cfg->max_positions, s.tok ? s.tok->vocab_size() : 0,
                         [&](const std::string& text) {
                           if (!s.tok->can_encode())
                             throw BadInput("--prompts gsm8k: the tokenizer " + tok_file.string() +
                                            " is a byte-level BPE tokenizer.json, which kvconf decodes with but does "
                                            "not encode: give the prompts as ids (ids:FILE; fixture:smollm2-135m's "
                                            "default is GSM8K as chat turns, made at build time)");
                           return s.tok->encode(text, true);
                         });
  // Answers are read from decoded text when the tokenizer fits the model (not stories260K with LLaMA-2's).
  s.decoder = s.tok && s.tok->vocab_size() <= s.cfg->vocab ? &*s.tok : nullptr;
  s.options = manifest_options(o, s.ps, s.decoder ? tok_file : fs::path());
  for (const auto& [k, v] : extra.items()) s.options[k] = v;
  return s;
}

analysis::PairOptions pair_options(const ProtocolOptions& o, const RunSetup& s, const WorkItem& w,
                                   const std::string& prompt_id) {
  analysis::PairOptions po;
  po.steps = o.max_new_tokens;
  po.sampler.strategy = s.strategies.at(w.strategy);
  po.sampler.top_k = o.top_k;
  po.sampler.top_p = o.top_p;
  po.sampler.temperature = o.temperature;
  po.sampler.seed = pair_sampler_seed(w.seed, prompt_id);
  return po;
}

std::optional<std::string> answer_of(const RunSetup& s, const std::vector<int>& tokens) {
  if (!s.decoder) return std::nullopt;
  std::vector<int> t;
  for (int id : tokens) {
    if (id == s.cfg->eos_token_id) break;
    t.push_back(id);
  }
  return last_number(cut_at_stop(s.decoder->decode(t)));
}

void prepare_out(const ProtocolOptions& o, const json& options, const std::string& results_file) {
  ensure_out_dir(o.out);
  const fs::path mf = o.out / "manifest.json";
  std::error_code ec;
  const bool have_manifest = fs::exists(mf, ec);
  if (o.resume && have_manifest) {
    const json old = read_manifest(mf);
    if (!old.contains("options") || !old["options"].is_object())
      throw BadInput(mf.string() + ": field 'options': missing (not a kvconf model manifest); cannot --resume");
    for (const auto& [field, now] : options.items()) {
      const json there = old["options"].contains(field) ? old["options"][field] : json();
      if (there != now)
        throw BadInput("--resume: " + std::string(option_flag(field)) + " differs from the run in " + mf.string() +
                       " (there: " + there.dump() + ", now: " + now.dump() + ")");
    }
  } else if (o.resume && fs::exists(o.out / results_file, ec) && fs::file_size(o.out / results_file, ec) > 0) {
    // (an empty results file without a manifest: a run stopped between creating it and writing the manifest, e.g.
    // on a full disk or by a kill; nothing was finished, so --resume starts it afresh)
    throw BadInput("--resume: " + (o.out / results_file).string() + " has no " + mf.string() +
                   " beside it (not a kvconf model run)");
  }
}

void write_manifest(const ProtocolOptions& o, const RunSetup& s, const std::string& command) {
  const fs::path mf = o.out / "manifest.json";
  json ids = json::array();
  for (const ProtocolPrompt& p : s.ps.prompts) ids.push_back(p.id);
  json m = {{"schema", "kvconf.manifest/1"},
            {"command", command},
            {"kvconf_version", KVCONF_VERSION},
            {"options", s.options},
            {"prompt_ids", ids}};
  write_manifest_file(mf, m);
}

}  // namespace kvconf::protocol::detail
