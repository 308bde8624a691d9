// Accumulation-order primitives (accumulate.hpp): every rounding goes through round_to()/add()/mul()/fma()
// of arith.hpp, never through native float arithmetic on an emulated format.
#include "kvconf/numerics/accumulate.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/numerics/arith.hpp"

namespace kvconf {
namespace {

// The terms of a dot product (y non-empty) or of a sum (y empty).
struct Terms {
  const AccumSpec& spec;
  std::span<const double> x;
  std::span<const double> y;
  bool dot_terms;  // false: a plain sum of x
  bool is_dot() const { return dot_terms; }

  double leaf(std::size_t i) const {
    return is_dot() ? mul(spec.acc, x[i], y[i], spec.round) : round_to(spec.acc, x[i], spec.round);
  }
  // s + term i, one step of a sequential chain.
  double step(double s, std::size_t i) const {
    if (is_dot() && spec.fma) return fma(spec.acc, x[i], y[i], s, spec.round);
    return add(spec.acc, s, leaf(i), spec.round);
  }
  double chain(std::size_t lo, std::size_t hi) const {
    if (lo >= hi) return 0.0;
    double s = leaf(lo);
    for (std::size_t i = lo + 1; i < hi; ++i) s = step(s, i);
    return s;
  }
  double pairwise(std::size_t lo, std::size_t hi) const {
    if (lo >= hi) return 0.0;
    std::vector<double> level;
    level.reserve((hi - lo + 1) / 2);
    for (std::size_t i = lo; i < hi; i += 2) {
      if (i + 1 < hi) {
        level.push_back(step(leaf(i), i + 1));  // fma: fl(x_{i+1}·y_{i+1} + leaf(i)); else add(leaf(i), leaf(i+1))
      } else {
        level.push_back(leaf(i));  // carried up unchanged
      }
    }
    while (level.size() > 1) {
      std::size_t w = 0;
      for (std::size_t i = 0; i < level.size(); i += 2)
        level[w++] = (i + 1 < level.size()) ? add(spec.acc, level[i], level[i + 1], spec.round) : level[i];
      level.resize(w);
    }
    return level[0];
  }
  double tensor_core(const TensorCoreParams& p, std::size_t lo, std::size_t hi) const {
    if (lo >= hi) return 0.0;
    if (is_dot()) return tensor_core_dot(p, spec.in, spec.acc, x.subspan(lo, hi - lo), y.subspan(lo, hi - lo));
    const std::vector<double> ones(hi - lo, 1.0);
    return tensor_core_dot(p, spec.in, spec.acc, x.subspan(lo, hi - lo), ones);
  }
};

bool is_pow2(std::size_t v) { return v != 0 && (v & (v - 1)) == 0; }

void check_thread_strided(const ThreadStrided& o) {
  const std::size_t T = o.threads;
  if (o.vec < 1 || o.interleave < 1)
    throw std::invalid_argument("kvconf::dot/sum: ThreadStrided vec and interleave must be >= 1");
  const bool ok = o.tree == ThreadTree::warp_first ? (T >= 1 && ((T <= 32 && is_pow2(T)) || (T % 32 == 0 && T <= 1024)))
                                                   : (is_pow2(T) && T <= 1024);
  if (!ok)
    throw std::invalid_argument("kvconf::dot/sum: ThreadStrided thread count " + std::to_string(T) +
                                " is not allowed (warp_first: a power of two below 32 or a multiple of 32 up to "
                                "1024; block_first: a power of two up to 1024)");
}

// v[0..s) reduced by a halving tree (lane 0 of a shfl_xor butterfly with offsets s/2 .. 1); s a power of two.
double halving(std::vector<double>& v, std::size_t s, Format f, RoundOptions r) {
  for (std::size_t o = s / 2; o >= 1; o /= 2)
    for (std::size_t l = 0; l < o; ++l) v[l] = add(f, v[l], v[l + o], r);
  return v[0];
}

double thread_strided(const Terms& t, const ThreadStrided& o, std::size_t n) {
  const AccumSpec& spec = t.spec;
  const std::size_t T = o.threads, V = o.vec, I = o.interleave;
  const std::size_t lanes = o.split_lanes ? V : 1;
  const std::size_t A = I * lanes;
  const Format C = o.combine.value_or(spec.acc);
  const std::size_t G = (n + V - 1) / V;
  std::vector<double> thread(T, 0.0), acc(A);
  std::vector<char> started(A);
  for (std::size_t th = 0; th < T; ++th) {
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(started.begin(), started.end(), 0);
    std::size_t visit = 0;
    for (std::size_t g = th; g < G; g += T, ++visit) {
      const std::size_t slot = visit % I;
      for (std::size_t l = 0; l < V && g * V + l < n; ++l) {
        const std::size_t i = g * V + l;
        const std::size_t a = slot * lanes + (o.split_lanes ? l : 0);
        acc[a] = started[a] ? t.step(acc[a], i) : t.leaf(i);
        started[a] = 1;
      }
    }
    double r = round_to(C, acc[0], spec.round);
    for (std::size_t a = 1; a < A; ++a) r = add(C, r, round_to(C, acc[a], spec.round), spec.round);
    thread[th] = r;
  }
  if (o.tree == ThreadTree::warp_first) {
    const std::size_t W = std::min<std::size_t>(32, T);
    std::vector<double> warps(32, 0.0), lane(W);
    for (std::size_t w = 0; w < T / W; ++w) {
      std::copy(thread.begin() + static_cast<std::ptrdiff_t>(w * W),
                thread.begin() + static_cast<std::ptrdiff_t>((w + 1) * W), lane.begin());
      warps[w] = halving(lane, W, C, spec.round);
    }
    if (T <= 32) return warps[0];
    return halving(warps, 32, C, spec.round);  // T/32 warp sums padded with +0 to 32 lanes
  }
  std::size_t s = T;
  for (; s > 32; s /= 2)
    for (std::size_t l = 0; l < s / 2; ++l) thread[l] = add(C, thread[l], thread[l + s / 2], spec.round);
  for (std::size_t w = 1; w < s; w *= 2)
    for (std::size_t l = 0; l + w < s; l += 2 * w) thread[l] = add(C, thread[l], thread[l + w], spec.round);
  return thread[0];
}

void check_tc_formats(const AccumSpec& spec) {
  if (spec.acc != Format::fp32 && spec.acc != Format::fp16)
    throw std::invalid_argument("kvconf::dot: the tensor-core order needs acc = fp32 or fp16, got " +
                                std::string(name(spec.acc)));
}

double evaluate(const AccumSpec& spec, const Order& order, std::span<const double> x, std::span<const double> y,
                bool is_dot) {
  if (spec.in == Format::fp64)
    throw std::invalid_argument(
        "kvconf::dot/sum: input format fp64 is not supported (products must be exact in double)");
  const auto check = [&](std::span<const double> v, const char* which) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!representable(spec.in, v[i]))
        throw std::invalid_argument("kvconf::dot/sum: " + std::string(which) + "[" + std::to_string(i) +
                                    "] = " + std::to_string(v[i]) + " is not a value of " + std::string(name(spec.in)));
  };
  check(x, "x");
  if (is_dot) check(y, "y");
  if (std::holds_alternative<AnyOrder>(order))
    throw std::invalid_argument(
        "kvconf::dot/sum: AnyOrder describes a black-box kernel for the bounds; an unknown "
        "order cannot be evaluated");
  const Terms t{spec, x, y, is_dot};
  const std::size_t n = x.size();
  const auto finish = [&](double s) { return round_to(spec.out, s, spec.round); };

  if (std::holds_alternative<Sequential>(order)) return finish(t.chain(0, n));
  if (std::holds_alternative<Pairwise>(order)) return finish(t.pairwise(0, n));
  if (const auto* o = std::get_if<Blocked>(&order)) {
    if (o->b < 1) throw std::invalid_argument("kvconf::dot/sum: Blocked block size b must be >= 1, got 0");
    if (n == 0) return finish(0.0);
    const auto block = [&](std::size_t lo) {
      const std::size_t hi = std::min(lo + o->b, n);
      return o->tree_inside ? t.pairwise(lo, hi) : t.chain(lo, hi);
    };
    double s = block(0);
    for (std::size_t lo = o->b; lo < n; lo += o->b) s = add(spec.acc, s, block(lo), spec.round);
    return finish(s);
  }
  if (const auto* o = std::get_if<SplitK>(&order)) {
    if (o->s < 1) throw std::invalid_argument("kvconf::dot/sum: SplitK slice count s must be >= 1, got 0");
    if (o->tensor_core) check_tc_formats(spec);
    if (n == 0) return finish(0.0);
    const std::size_t L = (n + o->s - 1) / o->s;
    const auto slice = [&](std::size_t lo) {
      const std::size_t hi = std::min(lo + L, n);
      return o->tensor_core ? t.tensor_core(*o->tensor_core, lo, hi) : t.chain(lo, hi);
    };
    if (o->combine == SplitKCombine::accumulator) {
      double s = slice(0);
      for (std::size_t lo = L; lo < n; lo += L) s = add(spec.acc, s, slice(lo), spec.round);
      return finish(s);
    }
    double s = round_to(spec.out, slice(0), spec.round);
    for (std::size_t lo = L; lo < n; lo += L)
      s = add(spec.out, s, round_to(spec.out, slice(lo), spec.round), spec.round);
    return s;
  }
  if (const auto* o = std::get_if<ThreadStrided>(&order)) {
    check_thread_strided(*o);
    return finish(thread_strided(t, *o, n));
  }
  const auto& tc = std::get<TensorCore>(order);
  check_tc_formats(spec);
  return finish(t.tensor_core(tc.params, 0, n));
}

std::string tc_suffix(const TensorCoreParams& p) {
  std::string s = "tc";
  s += std::to_string(p.k);
  s += "n";
  s += std::to_string(p.neab);
  if (p.rounding) {
    switch (*p.rounding) {
      case Rounding::nearest_even:
        s += "_rne";
        break;
      case Rounding::toward_zero:
        s += "_rz";
        break;
      case Rounding::up:
        s += "_ru";
        break;
      case Rounding::down:
        s += "_rd";
        break;
      case Rounding::to_odd:
        s += "_ro";
        break;
    }
  }
  return s;
}

}  // namespace

std::string order_name(const Order& order) {
  if (std::holds_alternative<Sequential>(order)) return "seq";
  if (const auto* o = std::get_if<AnyOrder>(&order))
    return o->operand_roundings == 0 ? "any" : "any_op" + std::to_string(o->operand_roundings);
  if (std::holds_alternative<Pairwise>(order)) return "pairwise";
  if (const auto* o = std::get_if<Blocked>(&order)) {
    std::string s = "blocked";
    s += std::to_string(o->b);
    if (o->tree_inside) s += "_tree";
    return s;
  }
  if (const auto* o = std::get_if<SplitK>(&order)) {
    std::string s = "splitk";
    s += std::to_string(o->s);
    s += o->combine == SplitKCombine::accumulator ? "_acc" : "_out";
    if (o->tensor_core) {
      s += '_';
      s += tc_suffix(*o->tensor_core);
    }
    return s;
  }
  if (const auto* o = std::get_if<ThreadStrided>(&order)) {
    std::string s = "ts";
    s += std::to_string(o->threads);
    s += 'v';
    s += std::to_string(o->vec);
    if (o->split_lanes) s += 'l';
    if (o->interleave > 1) {
      s += 'i';
      s += std::to_string(o->interleave);
    }
    if (o->combine) {
      s += "_c";
      s += name(*o->combine);
    }
    if (o->tree == ThreadTree::block_first) s += "_bf";
    return s;
  }
  return tc_suffix(std::get<TensorCore>(order).params);
}

double dot(const AccumSpec& spec, const Order& order, std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size())
    throw std::invalid_argument("kvconf::dot: x and y differ in length (" + std::to_string(x.size()) + " vs " +
                                std::to_string(y.size()) + ")");
  return evaluate(spec, order, x, y, true);
}

double sum(const AccumSpec& spec, const Order& order, std::span<const double> x) {
  return evaluate(spec, order, x, std::span<const double>{}, false);
}

}  // namespace kvconf
