// kv_injection (seed 002, "Effect of KV Cache Error on Inference Accuracy"; the paper's §7.6 on cache compression):
// how much error in the cached K/V can a model take? Cache-ON free-running with every row it stores perturbed after
// the call that wrote it (uniform noise relative to each value, absolute normal noise, sign flips, fp8/int8/int4
// and llama.cpp q8_0/q4_0 round trips), against the clean cache-ON run: flip, shared-context KL, answer. Rules: the
// quantizers stay within their step (quantizer_within_step), and noise of one storage rounding (U(−u, u) relative)
// moves the logits no more than the model's own rounding does and flips only near-ties (u_noise_*: FlipsAreNearTies'
// rules with the clean cache-ON run as the reference path).
#include <cmath>
#include <limits>
#include <map>

#include "experiment.hpp"
#include "kv_quantize.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/generate.hpp"
#include "summary_util.hpp"

namespace kvconf::protocol::experiments {
using nlohmann::json;
namespace {

// Cache-ON free-running with variant v applied to every stored row.
engine::GenerateResult injected_run(PairUnit& u, const Variant& v, std::uint64_t stream, QuantCheck& qc) {
  engine::Context& c = u.ctx();
  const engine::ModelConfig& cfg = c.model().config;
  const Format st = c.kernels().profile.storage;
  const double scale = u.plants().injection_scale;
  const bool trunc = u.plants().quantize_truncate;
  std::uint64_t rng = stream;
  std::size_t done = 0;  // rows perturbed so far (every layer, K and V alike)
  auto inject = [&]() {
    const std::size_t n = c.n_cached();
    std::size_t end = n;
    if (v.per_channel()) end = n / kGroupRows * kGroupRows;  // only complete groups (KIVI keeps the rest exact)
    if (end <= done) return;
    engine::KvCache src = c.cache();
    for (std::size_t l = 0; l < cfg.n_layers; ++l)
      for (auto* side : {&src.k[l], &src.v[l]}) {
        if (v.per_channel())
          for (std::size_t g = done; g < end; g += kGroupRows)
            perturb_rows(v, *side, src.kv_dim, g, g + kGroupRows, st, rng, scale, trunc, qc);
        else
          perturb_rows(v, *side, src.kv_dim, done, end, st, rng, scale, trunc, qc);
      }
    c.patch_cache(src, engine::Context::npos, done, end);
    done = end;
  };
  const analysis::PairOptions& po = u.options();
  engine::GenerateResult g;
  c.reset();
  std::vector<float> z = c.prefill(u.prompt());
  inject();
  for (std::size_t t = 0; t < po.steps; ++t) {
    const int tok = engine::sample(po.sampler, z, engine::step_draw(po.sampler.seed, t));
    g.tokens.push_back(tok);
    g.logits.push_back(std::move(z));
    if (t + 1 == po.steps) break;
    z = c.decode(tok);
    inject();
  }
  return g;
}

json run(PairUnit& u, results::CheckResults& rules) {
  const analysis::PairedRun& f = u.free();
  engine::GenerateResult clean;
  clean.tokens = f.tokens_on;
  clean.logits = f.logits_on;
  const Format st = u.ctx().kernels().profile.storage;
  const std::vector<Variant> variants = injection_variants(st);
  const std::optional<std::string> gold = u.protocol_prompt().gold;
  json d;
  d["clean_correct"] = gold && u.answer && u.answer(f.tokens_on) == gold;
  d["has_gold"] = gold.has_value() && u.answer && u.answer(f.tokens_on).has_value();
  json vs = json::array();
  QuantCheck qc;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    const std::uint64_t stream = u.seed() ^ (0x9E3779B97F4A7C15ull * (i + 1));
    analysis::PairOptions po = u.options();
    po.keep_logits = true;
    const analysis::PairedRun run =
        analysis::pair_of(analysis::Regime::free_running, u.prompt(), injected_run(u, v, stream, qc), clean, po);
    std::vector<double> kl;
    for (const analysis::StepMetrics& s : run.steps) kl.push_back(s.kl);
    json e = {{"variant", v.name()},
              {"family", v.family()},
              {"amplitude", v.amplitude},
              {"flip", run.flip ? json(*run.flip) : json()},
              {"kl", conformance::shared_context_mean_kl(kl, run.flip)},
              {"correct", gold && u.answer && u.answer(run.tokens_on) == gold}};
    vs.push_back(e);
    if (v.kind == Perturb::uniform_rel && i == 0) {  // amplitude u: one storage rounding
      results::CheckResults r = conformance::flip_rules(
          run, u.prompt(), po.sampler.strategy, [&u](const std::vector<int>& seq) { return u.ref().recompute(seq); },
          u.seed());
      for (results::CheckResult& x : r) {
        if (x.rule == "no_flip") continue;
        x.rule = "u_noise_" + x.rule;
        x.detail = "U(-u,u) relative noise on every stored K/V value, against clean cache-ON: " + x.detail;
        rules.push_back(x);
      }
    }
  }
  d["variants"] = vs;
  results::CheckResult q;
  q.rule = "quantizer_within_step";
  q.error = qc.err;
  q.bound = qc.bound;
  q.pass = qc.worst_ratio <= 1.0;
  q.headroom = 1.0 - qc.worst_ratio;
  q.seed = u.seed();
  q.detail = std::to_string(qc.elements) + " quantized elements; worst |x - q(x)| = " + num(qc.err, 6) +
             " against its step bound " + num(qc.bound, 6);
  rules.push_back(q);
  return d;
}

void summarize(const Records& recs, results::ExperimentSummary& s) {
  s.columns = {"model  profile", "variant", "pairs", "flip rate", "mean KL", "median first flip", "accuracy (clean)"};
  const Groups g = group_by(recs, {"model", "profile"});
  results::ExperimentPlot amp{"KV injection: flip rate vs relative noise amplitude (uniform)",
                              "log2 amplitude a of x(1 + a U(-1,1))",
                              "flip rate",
                              {}};
  results::ExperimentPlot quant{
      "KV injection: flip rate per quantization (0 fp8_e4m3, 1 fp8_e5m2, 2 int8 token, "
      "3 int8 channel, 4 int4 token, 5 int4 channel, 6 q8_0, 7 q4_0)",
      "quantization",
      "flip rate",
      {}};
  for (const std::string& k : g.keys) {
    std::vector<std::string> order;
    std::map<std::string, std::vector<const json*>> by_variant;
    std::size_t clean_right = 0, with_gold = 0;
    for (const json* r : g.by_key.at(k)) {
      const json& d = r->at("data");
      with_gold += d.at("has_gold").get<bool>();
      clean_right += d.at("clean_correct").get<bool>();
      for (const json& e : d.at("variants")) {
        const std::string n = e.at("variant").get<std::string>();
        if (!by_variant.count(n)) order.push_back(n);
        by_variant[n].push_back(&e);
      }
    }
    results::ExperimentSeries a{k, "line", {}, {}}, b{k, "bars", {}, {}};
    std::string threshold = "none flips half the pairs";
    double qi = 0;
    for (const std::string& n : order) {
      const auto& es = by_variant.at(n);
      std::size_t flips = 0, right = 0;
      std::vector<double> kl, fi;
      for (const json* e : es) {
        flips += !e->at("flip").is_null();
        if (!e->at("flip").is_null()) fi.push_back(e->at("flip").get<double>());
        kl.push_back(e->at("kl").get<double>());
        right += e->at("correct").get<bool>();
      }
      const double rate = double(flips) / double(es.size());
      const std::string fam = es.front()->at("family").get<std::string>();
      if (fam == "uniform_rel") {
        a.x.push_back(std::log2(es.front()->at("amplitude").get<double>()));
        a.y.push_back(rate);
        if (rate >= 0.5 && threshold.rfind("none", 0) == 0)
          threshold = "a = " + num(es.front()->at("amplitude").get<double>());
      }
      if (fam == "quantization") b.x.push_back(qi++), b.y.push_back(rate);
      s.rows.push_back(
          {k, n, std::to_string(es.size()), pct(rate), num(mean(kl)), num(median(fi)),
           with_gold ? pct(double(right) / with_gold) + " (" + pct(double(clean_right) / with_gold) + ")" : "n/a"});
    }
    amp.series.push_back(a);
    quant.series.push_back(b);
    s.findings.push_back(k +
                         ": susceptibility threshold (smallest uniform relative amplitude that flips at least half "
                         "the pairs): " +
                         threshold + ".");
  }
  s.plots.push_back(amp);
  s.plots.push_back(quant);
}

}  // namespace

Experiment kv_injection() {
  return {"kv_injection", "KV-cache error injection and quantization (seed 002)",
          "How much error in the stored K/V rows (noise, fp8, int8, int4, q8_0, q4_0) flips the output, and from what "
          "amplitude?",
          run, summarize};
}

}  // namespace kvconf::protocol::experiments
