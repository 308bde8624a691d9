// run_experiments and summarize_experiments (kvconf/protocol/experiments.hpp): the protocol's plan, one record per
// (pair, experiment) appended to OUT/experiments.jsonl, the experiments of one pair sharing its PairUnit.
#include <chrono>
#include <map>
#include <memory>
#include <set>

#include "experiment.hpp"
#include "kvconf/results/records.hpp"
#include "kvconf/engine/sampling.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/protocol_plan.hpp"
#include "kvconf/protocol/result_store.hpp"
#include "../run_setup.hpp"
#include "summary_util.hpp"

namespace kvconf::protocol {
using experiments::all_experiments;
using nlohmann::json;

std::vector<std::string> experiment_names() {
  std::vector<std::string> out;
  for (const experiments::Experiment& e : all_experiments()) out.push_back(e.name);
  return out;
}

std::vector<std::string> parse_experiments(const std::string& text) {
  std::vector<std::string> known = experiment_names();  // not const: returned by move for "all"
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  if (text == "all") return known;
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (std::find(known.begin(), known.end(), item) == known.end())
      throw BadInput("--experiment '" + text + "': unknown experiment '" + item +
                     "' (expected all, or a "
                     "comma-separated list of: " +
                     list + ")");
    if (std::find(out.begin(), out.end(), item) != out.end())
      throw BadInput("--experiment '" + text + "': '" + item + "' is listed twice");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  // Run order is the table's, whatever order the user listed.
  std::vector<std::string> ordered;
  for (const std::string& k : known)
    if (std::find(out.begin(), out.end(), k) != out.end()) ordered.push_back(k);
  return ordered;
}

namespace {
std::string key_string(const std::string& experiment, const std::string& model, const std::string& profile,
                       const std::string& strategy, std::uint64_t seed, const std::string& prompt_id) {
  return experiment + "|" + model + "|" + profile + "|" + strategy + "|" + std::to_string(seed) + "|" + prompt_id;
}
}  // namespace

std::string experiment_record_key(const json& r) {
  try {
    return key_string(r.at("experiment").get<std::string>(), r.at("model").get<std::string>(),
                      r.at("profile").get<std::string>(), r.at("strategy").get<std::string>(),
                      r.at("seed").get<std::uint64_t>(), r.at("prompt_id").get<std::string>());
  } catch (const json::exception& e) {
    throw BadInput(std::string("experiment record: a key field (experiment, model, profile, strategy, seed, "
                               "prompt_id) is missing or has the wrong type (") +
                   e.what() + ")");
  }
}

ExperimentsResult run_experiments(const ProtocolOptions& o, const std::vector<std::string>& names,
                                  const ProgressFn& progress, const ExperimentPlants& plants) {
  if (names.empty()) throw BadInput("--experiment: no experiment given (all, or a comma-separated list)");
  std::vector<const experiments::Experiment*> run;
  for (const std::string& n : parse_experiments([&] {
         std::string t;
         for (const std::string& s : names) t += (t.empty() ? "" : ",") + s;
         return t;
       }()))
    for (const experiments::Experiment& e : all_experiments())
      if (n == e.name) run.push_back(&e);

  json extra = json::object();
  extra["experiments"] = names;
  const detail::RunSetup setup = detail::load_run(o, extra);
  detail::prepare_out(o, setup.options, "experiments.jsonl");
  JsonlStore store(o.out / "experiments.jsonl", o.resume, [](const json& j) { return experiment_record_key(j); });
  detail::write_manifest(o, setup, "model --experiment");

  const PromptSet& ps = setup.ps;
  const std::vector<WorkItem> plan = plan_work(o.profiles, o.strategies, o.seeds, ps.prompts.size(), o.shard);
  auto key_of = [&](const WorkItem& w, const experiments::Experiment& e) {
    return key_string(e.name, o.model, w.profile, w.strategy, w.seed, ps.prompts[w.prompt].id);
  };
  ExperimentsResult res;
  for (const WorkItem& w : plan)
    for (const experiments::Experiment* e : run) res.resumed += store.has(key_of(w, *e));

  engine::ContextOptions co;
  co = engine::with_fault(plants.fault, co);
  std::map<std::string, std::unique_ptr<engine::Context>> ctx, ref, invariant, kv32;
  const engine::ProfileKernels k_inv = engine::resolve(engine::find_profile("fp16-invariant"), *setup.registry);
  for (const auto& [name, pk] : setup.kernels) {
    ctx[name] = std::make_unique<engine::Context>(*setup.models.by_storage.at(pk.profile.storage), pk, co);
    ref[name] = std::make_unique<engine::Context>(*setup.models.ref_by_storage.at(pk.profile.storage), setup.k32);
    if (pk.profile.storage != Format::fp32 && !pk.profile.requires_gpu) {
      engine::ContextOptions c32 = co;
      c32.kv_fp32_gemm = setup.k32.gemm;
      kv32[name] = std::make_unique<engine::Context>(*setup.models.by_storage.at(pk.profile.storage), pk, c32);
    }
    if (pk.profile.storage == k_inv.profile.storage)
      invariant[name] = std::make_unique<engine::Context>(*setup.models.by_storage.at(pk.profile.storage), k_inv, co);
  }

  const auto t0 = std::chrono::steady_clock::now();
  Progress pr;
  pr.total = plan.size() * run.size();
  pr.resumed = res.resumed;
  pr.done = res.resumed;
  for (const WorkItem& w : plan) {
    const ProtocolPrompt& p = ps.prompts[w.prompt];
    experiments::PairUnit unit(*ctx.at(w.profile), *ref.at(w.profile), p, detail::pair_options(o, setup, w, p.id),
                               plants);
    unit.answer = [&setup](const std::vector<int>& tokens) { return detail::answer_of(setup, tokens); };
    if (invariant.count(w.profile)) unit.invariant = invariant.at(w.profile).get();
    if (kv32.count(w.profile)) unit.kv_fp32 = kv32.at(w.profile).get();
    for (const experiments::Experiment* e : run) {
      const std::string key = key_of(w, *e);
      if (store.has(key)) continue;
      const auto e0 = std::chrono::steady_clock::now();
      results::CheckResults rules;
      json data = e->run(unit, rules);
      json rec = {{"schema", kExperimentSchema},
                  {"experiment", e->name},
                  {"model", o.model},
                  {"profile", w.profile},
                  {"strategy", w.strategy},
                  {"seed", w.seed},
                  {"prompt_id", p.id},
                  {"max_new_tokens", o.max_new_tokens}};
      rec["data"] = std::move(data);
      rec["rules"] = json::array();
      for (const results::CheckResult& c : rules) rec["rules"].push_back(results::to_json(c));
      rec["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
      store.append(rec);
      ++res.ran;
      ++pr.done;
      pr.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (progress) progress(pr);
    }
  }
  if (res.ran == 0 && progress) progress(pr);

  std::map<std::string, const json*> by_key;
  for (const json& j : store.records()) by_key[experiment_record_key(j)] = &j;
  for (const WorkItem& w : plan)
    for (const experiments::Experiment* e : run) {
      const auto it = by_key.find(key_of(w, *e));
      if (it != by_key.end()) res.records.push_back(*it->second);
    }
  res.summaries = summarize_experiments(res.records);
  return res;
}

std::vector<results::ExperimentSummary> summarize_experiments(const std::vector<json>& records) {
  std::vector<results::ExperimentSummary> out;
  for (const experiments::Experiment& e : all_experiments()) {
    experiments::Records mine;
    for (const json& r : records) {
      const std::string key = experiment_record_key(r);
      if (!r.contains("data") || !r["data"].is_object() || !r.contains("rules") || !r["rules"].is_array())
        throw BadInput("experiment record " + key + ": field 'data' (object) or 'rules' (array) is missing");
      if (r["experiment"] == e.name) mine.push_back(&r);
    }
    for (const json& r : records) {
      const std::string n = r["experiment"].get<std::string>();
      if (std::none_of(all_experiments().begin(), all_experiments().end(),
                       [&](const experiments::Experiment& x) { return n == x.name; }))
        throw BadInput("experiment record " + experiment_record_key(r) + ": unknown experiment '" + n + "'");
    }
    if (mine.empty()) continue;
    results::ExperimentSummary s;
    s.name = e.name;
    s.title = e.title;
    s.question = e.question;
    s.records = mine.size();
    std::set<std::string> pairs;
    for (const json* r : mine) {
      s.seconds += r->value("seconds", 0.0);
      pairs.insert(experiment_record_key(*r));
    }
    s.pairs = pairs.size();
    try {
      e.summarize(mine, s);
    } catch (const json::exception& ex) {
      std::string key = "?";  // the first record that alone does not summarise
      for (const json* r : mine) try {
          results::ExperimentSummary one;
          e.summarize({r}, one);
        } catch (const json::exception&) {
          key = experiment_record_key(*r);
          break;
        }
      throw BadInput("experiment record " + key + ": field 'data' is not what " + e.name + " writes (" + ex.what() +
                     ")");
    }
    experiments::add_verdicts(e.name, mine, s);
    out.push_back(std::move(s));
  }
  return out;
}

namespace experiments {
const std::vector<Experiment>& all_experiments() {
  static const std::vector<Experiment> all = {decision_boundary(), residual_patching(), kv_patching(),
                                              kv_buildup(),        gqa_amplification(), kv_injection(),
                                              mitigations(),       flip_attribution()};
  return all;
}
}  // namespace experiments

}  // namespace kvconf::protocol
