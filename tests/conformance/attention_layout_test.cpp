// The attention checks' layouts keep the promises attention_layout.hpp states, over shapes, capacities, data, formats
// and seeds: the problem's cache (filled rows independent of the capacity, spare rows finite and different), the
// re-allocated cache, the calls of chunks (a tiling of the rows), the batched launches (lengths around the target's),
// and the capacities the unused-slot and capacity rules try.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attention_layout.hpp"
#include "kvconf/conformance/cases.hpp"
#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::conformance::detail {
namespace {

using kernels::AttentionCall;

// Every case of every set: the calls the checks lay out.
std::vector<AttentionCall> table_calls() {
  std::vector<AttentionCall> v;
  for (const auto& c : attention_cases()) v.push_back(c.call);
  for (const auto& c : quick_attention_cases()) v.push_back(c.call);
  return v;
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

AttentionCall small(std::size_t n_q, std::size_t n_kv, bool causal, std::size_t capacity) {
  AttentionCall c;
  c.shape = {n_q, n_kv, 4, 2, 8, 6};
  c.params.q_offset = causal ? static_cast<std::int64_t>(n_kv - n_q) : 0;
  c.params.causal = causal;
  c.params.scale = 0.125;
  c.capacity = capacity;
  return c;
}

TEST(AttentionLayout, AProblemHasItsShapesFormatAndCapacityIndependentRows) {
  const Data kinds[] = {Data::normal, Data::same_sign, Data::wide_range, Data::near_exp_overflow, Data::p_flush};
  for (Format f : {Format::fp16, Format::bf16, Format::fp32})
    for (Data data : kinds)
      for (std::uint64_t seed : {1u, 77u})
        for (std::size_t cap : {0u, 13u, 40u}) {
          const AttentionCall call = small(3, 13, true, cap), tight = small(3, 13, true, 0);
          const Problem p = make_problem(f, call, data, seed), t = make_problem(f, tight, data, seed);
          const auto& s = call.shape;
          ASSERT_EQ(p.q.size(), s.n_q * s.n_heads * s.d);
          ASSERT_EQ(p.k.size(), call.cap() * s.n_kv_heads * s.d);
          ASSERT_EQ(p.v.size(), call.cap() * s.n_kv_heads * s.d_v);
          for (const auto* x : {&p.q, &p.k, &p.v})
            for (float y : *x) ASSERT_TRUE(std::isfinite(y) && kernels::round_float(f, y) == y) << y;
          EXPECT_TRUE(same_bits(p.q.data(), t.q.data(), p.q.size()));  // the filled rows: not the capacity's
          EXPECT_TRUE(same_bits(p.k.data(), t.k.data(), t.k.size()));
          EXPECT_TRUE(same_bits(p.v.data(), t.v.data(), t.v.size()));
          const std::size_t krow = s.n_kv_heads * s.d;
          for (std::size_t r = s.n_kv; r < call.cap(); ++r)  // a spare row is not a copy of a filled one
            for (std::size_t j = 0; j < s.n_kv; ++j)
              EXPECT_FALSE(same_bits(&p.k[r * krow], &p.k[j * krow], krow)) << "spare row " << r << " = row " << j;
          const Problem again = make_problem(f, call, data, seed), other = make_problem(f, call, data, seed + 1);
          EXPECT_TRUE(same_bits(again.k.data(), p.k.data(), p.k.size()));
          EXPECT_FALSE(same_bits(other.k.data(), p.k.data(), p.k.size()));
        }
}

TEST(AttentionLayout, ARecappedCacheKeepsItsRowsAndFillsTheRest) {
  const std::size_t row = 3;
  for (std::size_t n_kv : {1u, 5u, 16u})
    for (std::size_t have : {n_kv, n_kv + 2})
      for (std::size_t cap : {n_kv, n_kv + 1, n_kv + 7, 3 * n_kv + 5}) {
        std::vector<float> cache(have * row);
        for (std::size_t i = 0; i < cache.size(); ++i) cache[i] = static_cast<float>(i) + 0.5f;
        const auto nan = recap(cache, row, n_kv, cap, std::numeric_limits<float>::quiet_NaN());
        const auto copy = recap(cache, row, n_kv, cap, std::nullopt);
        ASSERT_EQ(nan.size(), cap * row);
        ASSERT_EQ(copy.size(), cap * row);
        EXPECT_TRUE(same_bits(nan.data(), cache.data(), n_kv * row) &&
                    same_bits(copy.data(), cache.data(), n_kv * row));
        for (std::size_t r = n_kv; r < cap; ++r) {
          const std::size_t from = r < have ? r : (r - n_kv) % n_kv;
          for (std::size_t c = 0; c < row; ++c) {
            EXPECT_TRUE(std::isnan(nan[r * row + c]));
            EXPECT_EQ(copy[r * row + c], cache[from * row + c]) << "row " << r;
          }
        }
      }
}

TEST(AttentionLayout, ChunkCallsTileTheRowsOverTheCacheFilledSoFar) {
  std::vector<AttentionCall> calls = table_calls();
  for (std::size_t n_q : {1u, 3u, 17u})
    for (bool causal : {true, false}) calls.push_back(small(n_q, 40, causal, 64));
  for (const auto& full : calls)
    for (std::size_t chunk : {1u, 4u, 16u, 1000u}) {
      std::size_t next = 0;
      for (std::size_t r0 = 0; r0 < full.shape.n_q; r0 += chunk) {
        const std::size_t r1 = std::min(full.shape.n_q, r0 + chunk);
        const AttentionCall c = sub_call(full, r0, r1);
        ASSERT_EQ(r0, next);
        next = r1;
        EXPECT_EQ(c.shape.n_q, r1 - r0);
        EXPECT_EQ(c.params.q_offset, full.params.q_offset + static_cast<std::int64_t>(r0));
        const std::size_t want =
            full.params.causal ? static_cast<std::size_t>(c.params.q_offset) + c.shape.n_q : full.shape.n_kv;
        EXPECT_EQ(c.shape.n_kv, want);
        EXPECT_LE(c.shape.n_kv, full.shape.n_kv);
        if (r1 == full.shape.n_q) {  // the last row sees the whole cache
          EXPECT_EQ(c.shape.n_kv, full.shape.n_kv);
        }
        EXPECT_EQ(c.cap(), full.cap());
        EXPECT_TRUE(c.shape.n_heads == full.shape.n_heads && c.shape.n_kv_heads == full.shape.n_kv_heads &&
                    c.shape.d == full.shape.d && c.shape.d_v == full.shape.d_v);
        EXPECT_TRUE(c.params.window == full.params.window && c.params.scale == full.params.scale &&
                    c.params.softcap == full.params.softcap && c.params.causal == full.params.causal);
      }
      EXPECT_EQ(next, full.shape.n_q);  // every row once, in order
    }
}

TEST(AttentionLayout, ABatchedLaunchSurroundsTheTargetWithOtherLengths) {
  for (bool causal : {true, false})
    for (std::size_t n_kv = 1; n_kv <= 4096; n_kv += n_kv < 300 ? 1 : 97) {
      const AttentionCall alone = small(1, n_kv, causal, 0);  // a decode row
      for (std::size_t size : kBatchSizes) {
        const BatchLaunch b = batch_calls(alone, size);
        ASSERT_EQ(b.calls.size(), size);
        ASSERT_EQ(b.target, size / 2);
        const AttentionCall& t = b.calls[b.target];
        EXPECT_TRUE(t.shape.n_kv == alone.shape.n_kv && t.params.q_offset == alone.params.q_offset &&
                    t.capacity == alone.capacity && t.batch == size);
        std::size_t lo = t.shape.n_kv, hi = t.shape.n_kv;
        bool shorter = false, longer = false;
        for (std::size_t i = 0; i < size; ++i) {
          const AttentionCall& c = b.calls[i];
          EXPECT_EQ(c.batch, size);
          EXPECT_TRUE(c.shape.n_heads == alone.shape.n_heads && c.shape.d == alone.shape.d &&
                      c.params.window == alone.params.window && c.params.scale == alone.params.scale);
          if (i == b.target) continue;
          EXPECT_EQ(c.shape.n_q, 1u);
          EXPECT_TRUE(c.shape.n_kv >= 1 && c.shape.n_kv <= 2 * alone.shape.n_kv) << c.shape.n_kv;
          EXPECT_EQ(c.params.q_offset, causal ? static_cast<std::int64_t>(c.shape.n_kv) - 1 : 0);
          EXPECT_EQ(c.cap(), c.shape.n_kv);
          lo = std::min(lo, c.shape.n_kv);
          hi = std::max(hi, c.shape.n_kv);
          shorter = shorter || c.shape.n_kv < alone.shape.n_kv;
          longer = longer || c.shape.n_kv > alone.shape.n_kv;
        }
        EXPECT_TRUE(b.min_kv == lo && b.max_kv == hi);
        const std::size_t n = alone.shape.n_kv;
        const bool promised = size == 64 ? n >= 2 : n >= 6;
        if (promised) {
          EXPECT_TRUE(shorter && longer) << "n_kv " << n << ", a launch of " << size;
        }
        if (size == 4 && (n == 2 || n == 4 || n == 5)) {  // as stated
          EXPECT_FALSE(longer) << "n_kv " << n;
        }
      }
    }
}

TEST(AttentionLayout, TheRulesCapacitiesHaveSpareRowsAndTiles) {
  std::vector<AttentionCall> calls = table_calls();
  for (std::size_t n_kv : {1u, 63u, 64u, 65u, 1000u})
    for (std::size_t cap : {std::size_t{0}, n_kv, n_kv + 1, n_kv + 500}) calls.push_back(small(1, n_kv, true, cap));
  for (const auto& call : calls) {
    const std::size_t n_kv = call.shape.n_kv, u = unused_slots_capacity(call);
    EXPECT_GE(u, call.cap());
    EXPECT_GE(u - n_kv, 64u) << "no whole spare tile";
    if (u > call.cap()) {
      EXPECT_EQ(u % 64, 0u);
    }
    const auto caps = capacity_variants(call);
    ASSERT_FALSE(caps.empty());
    EXPECT_EQ(caps.front(), n_kv + 1);
    EXPECT_TRUE(std::is_sorted(caps.begin(), caps.end()) && std::adjacent_find(caps.begin(), caps.end()) == caps.end());
    EXPECT_GT(caps.front(), n_kv);
    if (call.cap() > n_kv) {
      EXPECT_NE(std::find(caps.begin(), caps.end(), call.cap()), caps.end());
    }
  }
}

}  // namespace
}  // namespace kvconf::conformance::detail
