// flip_attribution: why did this pair flip? At the flip step t (the paths share every token before it), cache-ON's
// decode of step t is rerun with a set of its (layer, op) results replaced by cache-OFF's — the layer's cached K/V
// rows, or the new row's output of an op (attention norm, q/k/v projections after RoPE, attention, o projection, MLP
// norm, MLP down projection) — and the step's token drawn again. Bisection over the candidates, then dropping any
// one that is not needed, finds a small set whose replacement removes the flip; the report names it with the kernel
// that computed it. Rule: replacing every candidate reproduces cache-OFF's logits bit for bit (what remains is the
// LM head of the same final row), checked at the flip step, or at step 1 when the pair did not flip.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "experiment.hpp"
#include "kvconf/engine/generate.hpp"
#include "summary_util.hpp"

namespace kvconf::protocol::experiments {
using nlohmann::json;
namespace {

struct Candidate {
  std::size_t layer;
  std::string op;                       // "cache", "attn_norm", "qkv", "attention", "o_proj", "mlp_norm", "mlp"
  std::vector<engine::OpStage> stages;  // empty for "cache"
};

std::vector<Candidate> candidates(std::size_t L) {
  using S = engine::OpStage;
  std::vector<Candidate> c;
  for (std::size_t l = 0; l < L; ++l) {
    c.push_back({l, "cache", {}});
    c.push_back({l, "attn_norm", {S::attn_in}});
    c.push_back({l, "qkv", {S::q_rope, S::k_rope, S::v}});
    c.push_back({l, "attention", {S::attn}});
    c.push_back({l, "o_proj", {S::o}});
    c.push_back({l, "mlp_norm", {S::mlp_in}});
    c.push_back({l, "mlp", {S::down}});
  }
  return c;
}

const std::vector<float>& stage_of(const engine::LayerTrace& t, engine::OpStage s) {
  using S = engine::OpStage;
  switch (s) {
    case S::attn_in:
      return t.attn_in;
    case S::q_rope:
      return t.q_rope;
    case S::k_rope:
      return t.k_rope;
    case S::v:
      return t.v;
    case S::attn:
      return t.attn;
    case S::o:
      return t.o;
    case S::mlp_in:
      return t.mlp_in;
    case S::down:
      return t.down;
  }
  return t.down;
}

std::string describe(const Candidate& c, const engine::ProfileKernels& k) {
  const std::string l = "layer " + std::to_string(c.layer) + "'s ";
  if (c.op == "cache") return l + "cached K/V rows";
  if (c.op == "attention") return l + "decode attention (" + k.attn_decode->info.name + ")";
  if (c.op == "attn_norm" || c.op == "mlp_norm") return l + c.op + " (" + k.norm->info.name + ")";
  return l + c.op + " (" + k.gemm->info.name + ")";
}

json run(PairUnit& u, results::CheckResults& rules) {
  const analysis::PairedRun& f = u.free();
  engine::Context& c = u.ctx();
  const std::size_t L = c.model().config.n_layers, P = u.prompt().size();
  json d;
  if (f.tokens_off.size() < 2) return d;
  const std::size_t t = f.flip ? *f.flip : 1;  // the step examined
  d["flip"] = f.flip ? json(*f.flip) : json();
  if (t == 0) {  // impossible for a conforming engine (the prompt's logits are bitwise equal: decision_boundary)
    d["not_attributable"] = "flip at step 0: the prompt's own logits differ";
    return d;
  }
  // cache-OFF at step t: its logits, its rows, its ops' outputs for the last row.
  const std::vector<int> seq(f.tokens_off.begin(), f.tokens_off.begin() + static_cast<std::ptrdiff_t>(t));
  std::vector<int> full = u.prompt();
  full.insert(full.end(), seq.begin(), seq.end());
  engine::ForwardOptions cap;
  cap.capture_layers = true;
  const std::vector<float> z_off = c.recompute(full, cap);
  const engine::KvCache off_cache = c.last_recompute_cache();
  std::vector<std::map<engine::OpStage, std::vector<float>>> off_ops(L);
  for (std::size_t l = 0; l < L; ++l)
    for (engine::OpStage s :
         {engine::OpStage::attn_in, engine::OpStage::q_rope, engine::OpStage::k_rope, engine::OpStage::v,
          engine::OpStage::attn, engine::OpStage::o, engine::OpStage::mlp_in, engine::OpStage::down}) {
      const std::vector<float>& all = stage_of(c.trace().layers[l], s);
      const std::size_t width = all.size() / full.size();
      off_ops[l][s].assign(all.end() - static_cast<std::ptrdiff_t>(width), all.end());
    }
  // cache-ON just before step t: prompt prefilled, tokens [0, t−1) decoded.
  c.reset();
  c.prefill(u.prompt());
  for (std::size_t s = 0; s + 1 < t; ++s) c.decode(seq[s]);
  const engine::Context before = c;
  const std::vector<Candidate> cand = candidates(L);
  const analysis::PairOptions& po = u.options();
  const double draw = engine::step_draw(po.sampler.seed, t);
  const int want = f.tokens_off[t];
  std::size_t trials = 0;
  auto logits_with = [&](const std::vector<std::size_t>& set) {
    ++trials;
    engine::Context trial = before;
    engine::ForwardOptions fo;
    for (std::size_t i : set) {
      const Candidate& k = cand[i];
      if (k.op == "cache") trial.patch_cache(off_cache, k.layer, 0, P + t - 1);
      for (engine::OpStage s : k.stages) fo.op_patches.push_back({k.layer, s, off_ops[k.layer][s]});
    }
    return trial.decode(seq[t - 1], fo);
  };
  auto removes = [&](const std::vector<std::size_t>& set) {
    return engine::sample(po.sampler, logits_with(set), draw) == want;
  };
  std::vector<std::size_t> all(cand.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const std::vector<float> z_all = logits_with(all);
  double diff = 0.0;
  for (std::size_t i = 0; i < z_all.size(); ++i) diff = std::max(diff, std::fabs(double(z_all[i]) - z_off[i]));
  results::CheckResult r;
  r.rule = "full_patch_reproduces_off";
  r.pass = z_all == z_off;
  r.error = diff;
  r.headroom = r.pass ? 1.0 : -std::numeric_limits<double>::infinity();
  r.seed = u.seed();
  r.detail = "step " + std::to_string(t) + ", all " + std::to_string(cand.size()) +
             " (layer, op) results replaced: max|z - z_off| = " + num(diff, 6) + " (must be 0)";
  rules.push_back(r);
  if (!f.flip) return d;
  if (!r.pass || engine::sample(po.sampler, z_all, draw) != want) {
    d["not_attributable"] = "replacing every (layer, op) does not remove the flip";
    return d;
  }
  // Bisection while one half alone removes the flip, then drop every member not needed (a 1-minimal set).
  std::vector<std::size_t> set = all;
  while (set.size() > 1) {
    const std::vector<std::size_t> a(set.begin(), set.begin() + static_cast<std::ptrdiff_t>(set.size() / 2)),
        b(set.begin() + static_cast<std::ptrdiff_t>(set.size() / 2), set.end());
    if (removes(a))
      set = a;
    else if (removes(b))
      set = b;
    else
      break;
  }
  for (std::size_t i = 0; i < set.size() && set.size() > 1;) {
    std::vector<std::size_t> without = set;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    if (removes(without))
      set = without;
    else
      ++i;
  }
  json culprits = json::array();
  std::string because;
  for (std::size_t i : set) {
    culprits.push_back({{"layer", cand[i].layer}, {"op", cand[i].op}, {"what", describe(cand[i], c.kernels())}});
    because += (because.empty() ? "" : " + ") + describe(cand[i], c.kernels());
  }
  d["culprits"] = culprits;
  d["trials"] = trials;
  d["sentence"] = "step " + std::to_string(t) + " flipped because of " + because;
  return d;
}

void summarize(const Records& recs, results::ExperimentSummary& s) {
  s.columns = {"model  profile  strategy", "flips",         "attributed",      "culprit ops (count)",
               "culprit layers (count)",   "mean set size", "decodes per flip"};
  const Groups g = group_by(recs, {"model", "profile", "strategy"});
  results::ExperimentPlot p{
      "Flip attribution: culprit count per op (0 cache, 1 attn_norm, 2 qkv, 3 attention, "
      "4 o_proj, 5 mlp_norm, 6 mlp)",
      "op",
      "flips naming it",
      {}};
  const std::vector<std::string> ops = {"cache", "attn_norm", "qkv", "attention", "o_proj", "mlp_norm", "mlp"};
  std::map<std::string, std::map<std::string, double>> by_profile;
  for (const std::string& k : g.keys) {
    std::size_t flips = 0, attributed = 0;
    std::map<std::string, std::size_t> op_count, layer_count;
    std::vector<double> size, trials;
    for (const json* r : g.by_key.at(k)) {
      const json& d = r->at("data");
      if (!d.contains("flip") || d.at("flip").is_null()) continue;
      ++flips;
      if (!d.contains("culprits")) continue;
      ++attributed;
      size.push_back(double(d.at("culprits").size()));
      trials.push_back(d.at("trials").get<double>());
      for (const json& c : d.at("culprits")) {
        ++op_count[c.at("op").get<std::string>()];
        ++layer_count[std::to_string(c.at("layer").get<std::size_t>())];
        by_profile[r->at("profile").get<std::string>()][c.at("op").get<std::string>()] += 1;
      }
      if (s.findings.size() < 12)
        s.findings.push_back(k + ", " + r->at("prompt_id").get<std::string>() + ": " +
                             d.at("sentence").get<std::string>() + ".");
    }
    std::string o, l;
    for (const auto& [name, n] : op_count) o += (o.empty() ? "" : ", ") + name + " " + std::to_string(n);
    for (const auto& [name, n] : layer_count) l += (l.empty() ? "" : ", ") + name + ": " + std::to_string(n);
    s.rows.push_back({k, std::to_string(flips), std::to_string(attributed), o.empty() ? "-" : o, l.empty() ? "-" : l,
                      num(mean(size)), num(mean(trials))});
  }
  for (const auto& [profile, counts] : by_profile) {
    results::ExperimentSeries b{profile, "bars", {}, {}};
    for (std::size_t i = 0; i < ops.size(); ++i)
      b.x.push_back(double(i)), b.y.push_back(counts.count(ops[i]) ? counts.at(ops[i]) : 0.0);
    p.series.push_back(b);
  }
  if (s.findings.empty()) s.findings.push_back("No pair flipped, so there was nothing to attribute.");
  s.plots.push_back(p);
}

}  // namespace

Experiment flip_attribution() {
  return {"flip_attribution", "Flip attribution by bisection",
          "Which (layer, op) results of cache-ON, replaced by cache-OFF's, remove a flip?", run, summarize};
}

}  // namespace kvconf::protocol::experiments
