// CacheStoreConformance's rules (model_cases.hpp): cache growth while rows are held, and the cache store adding
// nothing to the values the forward computed (a biased or re-rounding store changes some of them).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "checks_common.hpp"
#include "kvconf/conformance/model_cases.hpp"
#include "kvconf/engine/sampling.hpp"

namespace kvconf::conformance {
namespace {

// The engine's greedy choice (engine::sample under the default Sampler: arg-max, lowest index on ties).
int greedy(const std::vector<float>& logits) { return engine::sample(engine::Sampler{}, logits, 0.0); }

// Elements of rows [0, rows) of every layer's K and V whose bits differ between a and b (first one in `where`).
std::size_t differing_rows(const engine::KvCache& a, const engine::KvCache& b, std::size_t rows, std::string& where) {
  std::size_t n = 0;
  for (std::size_t l = 0; l < a.k.size(); ++l)
    for (int side = 0; side < 2; ++side) {
      const auto& x = side ? a.v[l] : a.k[l];
      const auto& y = side ? b.v[l] : b.k[l];
      for (std::size_t i = 0; i < rows * a.kv_dim; ++i)
        if (std::bit_cast<std::uint32_t>(x[i]) != std::bit_cast<std::uint32_t>(y[i]) && n++ == 0)
          where = std::string(side ? "V" : "K") + " layer " + std::to_string(l) + " row " +
                  std::to_string(i / a.kv_dim) + ": " + detail::num(x[i]) + " vs " + detail::num(y[i]);
    }
  return n;
}

}  // namespace

CheckResults check_cache_growth(const engine::Model& m, const engine::ProfileKernels& k, const std::vector<int>& prompt,
                                std::size_t steps, std::uint64_t seed) {
  engine::Context growing(m, k, engine::ContextOptions{2});
  engine::Context fixed(m, k, engine::ContextOptions{prompt.size() + steps + 1});
  // The first 2 prompt tokens prefilled, the rest of the prompt and then `steps` greedy tokens decoded one by one:
  // the growing cache doubles at 4, 8, 16, ... rows while holding them.
  const std::size_t head = std::min<std::size_t>(2, prompt.size());
  const std::span<const int> first_rows(prompt.data(), head);
  std::vector<float> lg = growing.prefill(first_rows), lf = fixed.prefill(first_rows);
  std::size_t growths = 0, capacity = growing.cache().capacity, bad_steps = 0, bad_elements = 0;
  std::string first;
  const std::size_t total = prompt.size() - head + steps;
  for (std::size_t step = 0;; ++step) {
    std::string where;
    const std::size_t rows = differing_rows(growing.cache(), fixed.cache(), fixed.n_cached(), where);
    const bool same_logits = lg == lf;
    if (rows > 0 || !same_logits) {
      ++bad_steps;
      bad_elements += rows;
      if (first.empty())
        first = " first at step " + std::to_string(step) + " (capacity " + std::to_string(growing.cache().capacity) +
                " vs " + std::to_string(fixed.cache().capacity) + "):" + (same_logits ? "" : " logits differ;") + " " +
                std::to_string(rows) + " cache elements differ" + (rows ? ", " + where : "");
    }
    if (step == total) break;
    const std::size_t pos = head + step;
    const int next = pos < prompt.size() ? prompt[pos] : greedy(lf);
    lg = growing.decode(next);
    lf = fixed.decode(next);
    if (growing.cache().capacity != capacity) ++growths;
    capacity = growing.cache().capacity;
  }
  CheckResults r;
  r.push_back(detail::bitwise_result(
      "cache_growth_bitwise", bad_steps ? static_cast<double>(bad_elements + 1) : 0.0, seed,
      "cache from 2 rows (2 prompt tokens prefilled, the rest decoded), grown " + std::to_string(growths) +
          " times while holding rows, vs one of " + std::to_string(prompt.size() + steps + 1) +
          " rows: " + std::to_string(bad_steps) + " of " + std::to_string(total + 1) + " calls differ" + first));
  // A run that never grew after the prefill checks nothing about growth while rows are held.
  r.push_back(detail::bound_result("cache_growth_exercised", growths >= 2 ? 0.0 : 1.0, 0.5, seed,
                                   std::to_string(growths) + " growths after the first call (at least 2 needed)"));
  return r;
}

CheckResults check_cache_store(engine::Context& ctx, const std::vector<int>& prompt, std::size_t steps,
                               std::uint64_t seed, CacheStoreCounts* counts) {
  ctx.reset();
  std::vector<int> seq = prompt;
  std::vector<float> logits = ctx.prefill(seq);
  engine::ForwardOptions o;
  o.capture_layers = true;
  CacheStoreCounts c;
  std::size_t altered = 0;
  std::string first;
  for (std::size_t s = 0; s < steps; ++s) {
    seq.push_back(greedy(logits));
    logits = ctx.decode(seq.back(), o);
    // The row this step wrote, in every layer, against the K (after RoPE) and V the forward computed for it.
    const engine::KvCache& cache = ctx.cache();
    const std::size_t row = seq.size() - 1;
    for (std::size_t l = 0; l < cache.k.size(); ++l)
      for (int side = 0; side < 2; ++side) {
        const auto& stored = side ? cache.v[l] : cache.k[l];
        const auto& computed = side ? ctx.trace().layers[l].v : ctx.trace().layers[l].k_rope;
        for (std::size_t i = 0; i < cache.kv_dim; ++i) {
          ++c.stored;
          const float a = stored[row * cache.kv_dim + i], b = computed[i];
          if (std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b)) continue;
          if (altered++ == 0)
            first = "; first at step " + std::to_string(s) + " " + (side ? "V" : "K") + " layer " + std::to_string(l) +
                    " element " + std::to_string(i) + ": stored " + detail::num(a) + ", computed " + detail::num(b);
          if (std::fabs(a) < std::fabs(b)) ++c.stored_smaller_magnitude;
        }
      }
  }
  // Measured, not gated: the decode rows of layer 0 against cache-OFF's (both project the same inputs, so each
  // difference is one rounding difference of its own): how many differ, and which way.
  ctx.recompute(seq);
  const engine::KvCache& on = ctx.cache();
  const engine::KvCache& off = ctx.last_recompute_cache();
  for (int side = 0; side < 2; ++side) {
    const auto& a = side ? on.v[0] : on.k[0];
    const auto& b = side ? off.v[0] : off.k[0];
    for (std::size_t i = prompt.size() * on.kv_dim; i < seq.size() * on.kv_dim; ++i) {
      ++c.compared;
      if (a[i] == b[i]) continue;
      ++c.differing;
      if (a[i] > b[i]) ++c.on_greater;
      if (std::fabs(a[i]) < std::fabs(b[i])) ++c.on_smaller_magnitude;
    }
  }
  c.altered = altered;
  if (counts) *counts = c;
  CheckResults r;
  r.push_back(detail::bitwise_result(
      "cache_store_exact", altered ? static_cast<double>(altered) : 0.0, seed,
      std::to_string(altered) + " of " + std::to_string(c.stored) + " K/V elements written by " +
          std::to_string(steps) + " decode steps differ from the values the forward computed (" +
          std::to_string(c.stored_smaller_magnitude) + " of them smaller in magnitude)" + first +
          "; layer 0 vs cache-OFF: " + std::to_string(c.differing) + " of " + std::to_string(c.compared) +
          " differ, cache-ON greater in " + std::to_string(c.on_greater) + ", smaller in magnitude in " +
          std::to_string(c.on_smaller_magnitude)));
  if (c.stored == 0) r.push_back(detail::bound_result("cache_store_compared", 1.0, 0.5, seed, "no decode row written"));
  return r;
}

}  // namespace kvconf::conformance
