// run_protocol (protocol.hpp): checks every option and input, writes/compares OUT/manifest.json, then runs the planned
// pairs of this shard that OUT/pairs.jsonl does not already hold, appending each record as it finishes.
#include "kvconf/protocol/protocol.hpp"

#include <chrono>
#include <fstream>
#include <sstream>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/gsm8k.hpp"
#include "kvconf/analysis/paired.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/atomic_file.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/error.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/engine/sampling.hpp"
#include "kvconf/engine/tokenizer.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/protocol_inputs.hpp"
#include "kvconf/protocol/protocol_plan.hpp"
#include "regime_record.hpp"

namespace kvconf::protocol {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw BadInput("cannot read " + file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void check_options(const ProtocolOptions& o) {
  if (o.profiles.empty()) throw BadInput("--profile: no profile given (e.g. fp16-eager)");
  for (const std::string& p : o.profiles) try {
      engine::find_profile(p);
    } catch (const std::invalid_argument& e) {
      throw BadInput(std::string("--profile: ") + e.what());
    }
  if (o.strategies.empty()) throw BadInput("--strategies: no strategy given (greedy, topk, topp)");
  for (const std::string& s : o.strategies) try {
      engine::parse_strategy(s);
    } catch (const std::invalid_argument& e) {
      throw BadInput(std::string("--strategies: ") + e.what());
    }
  const std::set<std::string> pu(o.profiles.begin(), o.profiles.end()), su(o.strategies.begin(), o.strategies.end());
  const std::set<std::uint64_t> seu(o.seeds.begin(), o.seeds.end());
  if (pu.size() != o.profiles.size()) throw BadInput("--profile: a profile is listed twice");
  if (su.size() != o.strategies.size()) throw BadInput("--strategies: a strategy is listed twice");
  if (o.seeds.empty()) throw BadInput("--seeds: no seed given (e.g. 0-4)");
  if (seu.size() != o.seeds.size()) throw BadInput("--seeds: a seed is listed twice");
  if (o.n == 0) throw BadInput("--n must be >= 1 (got 0)");
  if (o.max_new_tokens == 0) throw BadInput("--max-new-tokens must be >= 1 (got 0)");
  if (o.top_k == 0) throw BadInput("--top-k must be >= 1 (got 0)");
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) throw BadInput("--top-p must be in (0, 1] (got " + std::to_string(o.top_p) + ")");
  if (!(o.temperature > 0.0) || !std::isfinite(o.temperature))
    throw BadInput("--temperature must be > 0 (got " + std::to_string(o.temperature) + ")");
  if (o.shard.count == 0 || o.shard.index >= o.shard.count)
    throw BadInput("--shard '" + o.shard.str() + "': expected I/N with 0 <= I < N");
  if (o.out.empty()) throw BadInput("--out is required (the results directory)");
}

// What the run does: compared on --resume (every field), written to OUT/manifest.json.
json manifest_options(const ProtocolOptions& o, const PromptSet& ps, const fs::path& tokenizer) {
  return {{"model", o.model},
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
}

const char* option_flag(const std::string& field) {
  static const std::map<std::string, const char*> flags = {
      {"model", "--model"},         {"profiles", "--profile"},      {"strategies", "--strategies"},
      {"prompts", "--prompts"},     {"tokenizer", "--tokenizer"},   {"n", "--n"},
      {"sample_seed", "--sample-seed"}, {"seeds", "--seeds"},       {"max_new_tokens", "--max-new-tokens"},
      {"top_k", "--top-k"},         {"top_p", "--top-p"},           {"temperature", "--temperature"},
      {"shots", "--shots"},         {"layer_drift", "--no-layer-drift"}, {"shard", "--shard"}};
  const auto it = flags.find(field);
  return it == flags.end() ? "an option" : it->second;
}

// Creates OUT; on resume compares the options with the manifest there.
void prepare_out(const ProtocolOptions& o, const json& options) {
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec || !fs::is_directory(o.out))
    throw BadInput("--out " + o.out.string() + ": cannot create the directory (" +
                   (ec ? ec.message() : std::string("a file of that name exists")) + ")");
  const fs::path mf = o.out / "manifest.json";
  const bool have_manifest = fs::exists(mf, ec);
  if (o.resume && have_manifest) {
    json old;
    try {
      old = json::parse(read_file(mf));
    } catch (const json::exception& e) {
      throw BadInput(mf.string() + ": not JSON (" + e.what() + "); cannot --resume");
    }
    if (!old.is_object() || !old.contains("options") || !old["options"].is_object())
      throw BadInput(mf.string() + ": field 'options': missing (not a kvconf model manifest); cannot --resume");
    for (const auto& [field, now] : options.items()) {
      const json there = old["options"].contains(field) ? old["options"][field] : json();
      if (there != now)
        throw BadInput("--resume: " + std::string(option_flag(field)) + " differs from the run in " + mf.string() +
                       " (there: " + there.dump() + ", now: " + now.dump() + ")");
    }
  } else if (o.resume && fs::exists(o.out / "pairs.jsonl", ec)) {
    throw BadInput("--resume: " + (o.out / "pairs.jsonl").string() + " has no " + mf.string() +
                   " beside it (not a kvconf model run)");
  }
}

// Written once the results file is open (so a refused run never replaces the manifest of the run in OUT).
void write_manifest(const ProtocolOptions& o, const json& options) {
  const fs::path mf = o.out / "manifest.json";
  json m = {{"schema", "kvconf.manifest/1"}, {"command", "model"}, {"kvconf_version", KVCONF_VERSION},
            {"options", options}};
  try {
    engine::write_file_atomic(mf, m.dump(2) + "\n");
  } catch (const std::exception& e) {
    throw BadInput("--out " + o.out.string() + ": cannot write manifest.json (" + e.what() + ")");
  }
}

// The models the run needs: one per storage format (shared by the profiles with that storage), plus their fp32
// copies for the flip check's reference.
struct Models {
  std::vector<std::unique_ptr<engine::Model>> owned;
  std::map<Format, const engine::Model*> by_storage, ref_by_storage;
};

}  // namespace

ProtocolResult run_protocol(const ProtocolOptions& o, const ProgressFn& progress) {
  // ---- 1. Everything that can be bad input, before any pair runs. ----
  check_options(o);
  const ModelSource src = resolve_model(o);
  const kernels::Registry registry = kernels::cpu_registry();
  std::map<std::string, engine::ProfileKernels> kernels;
  for (const std::string& p : o.profiles) try {
      kernels.emplace(p, engine::resolve(engine::find_profile(p), registry));
    } catch (const std::invalid_argument& e) {
      throw BadInput("--profile " + p + ": " + e.what());
    }
  const engine::ProfileKernels k32 = engine::resolve(engine::find_profile("fp32"), registry);

  Models models;
  for (const auto& [name, pk] : kernels) {
    const Format st = pk.profile.storage;
    if (models.by_storage.count(st)) continue;
    try {
      std::unique_ptr<engine::Model> m = std::make_unique<engine::Model>(engine::load_model(src.path, st));
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
  const engine::ModelConfig& cfg = models.by_storage.begin()->second->config;

  const fs::path tok_file = tokenizer_path(o);
  std::optional<engine::Tokenizer> tok;
  std::error_code ec;
  if (fs::is_regular_file(tok_file, ec)) {
    try {
      tok.emplace(engine::Tokenizer::load(tok_file));
    } catch (const std::exception& e) {
      throw BadInput(std::string("--tokenizer: ") + e.what());
    }
  } else if (!o.tokenizer.empty()) {
    throw BadInput(o.tokenizer.string() + ": no such file (--tokenizer)");
  }
  if (tok && !o.tokenizer.empty() && tok->vocab_size() > cfg.vocab)
    throw BadInput("--tokenizer " + o.tokenizer.string() + " has " + std::to_string(tok->vocab_size()) +
                   " pieces but the model " + o.model + " has a vocabulary of " + std::to_string(cfg.vocab));
  const PromptSet ps = resolve_prompts(o, src, cfg.vocab, cfg.max_positions, tok ? tok->vocab_size() : 0,
                                       [&](const std::string& text) { return tok->encode(text, true); });
  // Answers are read from decoded text when the tokenizer fits the model (not stories260K with LLaMA-2's).
  const engine::Tokenizer* decoder = tok && tok->vocab_size() <= cfg.vocab ? &*tok : nullptr;
  const fs::path tok_used = decoder ? tok_file : fs::path();

  const json options = manifest_options(o, ps, tok_used);
  prepare_out(o, options);
  JsonlStore store(o.out / "pairs.jsonl", o.resume,
                   [](const json& j) { return conformance::run_pair_from_json(j).key(); });
  write_manifest(o, options);

  // ---- 2. The plan of this shard, and the pairs not yet done. ----
  const std::vector<WorkItem> plan = plan_work(o.profiles, o.strategies, o.seeds, ps.prompts.size(), o.shard);
  auto key_of = [&](const WorkItem& w) {
    conformance::RunPairRecord r;
    r.model = o.model;
    r.profile = w.profile;
    r.strategy = w.strategy;
    r.seed = w.seed;
    r.prompt_id = ps.prompts[w.prompt].id;
    return r.key();
  };
  ProtocolResult res;
  for (const WorkItem& w : plan) res.resumed += store.has(key_of(w));

  std::map<std::string, std::unique_ptr<engine::Context>> ctx, ref;
  // A profile that IS the fp32 reference (fp32 storage, the reference's kernels) has no yardstick S for the near-tie
  // rule (S = 0 by construction); its pairs run plain, and Fp32TokensIdentical / Fp32KlRatio gate it.
  std::map<std::string, bool> is_reference;
  for (const auto& [name, pk] : kernels)
    is_reference[name] = pk.profile.storage == Format::fp32 && pk.gemm == k32.gemm &&
                         pk.attn_prefill == k32.attn_prefill && pk.attn_decode == k32.attn_decode && pk.norm == k32.norm;
  // The fp32 noise floor of Fp32KlRatio (conformance::fp32_kl_floor) for the reference profiles' pairs.
  const engine::ProfileKernels k32_reordered = conformance::reordered_fp32_kernels(registry);
  std::map<std::string, std::unique_ptr<engine::Context>> reordered;
  for (const auto& [name, pk] : kernels) {
    ctx[name] = std::make_unique<engine::Context>(*models.by_storage.at(pk.profile.storage), pk);
    ref[name] = std::make_unique<engine::Context>(*models.ref_by_storage.at(pk.profile.storage), k32);
    if (is_reference.at(name))
      reordered[name] = std::make_unique<engine::Context>(*models.by_storage.at(pk.profile.storage), k32_reordered);
  }

  // ---- 3. Run. ----
  const auto t0 = std::chrono::steady_clock::now();
  Progress pr;
  pr.total = plan.size();
  pr.resumed = res.resumed;
  pr.done = res.resumed;
  for (const WorkItem& w : plan) {
    const std::string key = key_of(w);
    if (store.has(key)) continue;
    const ProtocolPrompt& p = ps.prompts[w.prompt];
    const auto p0 = std::chrono::steady_clock::now();
    conformance::RunPairRecord rec;
    rec.model = o.model;
    rec.profile = w.profile;
    rec.strategy = w.strategy;
    rec.prompt_id = p.id;
    rec.seed = w.seed;
    rec.max_new_tokens = o.max_new_tokens;
    rec.prompt_tokens = p.ids.size();
    analysis::PairOptions po;
    po.steps = o.max_new_tokens;
    po.sampler.strategy = engine::parse_strategy(w.strategy);
    po.sampler.top_k = o.top_k;
    po.sampler.top_p = o.top_p;
    po.sampler.temperature = o.temperature;
    po.sampler.seed = pair_sampler_seed(w.seed, p.id);
    po.layer_drift = o.layer_drift;
    engine::Context& c = *ctx.at(w.profile);
    analysis::PairedRun free, teacher;
    if (is_reference.at(w.profile)) {
      analysis::PairOptions keep = po;
      keep.keep_logits = true;
      free = analysis::run_free(c, c, p.ids, keep);
      rec.fp32_kl_floor = conformance::fp32_kl_floor(free, *reordered.at(w.profile));
    } else
      rec.rules = conformance::check_flips_are_near_ties(c, *ref.at(w.profile), p.ids, po, po.sampler.seed, &free);
    rec.free = regime_record(free);
    free.logits_on.clear();
    free.logits_off.clear();
    if (!free.flip && o.reuse_free_as_teacher) {
      teacher = std::move(free);
      teacher.regime = analysis::Regime::teacher_forced;
    } else {
      teacher = analysis::run_teacher_forced(c, c, p.ids, rec.free.tokens_on, po);
    }
    rec.teacher = regime_record(teacher);
    if (o.layer_drift && !teacher.steps.empty()) {
      const std::size_t L = teacher.steps.front().layer_drift.size();
      rec.layer_drift_l2.assign(L, 0.0);
      rec.layer_cosine.assign(L, 0.0);
      for (const analysis::StepMetrics& s : teacher.steps)
        for (std::size_t l = 0; l < L && l < s.layer_drift.size(); ++l) {
          rec.layer_drift_l2[l] += s.layer_drift[l].l2;
          rec.layer_cosine[l] += s.layer_drift[l].cosine;
        }
      for (std::size_t l = 0; l < L; ++l) {
        rec.layer_drift_l2[l] /= static_cast<double>(teacher.steps.size());
        rec.layer_cosine[l] /= static_cast<double>(teacher.steps.size());
      }
    }
    rec.gold = p.gold;
    if (decoder) {
      auto answer = [&](const std::vector<int>& tokens) {
        std::vector<int> t;
        for (int id : tokens) {
          if (id == cfg.eos_token_id) break;
          t.push_back(id);
        }
        return last_number(cut_at_stop(decoder->decode(t)));
      };
      rec.answer_on = answer(rec.free.tokens_on);
      rec.answer_off = answer(rec.free.tokens_off);
      rec.correct_on = rec.gold && rec.answer_on == rec.gold;
      rec.correct_off = rec.gold && rec.answer_off == rec.gold;
    }
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    store.append(conformance::to_json(rec));
    ++res.ran;
    ++pr.done;
    pr.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pr.last = &rec;
    if (progress) progress(pr);
    pr.last = nullptr;
  }
  if (res.ran == 0 && progress) progress(pr);

  // ---- 4. This shard's records, in plan order. ----
  std::map<std::string, const json*> by_key;
  for (const json& j : store.records()) by_key[conformance::run_pair_from_json(j).key()] = &j;
  for (const WorkItem& w : plan) {
    const auto it = by_key.find(key_of(w));
    if (it != by_key.end()) res.records.push_back(conformance::run_pair_from_json(*it->second));
  }
  return res;
}

}  // namespace kvconf::protocol
