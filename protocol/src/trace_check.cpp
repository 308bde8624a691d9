// kvconf check on trace pairs (trace_check.hpp): per pair the free-running metrics and rules of kvconf model, the
// optional fp32 replay through kvconf's engine, records appended to OUT/pairs.jsonl.
#include "kvconf/protocol/trace_check.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "kvconf/analysis/metrics.hpp"
#include "kvconf/analysis/paired.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/engine/sampling.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "kvconf/protocol/results_dir.hpp"
#include "kvconf/protocol/result_store.hpp"
#include "kvconf/conformance/model_rules.hpp"
#include "kvconf/conformance/scenario_rules.hpp"
#include "kvconf/engine/scenario.hpp"

namespace kvconf::protocol {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

// The two traces as the free-running PairedRun kvconf's engine would have produced (logits kept).
analysis::PairedRun paired_run(const TracePair& p) {
  analysis::PairedRun r;
  r.regime = analysis::Regime::free_running;
  r.prompt = p.scenario_side.prompt_ids;
  r.tokens_on = p.scenario_side.generated_ids;
  r.tokens_off = p.reference_side.generated_ids;
  r.flip = analysis::flip_index(r.tokens_on, r.tokens_off);
  const std::size_t T = std::min(p.scenario_side.logits.size(), p.reference_side.logits.size());
  for (std::size_t s = 0; s < T; ++s) {
    const std::vector<float>& a = p.scenario_side.logits[s];
    const std::vector<float>& b = p.reference_side.logits[s];
    analysis::StepMetrics m;
    m.step = s;
    m.token_on = r.tokens_on[s];
    m.token_off = r.tokens_off[s];
    m.kl = analysis::kl_divergence(a, b);
    m.js = analysis::js_divergence(a, b);
    m.top_on = analysis::top2(a);
    m.top_off = analysis::top2(b);
    m.max_abs_logit_diff = analysis::max_abs_diff(a, b);
    r.steps.push_back(std::move(m));
  }
  r.logits_on.assign(p.scenario_side.logits.begin(), p.scenario_side.logits.begin() + static_cast<std::ptrdiff_t>(T));
  r.logits_off.assign(p.reference_side.logits.begin(),
                      p.reference_side.logits.begin() + static_cast<std::ptrdiff_t>(T));
  return r;
}

results::CheckResult prefill_bitwise(const TracePair& p) {
  const std::vector<float>& a = p.scenario_side.logits.front();
  const std::vector<float>& b = p.reference_side.logits.front();
  results::CheckResult r;
  r.rule = "prefill_logits_bitwise";
  r.pass = a == b;
  r.error = analysis::max_abs_diff(a, b);
  r.bound = 0.0;
  r.headroom = r.pass ? 1.0 : -std::numeric_limits<double>::infinity();
  r.detail = "logits[0] of both traces (the prefill of the same " + std::to_string(p.scenario_side.prompt_ids.size()) +
             "-token prompt), " + p.scenario_side.logits_dtype + " vs " + p.reference_side.logits_dtype;
  return r;
}

engine::Strategy strategy_of(const Trace& t) { return engine::parse_strategy(t.strategy); }

// The trace's K/V rows as per-layer spans.
conformance::KvRows kv_rows_of(const Trace& t) {
  conformance::KvRows r;
  r.kv_dim = t.kv_dim;
  r.head_dim = 0;  // not in the trace: heads are not named
  for (std::size_t l = 0; l < t.n_layers; ++l) {
    r.k.emplace_back(t.k_rows.data() + l * t.kv_rows * t.kv_dim, t.kv_rows * t.kv_dim);
    r.v.emplace_back(t.v_rows.data() + l * t.kv_rows * t.kv_dim, t.kv_rows * t.kv_dim);
  }
  return r;
}

// cached_kv on traces that both carry K/V rows: side A's cache at its end against side B's (its cache, or for a
// cache-OFF trace the recompute of step kv_step). An engine is a black box, so a row counts as computed alike when the
// calls that computed it are alike: the same call on both sides from an empty cache (the same forward over the same
// tokens: every layer bit for bit), or calls of the same number of rows (layer 0, whose input is the embeddings:
// bit for bit). Restore and --expect-bitwise demand every layer and row.
// kv_dtype: side A's cache (kept in scenario.kv_format) within the format's step of side B's in layer 0, over the
// leading prompt rows both sides computed by calls of the same rows (the same arithmetic before the store); every
// layer measured (conformance::cached_kv_format_rule).
std::optional<results::CheckResult> kv_rule(const TracePair& p, std::size_t shared_steps, bool expect_bitwise) {
  if (p.scenario_side.k_rows.empty() || p.reference_side.k_rows.empty() || p.scenario_side.calls.empty() ||
      p.reference_side.calls.empty())
    return std::nullopt;
  if (p.scenario_side.scenario == engine::Scenario::kv_dtype) {
    const std::size_t n =
        std::min({p.scenario_side.kv_rows, p.reference_side.kv_rows, p.scenario_side.prompt_ids.size()});
    const std::vector<int> gate = conformance::kv_gate(p.scenario_side.calls, p.reference_side.calls, n);
    std::size_t rows = 0;
    while (rows < n && gate[rows] >= 1) ++rows;
    const std::string& d = p.scenario_side.dtype;
    const Format storage = d == "float32" ? Format::fp32 : d == "bfloat16" ? Format::bf16 : Format::fp16;
    return conformance::cached_kv_format_rule(
        *engine::parse_kv_format(p.scenario_side.kv_format), storage, kv_rows_of(p.scenario_side),
        kv_rows_of(p.reference_side), rows,
        std::min({p.scenario_side.kv_rows, p.reference_side.kv_rows, p.scenario_side.prompt_ids.size() + shared_steps}),
        p.scenario_side.seed);
  }
  const std::vector<engine::CallRecord>& a = p.scenario_side.calls;
  std::vector<engine::CallRecord> b = p.reference_side.calls;
  if (p.reference_side.kv_step)
    b = {b.at(p.reference_side.call_of_step.at(*p.reference_side.kv_step))};  // the rows came from that recompute
  const std::size_t rows =
      std::min({p.scenario_side.kv_rows, p.reference_side.kv_rows, p.scenario_side.prompt_ids.size() + shared_steps});
  const std::vector<int> gate = conformance::kv_gate(a, b, rows);
  return conformance::cached_kv_rule(engine::scenario_name(p.scenario_side.scenario), kv_rows_of(p.scenario_side),
                                     kv_rows_of(p.reference_side), rows, gate, expect_bitwise ? "--expect-bitwise" : "",
                                     p.scenario_side.seed);
}

// The first call after which the engine's cache did not hold what the call left in it (1.2's cache_after): a side
// that keeps its cache must hold cached + fed rows of this sequence after every call; a cache-OFF recompute keeps
// none (0) or, capturing its K/V, the rows it fed. Empty when every count agrees or the trace has no report.
std::string growth_difference(const std::string& label, const Trace& t) {
  const bool keeps = t.cache_on;  // cache_on, and both sides of every other scenario
  for (std::size_t i = 0; i < t.cache_after.size() && i < t.calls.size(); ++i) {
    const engine::CallRecord& c = t.calls[i];
    const std::size_t held = t.cache_after[i], grown = c.cached + c.fed;
    if (held == grown || (!keeps && held == 0)) continue;
    return label + " call " + std::to_string(i) + ": cache_after[" + std::to_string(i) + "] " + std::to_string(held) +
           " rows, but a call of " + std::to_string(c.fed) + " tokens over " + std::to_string(c.cached) +
           " cached rows leaves " + std::to_string(grown) + (keeps ? "" : " (or 0: no cache kept)") +
           " (the engine's cache did not hold what the call fed; reported by " + t.calls_reported_by + ")";
  }
  return {};
}

// The rows of the whole call each expected call accepts, from what the engine reported (`have`): on the batch
// scenario's side A (`must_batch`) any batch larger than this sequence's rows ("at least fed + 1" when it was not);
// on every other side, alone or beside other requests (a serving engine's scheduler batches the traced request with
// whatever else it runs: vLLM's sides both run beside a competitor), so a reported batch is taken as it is. Only fed
// and cached are then compared.
void accept_reported_batches(std::vector<engine::CallRecord>& want, const std::vector<engine::CallRecord>& have,
                             bool must_batch) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::size_t rows = i < have.size() ? std::max(have[i].batch, have[i].fed) : 0;
    if (must_batch)
      want[i].batch = rows > want[i].fed ? rows : want[i].fed + 1;
    else if (i < have.size() && have[i].batch > have[i].fed)
      want[i].batch = have[i].batch;
  }
}

// scenario_path: each side's calls, as its engine reported them, are the ones its scenario makes (an adapter whose
// cache-ON side recomputes, or whose reference side used a cache, fails it), and with 1.2's engine report each call
// left in the engine's cache what it fed. The other sequences of a call are the engine's (a padded batch's rows
// included): the batch scenario's side A must hold more rows than this sequence fed, and any call of any other side
// may report a batch (accept_reported_batches).
std::optional<results::CheckResult> path_rule(const TracePair& p) {
  if (p.scenario_side.calls.empty() || p.reference_side.calls.empty()) return std::nullopt;
  engine::ScenarioOptions so;
  so.chunk = p.scenario_side.chunk;
  so.at_step = p.scenario_side.at_step;
  const std::size_t T = std::min(p.scenario_side.generated_ids.size(), p.reference_side.generated_ids.size());
  conformance::ExpectedCalls want = conformance::expected_calls(
      p.scenario_side.scenario, so, p.scenario_side.prompt_ids.size(), p.scenario_side.shared, T);
  accept_reported_batches(want.a, p.scenario_side.calls, p.scenario_side.scenario == engine::Scenario::batch);
  accept_reported_batches(want.b, p.reference_side.calls, false);
  const std::string of = " of " + std::string(engine::scenario_name(p.scenario_side.scenario)) + ")";
  const std::string label_a = p.scenario_side.file.filename().string() + " (side A" + of,
                    label_b = p.reference_side.file.filename().string() + " (side B" + of;
  results::CheckResult r = conformance::scenario_path_rule(
      engine::scenario_name(p.scenario_side.scenario), label_a, p.scenario_side.calls, label_b, p.reference_side.calls,
      want, p.scenario_side.seed, p.scenario_side.call_of_step, p.reference_side.call_of_step);
  if (r.pass) {
    std::string diff = growth_difference(label_a, p.scenario_side);
    if (diff.empty()) diff = growth_difference(label_b, p.reference_side);
    if (!diff.empty()) {
      r.pass = false;
      r.error = 1.0;
      r.headroom = -std::numeric_limits<double>::infinity();
      r.detail = diff;
    } else if (!p.scenario_side.calls_reported_by.empty()) {
      r.detail += "; calls reported by " + p.scenario_side.calls_reported_by;
    }
  }
  return r;
}

// The record's identity (model, profile, strategy, seed, prompt): what key() is made of.
results::RunPairRecord record_of(const Trace& t) {
  results::RunPairRecord r;
  r.model = t.model_name;
  r.profile = t.profile();
  r.strategy = t.strategy;
  r.prompt_id = t.prompt_id;
  r.seed = t.seed;
  return r;
}

}  // namespace

results::RunPairRecord check_trace_pair(const TracePair& p, const engine::Model* fp32, double* replay_diff,
                                        bool expect_bitwise) {
  const auto t0 = std::chrono::steady_clock::now();
  const analysis::PairedRun run = paired_run(p);
  results::RunPairRecord rec = record_of(p.scenario_side);
  rec.max_new_tokens = run.steps.size();
  rec.prompt_tokens = p.scenario_side.prompt_ids.size();
  rec.free = conformance::regime_record(run);
  if (auto path = path_rule(p)) rec.rules.push_back(std::move(*path));
  if (engine::scenario_info(p.scenario_side.scenario).prefill_bitwise) rec.rules.push_back(prefill_bitwise(p));
  if (auto kv = kv_rule(p, run.flip ? *run.flip : run.steps.size(), expect_bitwise))
    rec.rules.push_back(std::move(*kv));
  // kv_dtype: the cache is judged (kv_rule); the logits' effect of a narrower cache is reported (the record's first
  // flip, KL, max |dz|), not judged: neither bitwise nor the near-tie rules, which gauge rounding-sized differences.
  if (p.scenario_side.scenario == engine::Scenario::kv_dtype) {
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rec;
  }
  for (results::CheckResult& r :
       conformance::scenario_bitwise_rules(p.scenario_side.scenario, p.scenario_side.at_step,
                                           expect_bitwise ? "--expect-bitwise" : "", run, p.scenario_side.seed))
    rec.rules.push_back(std::move(r));
  // The fp32 replay of the prompt and the cache-OFF tokens in one pass over an fp32 cache: the prompt's prefill
  // (z_ref,0: the cache-OFF recompute of the prompt bit for bit, PrefillConformance), then one decode per cache-OFF
  // token (z_ref,s), as far as a step is asked for; shared by the flip rules (steps up to the flip) and the replay
  // difference (every step). Not a recompute per step (quadratic in the length): the two fp32 evaluations differ by
  // fp32 rounding, far below the 16-bit differences S gauges (docs/TRACES.md "The fp32 replay").
  conformance::ReferenceLogits z_ref;
  std::unique_ptr<engine::Context> ctx;
  std::vector<std::vector<float>> replay;  // (steps computed so far, V)
  auto replay_at = [&](std::size_t s) -> const std::vector<float>& {
    while (replay.size() <= s)
      replay.push_back(replay.empty() ? ctx->prefill(p.reference_side.prompt_ids)
                                      : ctx->decode(run.tokens_off[replay.size() - 1]));
    return replay[s];
  };
  if (fp32) {
    static const kernels::Registry registry = kernels::cpu_registry();  // must outlive the context's kernels
    engine::ContextOptions co;
    co.capacity =
        p.reference_side.prompt_ids.size() + run.tokens_off.size();  // (prompt + T) rows: the cache never grows
    ctx = std::make_unique<engine::Context>(*fp32, engine::resolve(engine::find_profile("fp32"), registry), co);
    z_ref = [&](const std::vector<int>& seq) { return replay_at(seq.size() - p.reference_side.prompt_ids.size()); };
  }
  for (results::CheckResult& r : conformance::flip_rules(run, p.scenario_side.prompt_ids, strategy_of(p.scenario_side),
                                                         z_ref, p.scenario_side.seed))
    rec.rules.push_back(std::move(r));
  if (fp32 && replay_diff) {  // over every cache-OFF step, not only up to the flip: how far this engine is from fp32
    double worst = 0.0;
    for (std::size_t s = 0; s < run.logits_off.size(); ++s)
      worst = std::max(worst, analysis::max_abs_diff(run.logits_off[s], replay_at(s)));
    *replay_diff = worst;
  }
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rec;
}

TraceCheckResult run_trace_check(const std::vector<TracePair>& pairs, const TraceCheckOptions& o,
                                 const std::function<void(std::size_t, std::size_t)>& progress) {
  if (pairs.empty()) throw BadInput("no trace pairs to check");
  if (o.out.empty()) throw BadInput("--out is required (the results directory)");
  std::unique_ptr<engine::Model> fp32;
  if (!o.model.empty()) {
    try {
      fp32 = std::make_unique<engine::Model>(engine::load_model(o.model, Format::fp32));
    } catch (const std::exception& e) {
      throw BadInput(std::string("--model: ") + e.what());
    }
    for (const TracePair& p : pairs)
      if (static_cast<std::size_t>(fp32->config.vocab) != p.scenario_side.vocab)
        throw BadInput("--model " + o.model.string() + ": vocabulary of " + std::to_string(fp32->config.vocab) +
                       " tokens, but " + p.scenario_side.file.string() + " has model.vocab_size " +
                       std::to_string(p.scenario_side.vocab));
  }
  std::set<std::string> keys;
  for (const TracePair& p : pairs) {
    const std::string key = record_of(p.scenario_side).key();
    if (!keys.insert(key).second)
      throw BadInput(p.scenario_side.file.string() + ": a second pair recorded as " + key +
                     " (same model, dtype, engine, attention, strategy, seed and prompt_id as another pair)");
  }
  ensure_out_dir(o.out);
  json options = {{"inputs", o.inputs}, {"model", o.model.string()}};
  if (o.expect_bitwise) options["expect_bitwise"] = true;  // absent otherwise: older manifests still resume
  const fs::path mf = o.out / "manifest.json";
  std::error_code ec;
  if (o.resume && fs::exists(mf, ec)) {
    const json old = read_manifest(mf);
    if (!old.contains("options") || old["options"] != options)
      throw BadInput("--resume: the traces or --model differ from the run in " + mf.string());
  }
  JsonlStore store(o.out / "pairs.jsonl", o.resume, [](const json& j) { return results::run_pair_from_json(j).key(); });
  write_manifest_file(mf, json{{"schema", "kvconf.manifest/1"}, {"command", "check"}, {"options", options}});
  TraceCheckResult res;
  std::map<std::string, results::RunPairRecord> done;
  for (const json& j : store.records()) {
    results::RunPairRecord r = results::run_pair_from_json(j);
    done.emplace(r.key(), std::move(r));
  }
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const TracePair& p = pairs[i];
    const auto it = done.find(record_of(p.scenario_side).key());
    if (it != done.end()) {
      res.records.push_back(it->second);
      ++res.resumed;
    } else {
      double diff = -1.0;
      res.records.push_back(check_trace_pair(p, fp32.get(), &diff, o.expect_bitwise));
      res.replay_max_diff = std::max(res.replay_max_diff, diff);
      store.append(results::to_json(res.records.back()));
      ++res.ran;
    }
    if (progress) progress(i + 1, pairs.size());
  }
  return res;
}

}  // namespace kvconf::protocol
