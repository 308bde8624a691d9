// How the attention checks lay out their inputs and calls (the problem's cache, a re-allocated cache, the calls of a
// chunk or a decode row, the batched launches, the capacities tried), each with the properties it promises;
// tests/conformance/attention_layout_test.cpp checks every one over sizes and seeds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/kernels/kernel.hpp"

namespace kvconf::conformance::detail {

// One attention problem: q for the call's rows, and a KV cache of cap() rows.
struct Problem {
  kernels::AttentionCall call;
  std::vector<float> q;  // (n_q, H, d)
  std::vector<float> k;  // (cap, Hkv, d)
  std::vector<float> v;  // (cap, Hkv, d_v)
};

// The problem of `call` drawn per `data` from `seed`. Promises: the shapes above; every value finite and of format
// `in`; rows [0, n_kv) and q depend on the seed, shapes and data only, not on the capacity (the same case at any
// capacity holds the same filled rows); rows [n_kv, cap) finite values of the same distribution from their own
// streams, so a kernel that reads them computes something else. Adversarial kinds shape the logits through q and k
// (V stays N(0,1) for them); wide-range q and k are scaled by 2^-4 so that q·k stays far from fp16 overflow (eager
// kernels round q·k to fp16).
Problem make_problem(Format in, const kernels::AttentionCall& call, Data data, std::uint64_t seed);

// The cache `cache` ((rows, row) floats) re-allocated with `cap` rows, cap >= n_kv. Promises: cap·row floats; rows
// [0, n_kv) bit for bit those of `cache`; rows [n_kv, cap) all `fill` when it is given (NaN poisons them); without
// it, `cache`'s own rows where it has them and beyond them copies of the filled rows (row r is filled row
// (r − n_kv) mod n_kv), so every row is finite when `cache` is.
std::vector<float> recap(const std::vector<float>& cache, std::size_t row, std::size_t n_kv, std::size_t cap,
                         std::optional<float> fill);

// The call for the query rows [r0, r1) of `full` (a chunk, or the decode row r1 − 1), r0 < r1 <= n_q. Promises:
// n_q = r1 − r0 rows at q_offset = full's + r0; causal: n_kv = q_offset + n_q (the cache filled so far: its last row's
// position + 1, full's n_kv for the last row); non-causal: full's n_kv; capacity full.cap(); heads, dims, window,
// scale and softcap as full's. Chunks [0, c), [c, 2c), ... of any size c tile full's rows once, in order.
kernels::AttentionCall sub_call(const kernels::AttentionCall& full, std::size_t r0, std::size_t r1);

// A batched decode step of `size` sequences in launch order: the case's decode row `alone` among size − 1 other
// sequences, each with its own data (`others[i]`, empty at the case's place).
struct BatchLaunch {
  std::vector<kernels::AttentionCall> calls;
  std::vector<std::optional<Problem>> others;
  std::size_t target = 0;  // the case's place in the launch
  std::size_t min_kv = 0, max_kv = 0;
};

// The launches' sizes: a small step and a large one.
inline constexpr std::array<std::size_t, 2> kBatchSizes = {4, 64};

// The calls of a batched step (no data yet). Promises: `size` calls; the target at size / 2, `alone` with batch =
// size; every other call one decode row (n_q 1) at its own last position (causal: q_offset = n_kv − 1; non-causal:
// 0) over n_kv in [1, 2·alone's n_kv], no spare capacity, alone's heads, dims and params, batch = size; min_kv and
// max_kv the launch's extremes. For alone's n_kv >= 2 a launch of 64 holds sequences shorter and longer than the
// target; a launch of 4 does for n_kv >= 6 (at n_kv 2, 4 and 5 none is longer).
BatchLaunch batch_calls(const kernels::AttentionCall& alone, std::size_t size);

// The capacity the unused-slot rule poisons: at least the case's own, and a whole spare tile of 64 rows after the
// tile that holds row n_kv − 1 (cap − n_kv >= 64, a multiple of 64 unless the case's own capacity is larger).
std::size_t unused_slots_capacity(const kernels::AttentionCall& call);

// The capacities the capacity rule compares with the reference capacity n_kv: one spare row, a tile-rounded cache
// with a spare tile, about twice the cache, and the case's own capacity. Promises: sorted, distinct, each > n_kv,
// n_kv + 1 first, the case's own capacity among them when it has spare rows.
std::vector<std::size_t> capacity_variants(const kernels::AttentionCall& call);

}  // namespace kvconf::conformance::detail
