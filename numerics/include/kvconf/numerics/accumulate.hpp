// Accumulation-order primitives: dot products and sums evaluated in an explicit order with explicit
// input, accumulator and output formats, every rounding done by the correctly rounded ops of arith.hpp.
// The error bounds for each order live in reference/bounds.hpp (derivations: docs/TOLERANCES.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include "kvconf/numerics/rounding.hpp"
#include "kvconf/numerics/tensor_core.hpp"

namespace kvconf {

// Formats and rounding of one accumulation.
struct AccumSpec {
  Format in = Format::fp16;   // the inputs x_i, y_i are values of this format (checked)
  Format acc = Format::fp32;  // every intermediate product / sum is rounded to this format
  Format out = Format::fp32;  // the result is rounded to this format at the end
  // Dot products: true = each step is acc ← fl(x_i·y_i + acc), one rounding (FFMA/HFMA);
  // false = acc ← fl(acc + fl(x_i·y_i)), product rounded to acc first (FMUL + FADD). Sums ignore it.
  bool fma = true;
  RoundOptions round{};  // mode / ftz / saturate of every intermediate rounding and of the final one
};

// --- Orders -------------------------------------------------------------------------------------
// In every order a "leaf" is the first value a term contributes: fl_acc(x_i·y_i) for a dot product,
// fl_acc(x_i) for a sum (exact when in ⊆ acc). "Add" is fl_acc(a + b). A "sequential chain" over
// [lo, hi) is s = leaf(lo), then for i = lo+1 .. hi−1: s = fl_acc(x_i·y_i + s) (fma) or
// s = add(s, leaf(i)) (no fma / sums). An empty range is 0.

// One sequential chain over [0, n).
struct Sequential {};

// Level-wise adjacent pairing (cascade/tree summation). Level 1 combines terms (0,1), (2,3), (4,5), ...:
// pair (2j, 2j+1) is fl_acc(x_{2j+1}·y_{2j+1} + leaf(2j)) with fma, add(leaf(2j), leaf(2j+1)) without.
// Each later level adds adjacent partial results (0,1), (2,3), ... of the level below. An element
// left without a partner at the end of a level is carried up unchanged. Depth: ceil(log2 n) levels.
struct Pairwise {};

// Blocks of b consecutive terms [0,b), [b,2b), ... (the last one holds n mod b terms when b does not
// divide n). Each block is a sequential chain (or, with tree_inside, the Pairwise tree of its own terms);
// the block results are then added sequentially in acc: S = B_0, S = add(S, B_1), ...
// b >= n is the sequential order (the pairwise order with tree_inside).
// tree_inside models a row reduction done in fixed chunks with a tree per chunk (vLLM / Thinking Machines
// batch-invariant RMSNorm: `sum_sq += tl.sum(chunk)` over 1024-element chunks; notes/kernels.md §7 R2).
struct Blocked {
  std::size_t b = 32;
  bool tree_inside = false;
};

enum class SplitKCombine {
  accumulator,               // partials (in acc) added sequentially in acc, then rounded to out
  slices_rounded_to_output,  // each partial rounded to out, then added sequentially in out (each add rounded to out)
};

// Split-K: the n terms are cut into slices of L = ceil(n/s) consecutive terms, slice j = [jL, min((j+1)L, n))
// (so only the last non-empty slice can be shorter, and when s does not divide n some trailing slices may
// be empty: e.g. n = 10, s = 4 gives L = 3 and slices of 3, 3, 3, 1; n = 9, s = 4 gives 3, 3, 3, 0).
// Empty slices are skipped. Each slice is a sequential chain (or, with tensor_core set, a chain of
// tensor-core block FMAs in acc started from c = 0); the partials are combined in slice order.
// Split-K with SplitKCombine::accumulator equals Blocked{ceil(n/s)} when the slices are sequential.
struct SplitK {
  std::size_t s = 4;
  SplitKCombine combine = SplitKCombine::accumulator;
  std::optional<TensorCoreParams> tensor_core;

  SplitK() = default;
  SplitK(std::size_t slices, SplitKCombine how = SplitKCombine::accumulator,
         std::optional<TensorCoreParams> tc = std::nullopt)
      : s(slices), combine(how), tensor_core(tc) {}
};

// Tensor-core block FMAs chained through c (tensor_core.hpp): blocks [0,k), [k,2k), ..., c starting at 0,
// each block result in acc (fp32: RZ, fp16: RNE unless params.rounding says otherwise); the final value is
// rounded to out with spec.round. spec.fma is ignored; spec.round applies only to that final rounding.
// Requires acc ∈ {fp32, fp16} and in ∈ {fp16, bf16, fp8}.
struct TensorCore {
  TensorCoreParams params = TensorCoreParams::h100();
};

// GPU block reduction of one dot product / sum by T threads (notes/kernels.md §7 G3, R1).
//
// Groups: the n terms are cut into G = ceil(n/vec) groups of vec consecutive terms, group g = [g·vec,
// min((g+1)·vec, n)) (only the last group can be shorter). Thread t (0 <= t < T) visits the groups
// g = t, t+T, t+2T, ... in that order; its j-th visit (j = 0, 1, ...) goes to accumulator slot
// j mod interleave. Accumulators: without split_lanes one per slot, which takes the visit's terms in
// index order; with split_lanes `vec` per slot, lane l of every group (term g·vec + l) going to accumulator
// (slot, l). Accumulator a = slot·lanes + l (lanes = vec with split_lanes, else 1) is a sequential chain in
// acc over the terms it takes, in visit order (leaf first, as in every order); an accumulator that takes
// no term is +0.
//
// Thread result: the accumulators, each rounded to the combine format C = combine.value_or(acc) (exact when
// C ⊇ acc), are added sequentially in C: r_t = a_0, r_t = add_C(r_t, a_1), ..., a_{A−1}.
//
// Trees (all additions in C; W = min(32, T); "halving" over v[0..s) means: for o = s/2, s/4, ..., 1:
// v[l] = add_C(v[l], v[l+o]) for l < o, result v[0] — lane 0 of a __shfl_xor butterfly with offsets
// s/2 .. 1; "adjacent" over v[0..s) means: for o = 1, 2, ..., s/2: v[l] = add_C(v[l], v[l+o]) for
// l = 0, 2o, 4o, ..., result v[0] — lane 0 of a __shfl_down tree with offsets 1 .. s/2):
//  - ThreadTree::warp_first (llama.cpp mul_mat_vec_f / cuBLAS-style GEMV, ggml warp_reduce_sum): warp w
//    (threads [wW, (w+1)W)) is reduced by halving over its W values; if T > 32 the T/32 warp results,
//    padded with +0 to 32 values (llama.cpp's zero-initialised shared buffer), are reduced by halving over
//    32. T must be a power of two below 32, or a multiple of 32 up to 1024 (llama.cpp: 32, 64, ..., 256).
//  - ThreadTree::block_first (PyTorch Reduce.cuh block_x_reduce): a shared-memory halving over the T thread
//    results stopped at offset 32 (for o = T/2, ..., 32: v[l] = add_C(v[l], v[l+o]), l < o), then adjacent
//    over the remaining min(T, 32) values. T must be a power of two up to 1024.
// The result is rounded to out. GPU kernels start accumulators at +0 and add the first term to it; that
// equals the leaf except for the sign of a zero, which this model (like the oracle) does not certify.
enum class ThreadTree : std::uint8_t { warp_first, block_first };

struct ThreadStrided {
  std::size_t threads = 32;       // T
  std::size_t vec = 1;            // terms per group (half2: 2, float4 loads: 4)
  bool split_lanes = false;       // lane l of each group to its own accumulator (half2 lanes, float4 lanes)
  std::size_t interleave = 1;     // accumulator slots per thread, successive visits round-robin (PyTorch vt0)
  std::optional<Format> combine;  // format of the per-thread combine and of the trees (default: acc)
  ThreadTree tree = ThreadTree::warp_first;
};

// Any order and blocking (a black-box kernel: libtorch, a plugin): the terms are combined by some binary tree
// of additions in acc, unknown and possibly different from call to call (vector lanes, k-blocks accumulated into
// an acc buffer, threads), each operand possibly rounded `operand_roundings` times in acc before its product
// (PyTorch's math SDPA scales q and k by √τ in fp32). It describes a kernel for the bounds only: a tree of n
// leaves is at most n − 1 additions deep, so every term passes through at most (leaf) + n − 1 roundings of acc,
// the count of the sequential order, whatever the tree (docs/TOLERANCES.md §10). dot() and sum() refuse it: an
// unknown order cannot be replayed. Partials rounded to a narrower format than acc are not covered: a kernel
// that does that must say so with KernelInfo::partial and a SplitK order instead.
struct AnyOrder {
  std::size_t operand_roundings = 0;
};

using Order = std::variant<Sequential, Pairwise, Blocked, SplitK, TensorCore, ThreadStrided, AnyOrder>;

// Short stable name of an order for reports and case ids: "seq", "pairwise", "blocked32",
// "blocked1024_tree", "splitk4_acc", "splitk4_out", "splitk4_acc_tc16n2", "tc16n2" (k = 16, neab = 2),
// "tc16n2_rne", "ts256v2" (256 threads, groups of 2), "ts256v2l_cfp32" (split lanes, combine in fp32),
// "ts512v4l_bf" (block_first tree), "ts64v1i4_bf" (4 interleaved accumulators), "any", "any_op2" (AnyOrder with
// two operand roundings), ...
std::string order_name(const Order& order);

// x·y = Σ_i x_i·y_i in the given order. Throws std::invalid_argument when x and y differ in length,
// b < 1, s < 1, the tensor-core parameters/formats are unsupported, a ThreadStrided thread count / vec /
// interleave is not allowed (see ThreadStrided), the order is AnyOrder (no evaluation), or an input is not a
// value of spec.in.
// n = 0 gives 0. Overflow follows spec.round (±inf, or ±max with saturate); the bounds assume none.
// NaN or infinite inputs are not rejected: they propagate by IEEE rules (a NaN input gives a NaN result).
double dot(const AccumSpec& spec, const Order& order, std::span<const double> x, std::span<const double> y);

// Σ_i x_i in the given order (the tensor-core order evaluates Σ x_i·1).
double sum(const AccumSpec& spec, const Order& order, std::span<const double> x);

}  // namespace kvconf
