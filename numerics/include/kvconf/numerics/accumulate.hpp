// Accumulation-order primitives: dot products and sums evaluated in an explicit order with explicit
// input, accumulator and output formats, every rounding done by the correctly rounded ops of arith.hpp.
// The error bounds for each order live in reference/bounds.hpp (derivations: docs/TOLERANCES.md).
#pragma once

#include <cstddef>
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
// divide n). Each block is a sequential chain started from zero; the block results are then added
// sequentially in acc: S = B_0, S = add(S, B_1), ...  b >= n is the sequential order.
struct Blocked {
  std::size_t b = 32;
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

using Order = std::variant<Sequential, Pairwise, Blocked, SplitK, TensorCore>;

// Short stable name of an order for reports and case ids: "seq", "pairwise", "blocked32",
// "splitk4_acc", "splitk4_out", "splitk4_acc_tc16n2", "tc16n2" (k = 16, neab = 2), "tc16n2_rne", ...
std::string order_name(const Order& order);

// x·y = Σ_i x_i·y_i in the given order. Throws std::invalid_argument when x and y differ in length,
// b < 1, s < 1, the tensor-core parameters/formats are unsupported, or an input is not a value of spec.in.
// n = 0 gives 0. Overflow follows spec.round (±inf, or ±max with saturate); the bounds assume none.
// NaN or infinite inputs are not rejected: they propagate by IEEE rules (a NaN input gives a NaN result).
double dot(const AccumSpec& spec, const Order& order, std::span<const double> x, std::span<const double> y);

// Σ_i x_i in the given order (the tensor-core order evaluates Σ x_i·1).
double sum(const AccumSpec& spec, const Order& order, std::span<const double> x);

}  // namespace kvconf
