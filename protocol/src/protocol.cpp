// run_protocol (protocol.hpp): checks every option and input, writes/compares OUT/manifest.json, then runs the planned
// pairs of this shard that OUT/pairs.jsonl does not already hold (the protocol's cache pair, or a scenario's two
// sides), appending each record as it finishes.
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
#include "kvconf/engine/scenario.hpp"
#include "kvconf/engine/tokenizer.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/protocol_inputs.hpp"
#include "kvconf/protocol/protocol_plan.hpp"
#include "kvconf/conformance/model_rules.hpp"
#include "kvconf/conformance/scenario_rules.hpp"
#include "run_setup.hpp"

namespace kvconf::protocol {
using nlohmann::json;

ProtocolResult run_protocol(const ProtocolOptions& o, const ProgressFn& progress) {
  // ---- 1. Everything that can be bad input, before any pair runs. ----
  const detail::RunSetup setup = detail::load_run(o);
  const std::map<std::string, engine::ProfileKernels>& kernels = setup.kernels;
  const detail::Models& models = setup.models;
  const PromptSet& ps = setup.ps;
  detail::prepare_out(o, setup.options, "pairs.jsonl");
  JsonlStore store(o.out / "pairs.jsonl", o.resume, [](const json& j) { return results::run_pair_from_json(j).key(); });
  detail::write_manifest(o, setup, "model");

  // ---- 2. The plan of this shard, and the pairs not yet done. ----
  const std::vector<WorkItem> plan =
      plan_work(o.profiles, o.strategies, o.seeds, ps.prompts.size(), o.shard, o.scenarios);
  auto key_of = [&](const WorkItem& w) {
    results::RunPairRecord r;
    r.model = o.model;
    r.profile = w.record_profile();
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
  for (const auto& [name, pk] : kernels) is_reference[name] = setup.is_reference(name);
  // The fp32 noise floor of Fp32KlRatio (conformance::fp32_kl_floor) for the reference profiles' pairs.
  const engine::ProfileKernels k32_reordered = conformance::reordered_fp32_kernels(*setup.registry);
  std::map<std::string, std::unique_ptr<engine::Context>> reordered;
  for (const auto& [name, pk] : kernels) {
    ctx[name] = std::make_unique<engine::Context>(*models.by_storage.at(pk.profile.storage), pk);
    ref[name] = std::make_unique<engine::Context>(*models.ref_by_storage.at(pk.profile.storage), setup.k32);
    if (is_reference.at(name))
      reordered[name] = std::make_unique<engine::Context>(*models.by_storage.at(pk.profile.storage), k32_reordered);
  }

  // ---- 3. Run. ----
  const auto t0 = std::chrono::steady_clock::now();
  Progress pr;
  pr.total = plan.size();
  pr.resumed = res.resumed;
  pr.done = res.resumed;
  // The record's answers and its time since p0, appended to the store; progress.
  const auto finish = [&](results::RunPairRecord& rec, const ProtocolPrompt& p,
                          std::chrono::steady_clock::time_point p0) {
    rec.gold = p.gold;
    rec.answer_on = detail::answer_of(setup, rec.free.tokens_on);
    rec.answer_off = detail::answer_of(setup, rec.free.tokens_off);
    rec.correct_on = rec.gold && rec.answer_on == rec.gold;
    rec.correct_off = rec.gold && rec.answer_off == rec.gold;
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    store.append(results::to_json(rec));
    ++res.ran;
    ++pr.done;
    pr.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pr.last = &rec;
    if (progress) progress(pr);
    pr.last = nullptr;
  };
  for (const WorkItem& w : plan) {
    const std::string key = key_of(w);
    if (store.has(key)) continue;
    const ProtocolPrompt& p = ps.prompts[w.prompt];
    const auto p0 = std::chrono::steady_clock::now();
    results::RunPairRecord rec;
    rec.model = o.model;
    rec.profile = w.record_profile();
    rec.strategy = w.strategy;
    rec.prompt_id = p.id;
    rec.seed = w.seed;
    rec.max_new_tokens = o.max_new_tokens;
    rec.prompt_tokens = p.ids.size();
    analysis::PairOptions po = detail::pair_options(o, setup, w, p.id);
    po.layer_drift = o.layer_drift;
    engine::Context& c = *ctx.at(w.profile);
    analysis::PairedRun free, teacher;
    if (w.scenario != "cache") {
      // A scenario's two sides, free-running; the other request is the sample's next prompt. The near-tie rules'
      // reference: the fp32 context, or for the fp32 reference profile itself the same arithmetic reordered.
      const engine::Scenario sc = *engine::parse_scenario(w.scenario);
      const ProtocolPrompt& other = ps.prompts[(w.prompt + 1) % ps.prompts.size()];
      const engine::ScenarioOptions so = conformance::scenario_options(p.ids, other.ids, o.max_new_tokens);
      engine::Context& r = is_reference.at(w.profile) ? *reordered.at(w.profile) : *ref.at(w.profile);
      rec.rules = conformance::check_scenario(c, r, p.ids, sc, so, po, po.sampler.seed, nullptr, &free);
      rec.free = conformance::regime_record(free);
      finish(rec, p, p0);
      continue;
    }
    if (is_reference.at(w.profile)) {
      analysis::PairOptions keep = po;
      keep.keep_logits = true;
      free = analysis::run_free(c, c, p.ids, keep);
      rec.fp32_kl_floor = conformance::fp32_kl_floor(free, *reordered.at(w.profile));
    } else
      rec.rules = conformance::check_flips_are_near_ties(c, *ref.at(w.profile), p.ids, po, po.sampler.seed, &free);
    rec.free = conformance::regime_record(free);
    free.logits_on.clear();
    free.logits_off.clear();
    if (!free.flip && o.reuse_free_as_teacher) {
      teacher = std::move(free);
      teacher.regime = analysis::Regime::teacher_forced;
    } else {
      teacher = analysis::run_teacher_forced(c, c, p.ids, rec.free.tokens_on, po);
    }
    rec.teacher = conformance::regime_record(teacher);
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
    finish(rec, p, p0);
  }
  if (res.ran == 0 && progress) progress(pr);

  // ---- 4. This shard's records, in plan order. ----
  std::map<std::string, const json*> by_key;
  for (const json& j : store.records()) by_key[results::run_pair_from_json(j).key()] = &j;
  for (const WorkItem& w : plan) {
    const auto it = by_key.find(key_of(w));
    if (it != by_key.end()) res.records.push_back(results::run_pair_from_json(*it->second));
  }
  return res;
}

}  // namespace kvconf::protocol
