// Scenarios (docs/SCENARIOS.md): two executions of the same sequence that must compute the same function. Side A runs
// the scenario, side B the plain execution it must agree with:
//   cache    A: cache-ON (prefill, then decode)                     B: cache-OFF (a recompute at every step)
//   prefix   A: the prompt's first `shared` rows taken from another request's cache, the rest prefilled over them
//                                                                   B: cache-ON, the prompt computed fresh
//   chunked  A: the prompt prefilled in chunks of `chunk` tokens    B: cache-ON, the prompt in one prefill
//   refill   A: after step `at_step` the cache is dropped and rebuilt by one prefill of everything so far (a preempted
//               request recomputed)                                 B: cache-ON, uninterrupted
//   restore  A: after step `at_step` the context is copied (its cache saved and restored) and generation goes on in
//               the copy                                            B: cache-ON, uninterrupted
//   batch    A: the sequence prefilled and decoded inside a batch of others (Context::forward_batch: the GEMMs see
//               M = every sequence's rows, attention a variable-length batch)
//                                                                   B: cache-ON, alone
//   preempt  A: at step `at_step` the cache has been dropped and the step's call recomputes the prompt and every
//               token chosen so far over an empty cache, choosing the step's token from its last row (vLLM's
//               recompute preemption); later steps decode over the cache it built
//                                                                   B: cache-ON, uninterrupted
//   kv_dtype A: the cache kept in a narrower format than the model computes in (`kv_format`: fp8, q8_0, ...; vLLM's
//               kv_cache_dtype, llama.cpp's --cache-type): the rows each call writes are stored through the format's
//               round trip after the call (its own logits see them exact)
//                                                                   B: cache-ON, in the model's own format
// Both sides sample with the same per-step draws (generate.hpp). Each records, per forward call, how many tokens it fed
// and over how many cached rows (from the context's trace, as the forward saw them), so a check can prove which path
// ran. The scenario driver's variation points are ScenarioHooks; the planted scenario faults (engine/faults/) are
// hooks, as the forward pass's are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvconf/engine/call_record.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/generate.hpp"
#include "kvconf/engine/kv_format.hpp"

namespace kvconf::engine {

// In the order of engine/scenarios.json, the one list of the scenarios (scenario.cpp checks the two agree at compile
// time; the adapters and the trace reader read the JSON).
enum class Scenario : std::uint8_t { cache, prefix, batch, chunked, refill, restore, preempt, kv_dtype };
const char* scenario_name(Scenario s);                       // "cache", "prefix", ...
std::optional<Scenario> parse_scenario(std::string_view s);  // nullopt for an unknown name
const std::vector<Scenario>& all_scenarios();                // in the order above
std::string scenario_names_text();                           // "cache, prefix, ..., preempt or kv_dtype"

// What engine/scenarios.json says of a scenario: its sides' names in a trace, its option, which bitwise rules apply.
struct ScenarioInfo {
  Scenario id;
  const char* name;
  const char* side_a;          // side A's name in a trace: "cache_on" (its path), else "scenario" (scenario.side)
  const char* side_b;          // "cache_off", else "reference"
  const char* option;          // the scenario.* option a trace must give: "shared", "chunk", "at_step"; "" for none
  bool option_in_profile;      // a folder may hold several values of it: the profile names it ("chunked4")
  bool bitwise_before_event;   // the steps before at_step agree bit for bit (scenario_shared_steps_bitwise)
  bool bitwise;                // every step agrees bit for bit, for every engine (scenario_bitwise)
  bool prefill_bitwise;        // the first logits agree bit for bit (prefill_logits_bitwise)
};
const ScenarioInfo& scenario_info(Scenario s);

struct ScenarioOptions {
  std::size_t chunk = 4;    // chunked: tokens per prefill chunk (the last chunk takes the rest)
  std::size_t at_step = 3;  // refill, restore: the event happens after this step's token is chosen (>= 1);
                            // preempt: this step's call is the recompute (1 .. steps − 1)
  // prefix: the other request's prompt; the first `shared` tokens of both prompts must be equal (0: the whole common
  // prefix of the two prompts, at most the prompt's length − 1).
  std::vector<int> donor;
  std::size_t shared = 0;
  // batch: the other sequences' prompts, prefilled in the same call as the prompt and decoded with it, one token each
  // per call (each samples with its own draws: seed + 1 + i); at least one.
  std::vector<std::vector<int>> batch_with;
  // kv_dtype: the format side A's cache is kept in (parse_kv_format's names).
  KvFormat kv_format = KvFormat::q8_0;
};

// The rows the prefix scenario takes from the donor: so.shared, or (0) the prompt's and the donor's common prefix, at
// most the prompt's length − 1 (one token is always prefilled).
std::size_t prefix_shared(std::span<const int> prompt, const ScenarioOptions& so);

struct ScenarioResult {
  GenerateResult gen;                     // tokens, and logits when the options keep them
  std::vector<CallRecord> calls;          // every forward call of this side, in order
  std::vector<std::size_t> call_of_step;  // index into calls of the call whose logits step t used
  // The side's KV cache (the cached_kv rule) and the calls that computed its rows: side A's at its end (restore: the
  // copy's) with every call; side B's at its end, but for the cache scenario the recompute of step 0 (the prompt's
  // rows, computed by the same call as side A's prefill) with that one call.
  KvCache cache;
  std::vector<CallRecord> cache_calls;
};

// The scenario driver's variation points. The defaults are the scenario done right; each planted scenario fault
// (kvconf/engine/scenario_faults.hpp) overrides one.
// batch: BatchAttention::run, how one sequence's attention runs inside the batch.
class ScenarioHooks : public BatchAttention {
 public:
  // prefix: how many of the donor's rows the request takes when `shared` are shared (the driver then prefills the
  // prompt from token `shared` on, trusting the count).
  virtual std::size_t prefix_rows(std::size_t shared) const { return shared; }
  // chunked: the [begin, end) token ranges the prompt of n tokens is prefilled in.
  virtual std::vector<std::pair<std::size_t, std::size_t>> chunks(std::size_t n, std::size_t chunk) const;
  // refill: called on the cache (values of `storage`) right after the refill prefill rebuilt it.
  virtual void after_refill(KvCache& cache, Format storage) const { (void)cache, (void)storage; }
  // restore: called on the restored copy's cache.
  virtual void after_restore(KvCache& cache, Format storage) const { (void)cache, (void)storage; }
  // preempt: called on the cache right after the preempted request's recompute built it (its logits already taken).
  virtual void after_preempt(KvCache& cache, Format storage) const { (void)cache, (void)storage; }
  // kv_dtype: stores rows [r0, r1) of every layer's K and V (values of `storage`, just written by a call) in format
  // f: the round trip of engine/kv_format.hpp.
  virtual void store_kv(KvCache& cache, std::size_t r0, std::size_t r1, Format storage, KvFormat f) const;
};
const ScenarioHooks& plain_scenario();  // the defaults

// Side A of scenario s on `ctx` (reset first), free-running for o.steps steps; `hooks` may be null (plain_scenario).
// Throws std::invalid_argument for options the scenario cannot use (a chunk of 0, at_step 0 or past the steps, a
// donor sharing no token with the prompt) and for an unavailable scenario.
ScenarioResult run_scenario(Context& ctx, std::span<const int> prompt, Scenario s, const ScenarioOptions& so,
                            const GenerateOptions& o, const ScenarioHooks* hooks = nullptr);
// Side B: the plain execution scenario s is compared with (cache: cache-OFF; every other: cache-ON).
ScenarioResult run_reference(Context& ctx, std::span<const int> prompt, Scenario s, const GenerateOptions& o);

}  // namespace kvconf::engine
