// Unit tests of the ThreadStrided and Blocked{tree_inside} orders (numerics/accumulate.hpp): hand-computed
// fp16 cases where one grouping rounds differently from another, equalities with orders that must coincide,
// and bitwise agreement with independent "GPU-literal" emulations of llama.cpp mul_mat_vec_f (fp32 and half2
// accumulators, xor-butterfly warp reduce, zero-padded second stage) and of PyTorch's Reduce.cuh row reduction
// (float4 lanes, shared-memory halving, shfl_down tree), written here from the kernels' structure.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/arith.hpp"
#include "test_support.hpp"

namespace kvconf {
namespace {

using namespace kvconf::test;

ThreadStrided ts(std::size_t T, std::size_t vec = 1, bool lanes = false, std::size_t interleave = 1,
                 std::optional<Format> combine = std::nullopt, ThreadTree tree = ThreadTree::warp_first) {
  ThreadStrided o;
  o.threads = T;
  o.vec = vec;
  o.split_lanes = lanes;
  o.interleave = interleave;
  o.combine = combine;
  o.tree = tree;
  return o;
}

const AccumSpec kH = spec_of(Format::fp16, Format::fp16, Format::fp16);  // fp16 everywhere

// [1, 2^-11, 2^-11, 2^-11], T = 2 (one warp of 2 lanes): thread 0 holds 1 + 2^-11 → 1 (tie to even),
// thread 1 holds 2^-11 + 2^-11 = 2^-10; the butterfly adds 1 + 2^-10 exactly. Sequential gives 1.
TEST(ThreadStrided, ThreadsStrideOverGroups) {
  const std::vector<double> x{1.0, p2(-11), p2(-11), p2(-11)};
  EXPECT_EQ(sum(kH, ts(2), x), 1.0 + p2(-10));
  EXPECT_EQ(sum(kH, Sequential{}, x), 1.0);
  // Groups of 2 over 2 threads: thread 0 takes groups 0, 2 = [1, 2^-11, 0, 0] → 1, thread 1 takes groups
  // 1, 3 = [2^-11, 2^-11, 0, 0] → 2^-10.
  const std::vector<double> x8{1.0, p2(-11), p2(-11), p2(-11), 0.0, 0.0, 0.0, 0.0};
  EXPECT_EQ(sum(kH, ts(2, 2), x8), 1.0 + p2(-10));
  // vec = 4 over one thread is sequential.
  EXPECT_EQ(sum(kH, ts(1, 4), x8), 1.0);
}

// Split half2 lanes: x = [1, 2^-12, 2^-11, 2^-12]: lane 0 takes 1 and 2^-11 → 1 (tie), lane 1 takes
// 2^-12 + 2^-12 = 2^-11. Combined in fp32: 1 + 2^-11 exactly (kept with an fp32 output); combined in
// fp16 (the default combine = acc): a tie again → 1.
TEST(ThreadStrided, SplitLanesAndCombineFormat) {
  const std::vector<double> x{1.0, p2(-12), p2(-11), p2(-12)};
  const AccumSpec h_to_32 = spec_of(Format::fp16, Format::fp16, Format::fp32);
  EXPECT_EQ(sum(h_to_32, ts(1, 2, true, 1, Format::fp32), x), 1.0 + p2(-11));
  EXPECT_EQ(sum(h_to_32, ts(1, 2, true), x), 1.0);
  // Without split lanes the thread's one accumulator runs 1 + 2^-12 + 2^-11 + 2^-12 sequentially in fp16:
  // 1 + 2^-12 → 1, 1 + 2^-11 → 1 (tie), 1 + 2^-12 → 1.
  EXPECT_EQ(sum(h_to_32, ts(1, 2, false, 1, Format::fp32), x), 1.0);
  // The fp16 final rounding of 1 + 2^-11 is a tie to even: 1.
  EXPECT_EQ(sum(kH, ts(1, 2, true, 1, Format::fp32), x), 1.0);
}

// Four interleaved slots (PyTorch vt0 = 4): x = [1, a, a, a, 0, a, 0, 0], a = 2^-11: slot sums 1, 2^-10,
// 2^-11, 2^-11, combined ((1 + 2^-10) + 2^-11) + 2^-11 = (1 + 3·2^-11 → tie → 1 + 2^-9) + 2^-11 → tie → 1 + 2^-9.
// That is the exact sum; sequential loses every a: 1.
TEST(ThreadStrided, InterleavedAccumulatorsCombinedInOrder) {
  const double a = p2(-11);
  const std::vector<double> x{1.0, a, a, a, 0.0, a, 0.0, 0.0};
  EXPECT_EQ(sum(kH, ts(1, 1, false, 4), x), 1.0 + p2(-9));
  EXPECT_EQ(sum(kH, Sequential{}, x), 1.0);
  // Two slots: slot 0 takes 1, a, 0, 0 → 1; slot 1 takes a, a, a, 0 → 2^-10 + 2^-11 (exact); combined
  // 1 + 3·2^-11 → tie → 1 + 2^-9.
  EXPECT_EQ(sum(kH, ts(1, 1, false, 2), x), 1.0 + p2(-9));
}

// Tree shapes over T = 4 single-term threads v = [1, a, 0, a]: the warp butterfly (halving) adds
// (v0 + v2) + (v1 + v3) = 1 + 2^-10; PyTorch's shfl_down tree (adjacent) adds (v0 + v1) + (v2 + v3) =
// 1 + a → 1.
TEST(ThreadStrided, WarpButterflyAndShuffleDownTreesDiffer) {
  const double a = p2(-11);
  const std::vector<double> x{1.0, a, 0.0, a};
  EXPECT_EQ(sum(kH, ts(4), x), 1.0 + p2(-10));
  EXPECT_EQ(sum(kH, ts(4, 1, false, 1, std::nullopt, ThreadTree::block_first), x), 1.0);
}

// T = 64 (two warps), one term per thread: thread 0 holds 1, threads 32 and 48 hold a = 2^-11.
// warp_first: warp 0 → 1, warp 1 → a + a = 2^-10, then 1 + 2^-10 (the 30 zero-padding lanes add +0).
// block_first: the shared-memory step (offset 32) adds thread 32 into thread 0: 1 + a → 1, and thread 48
// into thread 16: a; the shfl_down tree then adds 1 + a → 1.
TEST(ThreadStrided, SecondStageOverWarps) {
  const double a = p2(-11);
  std::vector<double> x(64, 0.0);
  x[0] = 1.0;
  x[32] = a;
  x[48] = a;
  EXPECT_EQ(sum(kH, ts(64), x), 1.0 + p2(-10));
  EXPECT_EQ(sum(kH, ts(64, 1, false, 1, std::nullopt, ThreadTree::block_first), x), 1.0);
  // 96 threads (llama.cpp's 3-warp block): warps {1}, {a}, {a} padded with +0 to 32 lanes: halving pairs
  // warp 0 with warp 2 at offset 2 (1 + a → 1) and then adds warp 1: 1 + a → 1.
  std::vector<double> y(96, 0.0);
  y[0] = 1.0;
  y[32] = a;
  y[64] = a;
  EXPECT_EQ(sum(kH, ts(96), y), 1.0);
  // Moving the second a into warp 1 makes the pair (a + a) first: 1 + 2^-10.
  y[64] = 0.0;
  y[33] = a;
  EXPECT_EQ(sum(kH, ts(96), y), 1.0 + p2(-10));
}

TEST(ThreadStrided, NamesAndValidation) {
  EXPECT_EQ(order_name(ts(256, 2)), "ts256v2");
  EXPECT_EQ(order_name(ts(256, 2, true, 1, Format::fp32)), "ts256v2l_cfp32");
  EXPECT_EQ(order_name(ts(512, 4, true, 1, std::nullopt, ThreadTree::block_first)), "ts512v4l_bf");
  EXPECT_EQ(order_name(ts(64, 1, false, 4, std::nullopt, ThreadTree::block_first)), "ts64v1i4_bf");
  EXPECT_EQ(order_name(Blocked{1024, true}), "blocked1024_tree");
  const std::vector<double> x{1.0, 2.0};
  EXPECT_THROW(sum(kH, ts(48), x), std::invalid_argument);  // neither a power of two below 32 nor a multiple of 32
  EXPECT_THROW(sum(kH, ts(2048), x), std::invalid_argument);
  EXPECT_NO_THROW(sum(kH, ts(96), x));
  EXPECT_THROW(sum(kH, ts(96, 1, false, 1, std::nullopt, ThreadTree::block_first), x), std::invalid_argument);
  EXPECT_THROW(sum(kH, ts(32, 0), x), std::invalid_argument);
  EXPECT_THROW(sum(kH, ts(32, 1, false, 0), x), std::invalid_argument);
  const std::vector<double> none;
  EXPECT_EQ(dot(kH, ts(64, 2, true, 1, Format::fp32), none, none), 0.0);
}

// Random values of format f, none zero (so the sign of a zero, which the model leaves open, never matters).
std::vector<double> nonzero_values(Format f, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) {
    do x = round_to(f, g(rng));
    while (x == 0.0);
  }
  return v;
}

TEST(ThreadStrided, CoincidesWithOtherOrders) {
  for (std::size_t n : {1u, 5u, 32u, 100u, 256u}) {
    const auto x = nonzero_values(Format::fp16, n, 10 + n);
    const auto y = nonzero_values(Format::fp16, n, 20 + n);
    for (const AccumSpec& s : {kH, spec_of(Format::fp16, Format::fp32, Format::fp16)}) {
      const double seq = dot(s, Sequential{}, x, y);
      EXPECT_EQ(dot(s, ts(1), x, y), seq) << n;     // one thread is one chain
      EXPECT_EQ(dot(s, ts(1, n), x, y), seq) << n;  // one group is one chain
      EXPECT_EQ(dot(s, Blocked{n, true}, x, y), dot(s, Pairwise{}, x, y)) << n;
      EXPECT_EQ(dot(s, Blocked{n + 3, true}, x, y), dot(s, Pairwise{}, x, y)) << n;
      // Sums: one term per thread and a power-of-two count up to 32: the shfl_down tree is Pairwise.
      if (n == 32) {
        EXPECT_EQ(sum(s, ts(32, 1, false, 1, std::nullopt, ThreadTree::block_first), x), sum(s, Pairwise{}, x));
      }
      EXPECT_EQ(sum(s, Blocked{1, true}, x), sum(s, Sequential{}, x)) << n;
    }
  }
}

// Blocked{b, tree_inside}: each block is Pairwise over its own terms, blocks added sequentially.
TEST(ThreadStrided, BlockedTreeInsideIsPairwisePerBlock) {
  const auto x = nonzero_values(Format::fp16, 2500, 3);
  const AccumSpec s = spec_of(Format::fp16, Format::fp32, Format::fp32, false);
  const std::span<const double> xs(x);
  double acc = sum(s, Pairwise{}, xs.subspan(0, 1024));
  acc = add(Format::fp32, acc, sum(s, Pairwise{}, xs.subspan(1024, 1024)));
  acc = add(Format::fp32, acc, sum(s, Pairwise{}, xs.subspan(2048)));
  EXPECT_EQ(sum(s, Blocked{1024, true}, x), acc);
  EXPECT_EQ(dot(s, Blocked{1024, true}, x, x), [&] {
    std::vector<double> sq(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) sq[i] = x[i] * x[i];  // exact fp16 squares (fp32 values)
    AccumSpec s32 = s;
    s32.in = Format::fp32;
    return sum(s32, Blocked{1024, true}, sq);
  }());
}

// ---------------------------------------------------------------------------------------------------
// Independent GPU-literal emulations.

// ggml warp_reduce_sum: every lane l adds lane l ^ o for o = 16, 8, 4, 2, 1 (all lanes computed).
void xor_butterfly(std::vector<double>& lanes, Format f) {
  for (std::size_t o = lanes.size() / 2; o > 0; o /= 2) {
    std::vector<double> next(lanes.size());
    for (std::size_t l = 0; l < lanes.size(); ++l) next[l] = add(f, lanes[l], lanes[l ^ o]);
    lanes = next;
  }
}

// llama.cpp mul_mat_vec_f for one output row (block_size T, ncols2 = K/2 half2 pairs): fp32 sums
// `sumf += x.x*y.x; sumf += x.y*y.y` (FFMA), or half2 `sumh2 += x*y` (HFMA2 per lane) then
// sumf = low + high in fp32; warp_reduce_sum; for T > 32 the warp sums go to a 32-float buffer zeroed
// first, and warp 0 reduces it again.
double llama_mmvf(const std::vector<double>& x, const std::vector<double>& y, std::size_t T, bool half2) {
  const std::size_t ncols2 = x.size() / 2;
  std::vector<double> sumf(T, 0.0);
  for (std::size_t tid = 0; tid < T; ++tid) {
    if (half2) {
      double lo = 0.0, hi = 0.0;
      for (std::size_t c = tid; c < ncols2; c += T) {
        lo = fma(Format::fp16, x[2 * c], y[2 * c], lo);
        hi = fma(Format::fp16, x[2 * c + 1], y[2 * c + 1], hi);
      }
      sumf[tid] = add(Format::fp32, lo, hi);
    } else {
      double s = 0.0;
      for (std::size_t c = tid; c < ncols2; c += T) {
        s = fma(Format::fp32, x[2 * c], y[2 * c], s);
        s = fma(Format::fp32, x[2 * c + 1], y[2 * c + 1], s);
      }
      sumf[tid] = s;
    }
  }
  std::vector<double> buf(32, 0.0);
  for (std::size_t w = 0; w * 32 < T; ++w) {
    std::vector<double> lanes(sumf.begin() + static_cast<std::ptrdiff_t>(w * 32),
                              sumf.begin() + static_cast<std::ptrdiff_t>(std::min(T, (w + 1) * 32)));
    xor_butterfly(lanes, Format::fp32);
    buf[w] = lanes[0];
  }
  if (T <= 32) return buf[0];
  xor_butterfly(buf, Format::fp32);
  return buf[0];
}

TEST(ThreadStrided, MatchesLiteralLlamaCppGemv) {
  int checked = 0;
  for (std::size_t K : {64u, 100u, 640u, 4096u}) {
    for (std::size_t T : {32u, 64u, 96u, 256u}) {
      for (std::uint64_t seed = 0; seed < 3; ++seed) {
        const auto x = nonzero_values(Format::fp16, K, 100 * K + T + seed);
        const auto y = nonzero_values(Format::fp16, K, 7 * K + T + seed + 1);
        const AccumSpec s32 = spec_of(Format::fp16, Format::fp32, Format::fp32);
        EXPECT_EQ(dot(s32, ts(T, 2), x, y), llama_mmvf(x, y, T, false)) << "fp32 K=" << K << " T=" << T;
        const AccumSpec s16 = spec_of(Format::fp16, Format::fp16, Format::fp32);
        EXPECT_EQ(dot(s16, ts(T, 2, true, 1, Format::fp32), x, y), llama_mmvf(x, y, T, true))
            << "half2 K=" << K << " T=" << T;
        checked += 2;
      }
    }
  }
  EXPECT_EQ(checked, 96);
}

// PyTorch Reduce.cuh for one row of a contiguous fp32 tensor (sum; mean multiplies afterwards), block of
// T threads in x: vectorised input (float4, lane i into value_list[i]) or vt0 = 4 interleaved visits;
// value_list combined in order; block_x_reduce: shared-memory halving while offset >= 32, then
// `value += shfl_down(value, offset)` for offset = 1, 2, ..., 16 (an out-of-range source lane returns its
// own value, as __shfl_down_sync does), all lanes computed.
double pytorch_row_sum(const std::vector<double>& v, std::size_t T, bool vectorized) {
  const std::size_t end = v.size();
  std::vector<double> value(T, 0.0);
  for (std::size_t tx = 0; tx < T; ++tx) {
    double list[4] = {0.0, 0.0, 0.0, 0.0};
    if (vectorized) {
      for (std::size_t idx = tx; idx * 4 + 3 < end; idx += T)
        for (std::size_t i = 0; i < 4; ++i) list[i] = add(Format::fp32, list[i], v[idx * 4 + i]);
    } else {
      std::size_t idx = tx;
      for (; idx + 3 * T < end; idx += 4 * T)
        for (std::size_t i = 0; i < 4; ++i) list[i] = add(Format::fp32, list[i], v[idx + i * T]);
      for (std::size_t i = 0; i < 4 && idx < end; ++i, idx += T) list[i] = add(Format::fp32, list[i], v[idx]);
    }
    double s = list[0];
    for (std::size_t i = 1; i < 4; ++i) s = add(Format::fp32, s, list[i]);
    value[tx] = s;
  }
  std::size_t dim_x = T;
  if (dim_x > 32) {
    for (std::size_t offset = dim_x / 2; offset >= 32; offset /= 2)
      for (std::size_t t = 0; t < offset; ++t) value[t] = add(Format::fp32, value[t], value[t + offset]);
    dim_x = 32;
  }
  for (std::size_t offset = 1; offset < dim_x; offset *= 2) {
    std::vector<double> next(dim_x);
    for (std::size_t l = 0; l < dim_x; ++l)
      next[l] = add(Format::fp32, value[l], l + offset < dim_x ? value[l + offset] : value[l]);
    std::copy(next.begin(), next.end(), value.begin());
  }
  return value[0];
}

TEST(ThreadStrided, MatchesLiteralPyTorchRowReduction) {
  int checked = 0;
  for (std::size_t d : {64u, 128u, 2304u, 4096u}) {
    for (std::size_t T : {32u, 64u, 128u, 512u}) {
      const auto x = nonzero_values(Format::fp16, d, 31 * d + T);
      std::vector<double> sq(d);
      for (std::size_t i = 0; i < d; ++i) sq[i] = x[i] * x[i];  // fp16 squares: exact fp32 values
      const AccumSpec s = spec_of(Format::fp16, Format::fp32, Format::fp32, false);
      const ThreadStrided vec4 = ts(T, 4, true, 1, std::nullopt, ThreadTree::block_first);
      const ThreadStrided vt4 = ts(T, 1, false, 4, std::nullopt, ThreadTree::block_first);
      EXPECT_EQ(dot(s, vec4, x, x), pytorch_row_sum(sq, T, true)) << "float4 d=" << d << " T=" << T;
      EXPECT_EQ(dot(s, vt4, x, x), pytorch_row_sum(sq, T, false)) << "vt0=4 d=" << d << " T=" << T;
      checked += 2;
    }
  }
  EXPECT_EQ(checked, 32);
}

}  // namespace
}  // namespace kvconf
