// The model suites' fixtures, prompts and case table (model_cases.hpp).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/analysis/metrics.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/registry.hpp"

namespace kvconf::conformance {

namespace fs = std::filesystem;

std::vector<ModelFixture> model_fixtures(const fs::path& fixtures_dir, const fs::path& shared_dir) {
  std::vector<ModelFixture> v;
  for (const char* n : {"llama2-tiny", "mistral-tiny", "gemma2-tiny"})
    v.push_back({n, fixtures_dir / "models" / n, fixtures_dir / "prompts" / "gsm8k.json"});
  v.push_back({"stories260K", shared_dir / "models" / "stories260K" / "stories260K.bin",
               fixtures_dir / "prompts" / "stories.json"});
  v.push_back({"smollm2-135m", fixtures_dir / "models" / "smollm2-135m", fixtures_dir / "prompts" / "smollm2-gsm8k.json",
               true});
  return v;
}

const ModelFixture& model_fixture(const std::vector<ModelFixture>& all, const std::string& name) {
  for (const ModelFixture& f : all)
    if (f.name == name) return f;
  throw std::invalid_argument("kvconf conformance: no model fixture named '" + name + "'");
}

std::optional<std::string> fixture_missing(const ModelFixture& f) {
  for (const fs::path& p : {f.model, f.prompts})
    if (!fs::exists(p))
      return "fixture " + f.name + ": " + p.string() +
             (f.real ? " is missing (written at build time from the GGUF that scripts/smollm2.sh fetches; its GSM8K "
                       "chat prompts need KVCONF_SHARED_DIR)"
                     : std::string()) +
             " is missing (the tiny models and prompts are written at build time by kvconf_make_fixtures; GSM8K "
             "prompts and stories260K need KVCONF_SHARED_DIR)";
  return std::nullopt;
}

const engine::Model& fixture_model(const ModelFixture& f, Format storage) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, std::unique_ptr<engine::Model>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{f.model.string(), static_cast<int>(storage)}];
  if (!slot) slot = std::make_unique<engine::Model>(engine::load_model(f.model, storage));
  return *slot;
}

std::vector<analysis::Prompt> fixture_prompts(const ModelFixture& f, std::size_t count, std::size_t max_tokens) {
  std::vector<analysis::Prompt> out;
  for (analysis::Prompt& p : analysis::read_prompts(f.prompts)) {
    if (out.size() == count) break;
    if (p.ids.size() <= max_tokens) out.push_back(std::move(p));
  }
  return out;
}

std::string ModelCase::id() const {
  return fixture + "__" + profile + "__" + engine::strategy_key(strategy) + "_p" + std::to_string(prompts) + "_s" +
         std::to_string(steps);
}

std::vector<ModelCase> model_cases(const std::vector<std::string>& fixtures, const std::vector<std::string>& profiles,
                                   bool slow) {
  std::vector<ModelCase> v;
  for (const std::string& f : fixtures)
    for (const std::string& p : profiles) {
      if (!slow) {
        v.push_back({f, p, engine::Strategy::greedy, 2, 12, 96, false});
        continue;
      }
      for (engine::Strategy s : {engine::Strategy::greedy, engine::Strategy::top_k, engine::Strategy::top_p})
        v.push_back({f, p, s, 12, 32, 160, true});
    }
  return v;
}

engine::Sampler case_sampler(const ModelCase& c, const std::string& prompt_id) {
  engine::Sampler s;
  s.strategy = c.strategy;
  s.seed = seed_for("model", c.id() + "/" + prompt_id);
  return s;
}

double shared_context_mean_kl(const std::vector<double>& kl, const std::optional<std::size_t>& flip) {
  const std::size_t n = flip ? std::min(*flip + 1, kl.size()) : kl.size();
  double sum = 0.0;
  for (std::size_t s = 0; s < n; ++s) sum += kl[s];
  return n ? sum / static_cast<double>(n) : 0.0;
}

engine::ProfileKernels reordered_fp32_kernels(const kernels::Registry& cpu) {
  engine::ProfileKernels k = engine::resolve(engine::find_profile("fp32"), cpu);
  k.gemm = cpu.find_gemm("cpu.gemm.g1.f32");
  k.attn_prefill = k.attn_decode = cpu.find_attention("cpu.attn.a1_flash2.f32");
  k.norm = cpu.find_norm("cpu.norm.r2.f32");
  if (!k.gemm || !k.attn_prefill || !k.norm)
    throw std::invalid_argument(
        "reordered_fp32_kernels: cpu.gemm.g1.f32, cpu.attn.a1_flash2.f32 or cpu.norm.r2.f32 missing");
  k.profile.name = "fp32-reordered";
  return k;
}

double fp32_kl_floor(const analysis::PairedRun& run, engine::Context& reordered) {
  if (run.logits_off.empty()) throw std::invalid_argument("fp32_kl_floor: the run kept no logits");
  std::vector<int> seq = run.prompt;
  double sum = 0.0;
  for (std::size_t s = 0; s < run.logits_off.size(); ++s) {
    const double s32 = analysis::max_abs_diff(run.logits_off[s], reordered.recompute(seq));
    sum += 8.0 * s32 * s32;
    seq.push_back(run.tokens_off[s]);
  }
  return sum / static_cast<double>(run.logits_off.size());
}

}  // namespace kvconf::conformance
