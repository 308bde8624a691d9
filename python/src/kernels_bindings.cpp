// Registry kernels whose run() calls Python: kvconf._core.AttentionKernel, GemmKernel and NormKernel wrap a runner
// (python/kvconf/_kernel.py builds it around the user's callable: dtype, device, checks of what it returns) and are
// described to the bounds as black boxes (kernels/black_box.hpp, docs/TOLERANCES.md §10), exactly as a plugin's
// kernel table describes its kernels. Inputs cross as float32 torch tensors viewing kvconf's buffers (no copy); the
// runner's float32 CPU result is read in place and copied once into the check's output.
#include "kernels_bindings.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <stdexcept>

#include "kvconf/kernels/black_box.hpp"

namespace kvconf::python {
namespace {

using kernels::AttentionCall;
using kernels::Reason;

using Flat = nb::ndarray<nb::pytorch, const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Result = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;

nb::object view(std::span<const float> s) {
  const std::size_t n = s.size();
  return nb::cast(Flat(s.data(), {n}, nb::handle()));
}

// The runner's result into `out`: a float32 CPU contiguous array of out.size() values (the runner checked the shape
// and dtype the user's callable returned; this is the last line of defence, never reached by the wrapper).
void take(const std::string& name, nb::handle r, std::span<float> out) {
  Result a;
  if (!nb::try_cast(r, a))
    throw std::invalid_argument("kernel " + name + ": the runner returned something other than a float32 CPU tensor");
  if (a.size() != out.size())
    throw std::invalid_argument("kernel " + name + ": the runner returned " + std::to_string(a.size()) +
                                " values, expected " + std::to_string(out.size()));
  std::copy(a.data(), a.data() + a.size(), out.begin());
}

// The Python supports(call) -> None | str, when given.
template <class Call>
Reason ask(const nb::object& supports, const Call& call) {
  if (!supports.is_valid() || supports.is_none()) return std::nullopt;
  nb::object r = supports(call);
  if (r.is_none()) return std::nullopt;
  return nb::cast<std::string>(nb::str(r));
}

kernels::KernelInfo info_of(const KernelSpec& s) {
  kernels::KernelInfo i;
  i.name = "python." + s.name + "." + kernels::format_suffix(s.format);
  i.backend = "python";
  i.in = s.format;
  i.acc = s.declared.acc;
  i.out = s.format;
  i.partial = s.declared.partial();
  i.cache_invariant = s.cache_invariant;
  i.deterministic = s.deterministic;
  i.mirrors = s.mirrors.empty() ? "Python callable" : s.mirrors;
  return i;
}

KernelSpec spec_of(const std::string& name, const std::string& format, nb::object runner, nb::object supports,
                   bool cache_invariant, bool deterministic, const std::string& mirrors, const std::string& acc = "f32",
                   const std::string& pv_acc = "") {
  if (name.empty()) throw std::invalid_argument("name='': expected a non-empty kernel name");
  KernelSpec s;
  s.name = name;
  s.format = format_arg(format, "format");
  s.declared.acc = format_arg(acc, "accumulate");
  s.declared.pv = pv_acc.empty() ? s.declared.acc : format_arg(pv_acc, "pv_accumulate");
  for (const auto& [f, arg] : {std::pair{s.declared.acc, "accumulate"}, std::pair{s.declared.pv, "pv_accumulate"}})
    if (kernels::accumulator_narrower_than_inputs(f, s.format))
      throw std::invalid_argument(std::string(arg) + "='" + kernels::format_suffix(f) +
                                  "': expected a format with at least the significand bits of the dtype (" +
                                  kernels::format_suffix(s.format) + ")");
  s.runner = std::move(runner);
  s.supports = std::move(supports);
  s.cache_invariant = cache_invariant;
  s.deterministic = deterministic;
  s.mirrors = mirrors;
  return s;
}

}  // namespace

kernels::AttentionKernel attention_kernel(const KernelSpec& s, double exp_rel_error, double exp_abs_error,
                                          bool exp2_scale, nb::object batch_runner, nb::object batch_supports) {
  if (!(exp_rel_error >= 0) || !std::isfinite(exp_rel_error) || !(exp_abs_error >= 0) || !std::isfinite(exp_abs_error))
    throw std::invalid_argument("exp_error_ulps / flush: the exp budget must be finite and >= 0");
  kernels::AttentionKernel k;
  k.info = info_of(s);
  const std::string name = k.info.name;
  k.supports = [s](const AttentionCall& c) -> Reason {
    const auto& sh = c.shape;
    if (sh.n_q == 0 || sh.n_heads == 0 || sh.n_kv_heads == 0 || sh.d == 0 || sh.d_v == 0)
      return std::string("empty attention call");
    if (sh.n_heads % sh.n_kv_heads != 0) return std::string("n_heads must be a multiple of n_kv_heads");
    if (c.params.exact_inv_sqrt_d) return std::string("kernels multiply by the float call.scale");
    return ask(s.supports, c);
  };
  const kernels::KernelInfo info = k.info;
  const kernels::DeclaredAcc declared = s.declared;
  k.pipeline = [info, exp_rel_error, exp_abs_error, declared, exp2_scale](const AttentionCall& c) {
    ref::AttentionPipeline p =
        kernels::black_box_attention_pipeline(info, c, exp_rel_error, exp_abs_error, declared, exp2_scale);
    p.name = "python " + p.name;
    return p;
  };
  k.run = [s, name](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                    std::span<const float> vc,
                    std::span<float> out) { take(name, s.runner(c, view(q), view(kc), view(vc)), out); };
  if (batch_runner.is_valid() && !batch_runner.is_none())
    k.run_batch = [batch_runner, name](std::span<const kernels::AttentionSeq> seqs) {
      nb::list items;
      for (const kernels::AttentionSeq& x : seqs)
        items.append(nb::make_tuple(x.call, view(x.q), view(x.k_cache), view(x.v_cache)));
      nb::object r = batch_runner(items);
      if (!nb::isinstance<nb::list>(r) || nb::len(r) != seqs.size())
        throw std::invalid_argument("kernel " + name + ": the batch runner returned something other than a list of " +
                                    std::to_string(seqs.size()) + " outputs");
      for (std::size_t i = 0; i < seqs.size(); ++i) take(name, r[i], seqs[i].out);
    };
  if (k.run_batch && batch_supports.is_valid() && !batch_supports.is_none())
    k.supports_batch = [batch_supports](std::span<const AttentionCall> calls) -> Reason {
      nb::list l;
      for (const AttentionCall& c : calls) l.append(c);
      return ask(batch_supports, l);
    };
  return k;
}

kernels::GemmKernel gemm_kernel(const KernelSpec& s) {
  kernels::GemmKernel k;
  k.info = info_of(s);
  const std::string name = k.info.name;
  k.supports = [s](const kernels::GemmShape& sh) -> Reason {
    if (sh.m == 0 || sh.n == 0 || sh.k == 0) return std::string("empty GEMM");
    return ask(s.supports, sh);
  };
  const Format f = s.format, acc = s.declared.acc;
  k.path = [f, acc](const kernels::GemmShape&) { return kernels::black_box_gemm_path(f, f, acc); };
  k.run = [s, name](const kernels::GemmShape& sh, std::span<const float> x, std::span<const float> w,
                    std::span<float> y) { take(name, s.runner(sh, view(x), view(w)), y); };
  return k;
}

kernels::NormKernel norm_kernel(const KernelSpec& s, double rsqrt_rel_error) {
  if (!(rsqrt_rel_error > 0) || !std::isfinite(rsqrt_rel_error))
    throw std::invalid_argument("rsqrt_error_ulps: expected a finite number > 0");
  kernels::NormKernel k;
  k.info = info_of(s);
  const std::string name = k.info.name;
  k.supports = [s](const kernels::NormShape& sh) -> Reason {
    if (sh.rows == 0 || sh.d == 0) return std::string("empty RMSNorm");
    return ask(s.supports, sh);
  };
  const Format f = s.format;
  k.path = [f, rsqrt_rel_error](const kernels::NormShape&) {
    kernels::NormPath p = kernels::black_box_norm_path(f);
    p.rsqrt_rel_error = rsqrt_rel_error;
    return p;
  };
  k.run = [s, name](const kernels::NormShape& sh, const kernels::NormParams& p, std::span<const float> x,
                    std::span<const float> w, std::span<float> y) { take(name, s.runner(sh, p, view(x), view(w)), y); };
  return k;
}

void bind_kernels(nb::module_& m) {
  m.attr("EXP_U20_REL_ERROR") = kernels::kExpU20RelError;
  m.attr("EXP_FLUSH_ABS_ERROR") = kernels::kExpU20AbsError;
  m.attr("CUDA_FAST_EXP_REL_ERROR") = kernels::kCudaFastExpRelError;
  m.attr("RSQRT_TWO_ROUNDINGS_REL_ERROR") = kernels::kRsqrtTwoRoundingsRelError;
  nb::class_<kernels::AttentionKernel>(m, "AttentionKernel")
      .def(
          "__init__",
          [](kernels::AttentionKernel* self, const std::string& name, const std::string& format, nb::object runner,
             nb::object supports, bool cache_invariant, bool deterministic, double exp_rel_error, double exp_abs_error,
             const std::string& mirrors, const std::string& acc, const std::string& pv_acc, bool exp2_scale,
             nb::object batch_runner, nb::object batch_supports) {
            new (self) kernels::AttentionKernel(attention_kernel(
                spec_of(name, format, std::move(runner), std::move(supports), cache_invariant, deterministic, mirrors,
                        acc, pv_acc),
                exp_rel_error, exp_abs_error, exp2_scale, std::move(batch_runner), std::move(batch_supports)));
          },
          nb::arg("name"), nb::arg("format"), nb::arg("runner"), nb::arg("supports").none(), nb::arg("cache_invariant"),
          nb::arg("deterministic"), nb::arg("exp_rel_error"), nb::arg("exp_abs_error"), nb::arg("mirrors") = "",
          nb::arg("acc") = "f32", nb::arg("pv_acc") = "", nb::arg("exp2_scale") = false,
          nb::arg("batch_runner").none() = nb::none(), nb::arg("batch_supports").none() = nb::none())
      .def_prop_ro("name", [](const kernels::AttentionKernel& k) { return k.info.name; })
      .def("supports", [](const kernels::AttentionKernel& k, const AttentionCall& c) { return k.supports(c); })
      .def("pipeline_name",
           [](const kernels::AttentionKernel& k, const AttentionCall& c) { return k.pipeline(c).name; });
  nb::class_<kernels::GemmKernel>(m, "GemmKernel")
      .def(
          "__init__",
          [](kernels::GemmKernel* self, const std::string& name, const std::string& format, nb::object runner,
             nb::object supports, bool cache_invariant, bool deterministic, const std::string& mirrors,
             const std::string& acc) {
            new (self) kernels::GemmKernel(gemm_kernel(spec_of(name, format, std::move(runner), std::move(supports),
                                                               cache_invariant, deterministic, mirrors, acc)));
          },
          nb::arg("name"), nb::arg("format"), nb::arg("runner"), nb::arg("supports").none(), nb::arg("cache_invariant"),
          nb::arg("deterministic"), nb::arg("mirrors") = "", nb::arg("acc") = "f32")
      .def_prop_ro("name", [](const kernels::GemmKernel& k) { return k.info.name; });
  nb::class_<kernels::NormKernel>(m, "NormKernel")
      .def(
          "__init__",
          [](kernels::NormKernel* self, const std::string& name, const std::string& format, nb::object runner,
             nb::object supports, bool deterministic, double rsqrt_rel_error, const std::string& mirrors) {
            new (self) kernels::NormKernel(norm_kernel(
                spec_of(name, format, std::move(runner), std::move(supports), false, deterministic, mirrors),
                rsqrt_rel_error));
          },
          nb::arg("name"), nb::arg("format"), nb::arg("runner"), nb::arg("supports").none(), nb::arg("deterministic"),
          nb::arg("rsqrt_rel_error"), nb::arg("mirrors") = "")
      .def_prop_ro("name", [](const kernels::NormKernel& k) { return k.info.name; });
}

}  // namespace kvconf::python
