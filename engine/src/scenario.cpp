// The scenario driver (scenario.hpp): side A of each scenario and the plain side B, free-running with the shared
// per-step draws, recording every forward call (tokens fed, cached rows) from the context's trace.
#include "kvconf/engine/scenario.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace kvconf::engine {

namespace {

// engine/scenarios.json's rows, generated into scenario_table.inc at configure time (engine/CMakeLists.txt).
#define KVCONF_SCENARIO(id, name, side_a, side_b, option, in_profile, before_event, bitwise, prefill) \
  ScenarioInfo{Scenario::id, name, side_a, side_b, option, in_profile, before_event, bitwise, prefill},
constexpr ScenarioInfo kScenarios[] = {
#include "scenario_table.inc"
};
#undef KVCONF_SCENARIO

// The enum is the JSON's list in its order: a scenario added to one and not the other does not compile.
constexpr bool enum_matches_table() {
  for (std::size_t i = 0; i < std::size(kScenarios); ++i)
    if (static_cast<std::size_t>(kScenarios[i].id) != i) return false;
  return std::size(kScenarios) == static_cast<std::size_t>(Scenario::kv_dtype) + 1;
}
static_assert(enum_matches_table(), "engine/scenarios.json and enum class Scenario list different scenarios");

}  // namespace

const ScenarioInfo& scenario_info(Scenario s) { return kScenarios[static_cast<std::size_t>(s)]; }

const char* scenario_name(Scenario s) { return scenario_info(s).name; }

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<Scenario> v = [] {
    std::vector<Scenario> all;
    for (const ScenarioInfo& x : kScenarios) all.push_back(x.id);
    return all;
  }();
  return v;
}

std::optional<Scenario> parse_scenario(std::string_view s) {
  for (const ScenarioInfo& x : kScenarios)
    if (s == x.name) return x.id;
  return std::nullopt;
}

std::string scenario_names_text() {
  std::string text;
  for (std::size_t i = 0; i < std::size(kScenarios); ++i)
    text += (i == 0 ? "" : i + 1 == std::size(kScenarios) ? " or " : ", ") + std::string(kScenarios[i].name);
  return text;
}

std::vector<std::pair<std::size_t, std::size_t>> ScenarioHooks::chunks(std::size_t n, std::size_t chunk) const {
  std::vector<std::pair<std::size_t, std::size_t>> v;
  for (std::size_t b = 0; b < n; b += chunk) v.emplace_back(b, std::min(n, b + chunk));
  return v;
}

void ScenarioHooks::store_kv(KvCache& cache, std::size_t r0, std::size_t r1, Format storage, KvFormat f) const {
  QuantCheck unused;
  for (auto* side : {&cache.k, &cache.v})
    for (auto& layer : *side) quantize_rows(f, layer, cache.kv_dim, r0, r1, storage, false, unused);
}

const ScenarioHooks& plain_scenario() {
  static const ScenarioHooks h;
  return h;
}

namespace {

// One side's generation: the forward calls go through call(), which records what the forward saw.
class Side {
 public:
  Side(Context& ctx, const GenerateOptions& o) : ctx_(&ctx), o_(o) {}

  template <class F>
  const std::vector<float>& call(F&& f) {
    logits_ = f(*ctx_);
    r_.calls.push_back({ctx_->trace().rows, ctx_->trace().pos0, ctx_->trace().batch_rows});
    return logits_;
  }
  // Step t's token from the last call's logits.
  int choose(std::size_t t) {
    const int tok = sample(o_.sampler, logits_, step_draw(o_.sampler.seed, t));
    r_.gen.tokens.push_back(tok);
    if (o_.keep_logits) r_.gen.logits.push_back(logits_);
    r_.call_of_step.push_back(r_.calls.size() - 1);
    if (o_.hook) o_.hook(t, logits_, tok);
    return tok;
  }
  void switch_to(Context& c) { ctx_ = &c; }
  Context& ctx() { return *ctx_; }
  // The cache-OFF side keeps its first recompute's cache (the prompt's rows) and the call that computed it.
  void keep_recompute_cache() {
    r_.cache = ctx_->last_recompute_cache();
    r_.cache_calls = {r_.calls.back()};
  }
  // The result; unless kept above, with the cache of the context the side ended in and every call.
  ScenarioResult take() {
    if (r_.cache_calls.empty()) {
      r_.cache = ctx_->cache();
      r_.cache_calls = r_.calls;
    }
    return std::move(r_);
  }

 private:
  Context* ctx_;
  const GenerateOptions& o_;
  std::vector<float> logits_;
  ScenarioResult r_;
};

std::size_t shared_prefix(std::span<const int> a, std::span<const int> b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

void check_options(std::span<const int> prompt, Scenario s, const ScenarioOptions& so, const GenerateOptions& o) {
  if (prompt.empty()) throw std::invalid_argument("kvconf::engine::run_scenario: the prompt is empty");
  if (s == Scenario::chunked && so.chunk == 0) throw std::invalid_argument("scenario chunked: chunk = 0");
  if ((s == Scenario::refill || s == Scenario::restore) && (so.at_step == 0 || so.at_step + 1 >= o.steps))
    throw std::invalid_argument("scenario " + std::string(scenario_name(s)) +
                                ": at_step = " + std::to_string(so.at_step) +
                                ", expected 1 .. steps − 2 = " + std::to_string(o.steps < 2 ? 0 : o.steps - 2));
  if (s == Scenario::kv_dtype && per_channel(so.kv_format))  // quantizes groups of rows, not a call's rows
    throw std::invalid_argument("scenario kv_dtype: kv_format = " + std::string(kv_format_name(so.kv_format)) +
                                ", expected " + kv_format_names_text());
  if (s == Scenario::preempt && (so.at_step == 0 || so.at_step >= o.steps))  // the recompute is step at_step's call
    throw std::invalid_argument("scenario preempt: at_step = " + std::to_string(so.at_step) +
                                ", expected 1 .. steps − 1 = " + std::to_string(o.steps < 1 ? 0 : o.steps - 1));
  if (s == Scenario::prefix) {
    const std::size_t common = shared_prefix(prompt, so.donor);
    if (so.shared > common)
      throw std::invalid_argument("scenario prefix: shared = " + std::to_string(so.shared) +
                                  " but the prompt and the donor share " + std::to_string(common) + " tokens");
    if (common == 0) throw std::invalid_argument("scenario prefix: the donor shares no first token with the prompt");
  }
  if (s == Scenario::batch) {
    if (so.batch_with.empty()) throw std::invalid_argument("scenario batch: no other sequence to batch with");
    for (std::size_t i = 0; i < so.batch_with.size(); ++i)
      if (so.batch_with[i].empty())
        throw std::invalid_argument("scenario batch: batch_with[" + std::to_string(i) + "] is an empty prompt");
  }
}

// Side A of the batch scenario: the prompt and so.batch_with prefilled in one call, then every sequence decodes one
// token per call; the others sample with their own draws (seed + 1 + i) and go on past their EOS.
ScenarioResult run_batch(Context& ctx, std::span<const int> prompt, const ScenarioOptions& so, const GenerateOptions& o,
                         const ScenarioHooks& h) {
  ctx.reset();
  std::vector<Context> others(so.batch_with.size(), ctx);
  std::vector<Context*> all = {&ctx};
  for (Context& c : others) all.push_back(&c);
  std::vector<std::vector<int>> feed = {std::vector<int>(prompt.begin(), prompt.end())};
  for (const auto& p : so.batch_with) feed.push_back(p);
  Side side(ctx, o);
  std::vector<std::vector<float>> logits;
  const auto step = [&](Context&) {
    logits = Context::forward_batch(all, feed, &h);
    return logits.front();
  };
  side.call(step);
  for (std::size_t t = 0; t < o.steps; ++t) {
    if (t > 0) side.call(step);
    const int tok = side.choose(t);
    if (o.stop_at_eos && tok == ctx.model().config.eos_token_id) break;
    feed.front() = {tok};
    for (std::size_t i = 1; i < all.size(); ++i)
      feed[i] = {sample(o.sampler, logits[i], step_draw(o.sampler.seed + i, t))};
  }
  return side.take();
}

}  // namespace

std::size_t prefix_shared(std::span<const int> prompt, const ScenarioOptions& so) {
  const std::size_t n = so.shared != 0 ? so.shared : shared_prefix(prompt, so.donor);
  return prompt.empty() ? 0 : std::min(n, prompt.size() - 1);
}

ScenarioResult run_scenario(Context& ctx, std::span<const int> prompt, Scenario s, const ScenarioOptions& so,
                            const GenerateOptions& o, const ScenarioHooks* hooks) {
  check_options(prompt, s, so, o);
  const ScenarioHooks& h = hooks ? *hooks : plain_scenario();
  if (s == Scenario::batch) return run_batch(ctx, prompt, so, o, h);
  std::vector<int> seq(prompt.begin(), prompt.end());
  ctx.reset();
  Side side(ctx, o);
  std::optional<Context> restored;  // restore: the copy generation continues in
  // The prompt.
  // kv_dtype: every call's new rows go into the cache through the format's round trip, after the call.
  std::size_t stored = 0;
  const auto store = [&] {
    if (s != Scenario::kv_dtype) return;
    const std::size_t n = side.ctx().n_cached();
    side.ctx().rewrite_cache(
        [&](KvCache& c) { h.store_kv(c, stored, n, ctx.kernels().profile.storage, so.kv_format); });
    stored = n;
  };
  if (s == Scenario::cache || s == Scenario::refill || s == Scenario::restore || s == Scenario::preempt ||
      s == Scenario::kv_dtype) {
    side.call([&](Context& c) { return c.prefill(seq, o.forward); });
    store();
  } else if (s == Scenario::chunked) {
    for (const auto& [b, e] : h.chunks(seq.size(), so.chunk))
      side.call([&](Context& c) { return c.prefill(std::span<const int>(seq).subspan(b, e - b), o.forward); });
  } else {  // prefix: another request prefilled the donor prompt; this one takes its first rows
    const std::size_t shared = prefix_shared(prompt, so);
    Context donor(ctx);
    donor.reset();
    (void)donor.prefill(so.donor, o.forward);
    ctx.adopt_prefix(donor.cache(), h.prefix_rows(shared));
    side.call([&](Context& c) { return c.prefill(std::span<const int>(seq).subspan(shared), o.forward); });
  }
  for (std::size_t t = 0; t < o.steps; ++t) {
    if (t > 0 && t == so.at_step && s == Scenario::preempt) {
      // Preempted: the cache was dropped; this step's call recomputes the prompt and every token chosen so far, the
      // newest included, over an empty cache, chooses the step's token from its last row and keeps the cache it built
      // (vLLM's recompute preemption: no separate decode of the newest token).
      side.ctx().reset();
      side.call([&](Context& c) { return c.prefill(seq, o.forward); });
      side.ctx().rewrite_cache([&](KvCache& c) { h.after_preempt(c, ctx.model().storage); });
    } else if (t > 0) {
      side.call([&](Context& c) { return c.decode(seq.back(), o.forward); });
      store();
    }
    const int tok = side.choose(t);
    if (o.stop_at_eos && tok == ctx.model().config.eos_token_id) break;
    seq.push_back(tok);
    if (t + 1 == so.at_step && s == Scenario::refill) {
      // Preempted: the cache is dropped; everything so far but the newest token is prefilled again, and the next
      // step decodes the newest token over it, as a recomputed request resumes.
      side.ctx().reset();
      side.call([&](Context& c) { return c.prefill(std::span<const int>(seq).first(seq.size() - 1), o.forward); });
      side.ctx().rewrite_cache([&](KvCache& c) { h.after_refill(c, ctx.model().storage); });
    }
    if (t + 1 == so.at_step && s == Scenario::restore) {
      restored.emplace(side.ctx());  // the cache saved and restored into a new context
      restored->rewrite_cache([&](KvCache& c) { h.after_restore(c, ctx.model().storage); });
      side.switch_to(*restored);
    }
  }
  return side.take();
}

ScenarioResult run_reference(Context& ctx, std::span<const int> prompt, Scenario s, const GenerateOptions& o) {
  if (prompt.empty()) throw std::invalid_argument("kvconf::engine::run_reference: the prompt is empty");
  std::vector<int> seq(prompt.begin(), prompt.end());
  ctx.reset();
  Side side(ctx, o);
  for (std::size_t t = 0; t < o.steps; ++t) {
    if (s == Scenario::cache) {
      side.call([&](Context& c) { return c.recompute(seq, o.forward); });
      if (t == 0) side.keep_recompute_cache();
    } else if (t == 0)
      side.call([&](Context& c) { return c.prefill(seq, o.forward); });
    else
      side.call([&](Context& c) { return c.decode(seq.back(), o.forward); });
    const int tok = side.choose(t);
    if (o.stop_at_eos && tok == ctx.model().config.eos_token_id) break;
    seq.push_back(tok);
  }
  return side.take();
}

}  // namespace kvconf::engine
