// Shared pieces of the CPU attention kernels: call checks, visibility, transposed K, vectorisable score and
// PV chains, vector rounding, the pipeline fields common to every fp32-softmax kernel, a kernel's description and
// its registration in fp16, bf16 and fp32.
#include "attention_common.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#if defined(KVCONF_HAVE_F16C)
#include <immintrin.h>
#endif

namespace kvconf::kernels::cpu::attn {

Dims check_call(const char* who, const AttentionCall& c, std::size_t q, std::size_t k, std::size_t v, std::size_t out) {
  if (const Reason r = shape_reason(c)) throw std::invalid_argument(std::string(who) + ": " + *r);
  const ref::AttentionShape& s = c.shape;
  Dims d;
  d.n_q = s.n_q;
  d.n_kv = s.n_kv;
  d.cap = c.cap();
  d.heads = s.n_heads;
  d.kv_heads = s.n_kv_heads;
  d.group = s.n_heads / s.n_kv_heads;
  d.d = s.d;
  d.dv = s.d_v;
  auto expect = [&](const char* what, std::size_t got, std::size_t want) {
    if (got != want)
      throw std::invalid_argument(std::string(who) + ": " + what + " has " + std::to_string(got) +
                                  " elements, the call needs " + std::to_string(want));
  };
  expect("q", q, d.n_q * d.heads * d.d);
  expect("k_cache", k, d.cap * d.kv_heads * d.d);
  expect("v_cache", v, d.cap * d.kv_heads * d.dv);
  expect("out", out, d.n_q * d.heads * d.dv);
  return d;
}

Reason shape_reason(const AttentionCall& c) {
  const ref::AttentionShape& s = c.shape;
  if (s.d < 1 || s.d_v < 1) return "head dims d and d_v must be >= 1";
  if (s.n_heads < 1 || s.n_kv_heads < 1 || s.n_heads % s.n_kv_heads != 0)
    return "n_heads = " + std::to_string(s.n_heads) +
           " must be a positive multiple of n_kv_heads = " + std::to_string(s.n_kv_heads);
  if (c.capacity != 0 && c.capacity < s.n_kv)
    return "capacity " + std::to_string(c.capacity) + " is below n_kv = " + std::to_string(s.n_kv);
  if (c.params.q_offset < 0 || c.params.window < 0) return "q_offset and window must be >= 0";
  if (c.params.causal && static_cast<std::uint64_t>(c.params.q_offset) + s.n_q > s.n_kv)
    return "causal query positions q_offset + n_q exceed n_kv";
  if (!std::isfinite(c.params.scale) || !std::isfinite(c.params.softcap) || c.params.softcap < 0)
    return "scale must be finite and softcap finite and >= 0";
  if (static_cast<double>(static_cast<float>(c.params.scale)) != c.params.scale ||
      static_cast<double>(static_cast<float>(c.params.softcap)) != c.params.softcap)
    return "scale and softcap must be float values (the kernels compute with those floats)";
  if (c.params.exact_inv_sqrt_d) return "kernels multiply by the float params.scale (exact_inv_sqrt_d is oracle-only)";
  return std::nullopt;
}

KeyRange visible_keys(const ref::AttentionParams& p, std::size_t n_kv, std::size_t row) {
  const std::int64_t pos = p.q_offset + static_cast<std::int64_t>(row);
  std::int64_t lo = 0, hi = static_cast<std::int64_t>(n_kv);
  if (p.causal) hi = std::min(hi, pos + 1);
  if (p.window > 0) {
    lo = std::max<std::int64_t>(lo, pos - p.window + 1);
    if (!p.causal) hi = std::min(hi, pos + p.window);
  }
  if (hi <= lo) return {};
  return {static_cast<std::size_t>(lo), static_cast<std::size_t>(hi)};
}

void round_n(Format f, float* x, std::size_t n) {
  switch (f) {
    case Format::fp32:
      return;
    case Format::fp16: {
      std::size_t i = 0;
#if defined(KVCONF_HAVE_F16C)
      for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
      }
#endif
      for (; i < n; ++i) x[i] = round_fp16(x[i]);
      return;
    }
    case Format::bf16:
      for (std::size_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
      return;
    default:
      throw std::invalid_argument("kvconf attention: formats are fp16, bf16 or fp32");
  }
}

void KeysT::fill(const float* k_cache, std::size_t n, std::size_t kv_heads, std::size_t g, std::size_t d) {
  // Pad the leading dimension off powers of two so the d rows do not alias in the cache.
  ld_ = (n + 7) / 8 * 8 + 8;
  if (data_.size() < d * ld_) data_.resize(d * ld_);
  float* dst = data_.data();
  for (std::size_t j = 0; j < n; ++j) {
    const float* src = k_cache + (j * kv_heads + g) * d;  // (d)
    for (std::size_t t = 0; t < d; ++t) dst[t * ld_ + j] = src[t];
  }
}

namespace {

// W independent sequential chains (keys col[0..W)), kept in registers.
template <std::size_t W>
inline void score_block(const float* q, const float* col, std::size_t ld, std::size_t d, float* s) {
  float a[W];
  for (std::size_t w = 0; w < W; ++w) a[w] = q[0] * col[w];
  for (std::size_t t = 1; t < d; ++t) {
    const float qt = q[t];
    const float* r = col + t * ld;
    for (std::size_t w = 0; w < W; ++w) a[w] = std::fma(qt, r[w], a[w]);
  }
  for (std::size_t w = 0; w < W; ++w) s[w] = a[w];
}

// W output columns of the PV chain, kept in registers over all n keys.
template <std::size_t W>
inline void pv_block(const float* p, const float* v, std::size_t v_stride, std::size_t n, float* acc) {
  float a[W];
  for (std::size_t w = 0; w < W; ++w) a[w] = acc[w];
  for (std::size_t j = 0; j < n; ++j) {
    const float pj = p[j];
    const float* r = v + j * v_stride;
    for (std::size_t w = 0; w < W; ++w) a[w] = std::fma(pj, r[w], a[w]);
  }
  for (std::size_t w = 0; w < W; ++w) acc[w] = a[w];
}

}  // namespace

void score_chains(const float* q, const KeysT& kt, std::size_t d, std::size_t j0, std::size_t n, float* s) {
  const float* base = kt.data() + j0;
  const std::size_t ld = kt.ld();
  std::size_t j = 0;
  for (; j + 32 <= n; j += 32) score_block<32>(q, base + j, ld, d, s + j);
  for (; j + 8 <= n; j += 8) score_block<8>(q, base + j, ld, d, s + j);
  for (; j < n; ++j) score_block<1>(q, base + j, ld, d, s + j);
}

void pv_chain(const float* p, const float* v, std::size_t v_stride, std::size_t n, std::size_t dv, float* acc) {
  std::size_t c = 0;
  for (; c + 32 <= dv; c += 32) pv_block<32>(p, v + c, v_stride, n, acc + c);
  for (; c + 8 <= dv; c += 8) pv_block<8>(p, v + c, v_stride, n, acc + c);
  for (; c < dv; ++c) pv_block<1>(p, v + c, v_stride, n, acc + c);
}

void scale_scores(float* s, std::size_t n, float scale, float softcap) {
  for (std::size_t j = 0; j < n; ++j) s[j] *= scale;
  if (softcap > 0.0f)
    for (std::size_t j = 0; j < n; ++j) s[j] = tanh_f32(s[j] / softcap) * softcap;
}

ref::AttentionPipeline base_pipeline(Format f) {
  ref::AttentionPipeline p;
  p.in = f;
  p.qk_spec = AccumSpec{};
  p.qk_spec.in = f;
  p.qk_spec.acc = Format::fp32;
  p.qk_spec.out = Format::fp32;
  p.qk_spec.fma = true;
  p.qk_order = Sequential{};
  p.score = Format::fp32;
  p.tanh_rel_error = kExpRelError;  // tanh_f32: libm double tanh, one fp32 rounding (fast_fp.hpp)
  p.softmax = Format::fp32;
  p.exp_rel_error = kExpRelError;
  p.p_cast = f == Format::fp32 ? std::nullopt : std::optional<Format>(f);
  p.pv_spec = p.qk_spec;
  p.pv_order = Sequential{};
  p.out = f;
  return p;
}

AttentionKernel cpu_attention_kernel(std::string name, Format f, RunFn run) {
  AttentionKernel k;
  k.info.name = std::move(name);
  k.info.in = f;
  k.info.acc = Format::fp32;
  k.info.out = f;
  k.info.partial = Format::fp32;
  k.run = [f, run, who = k.info.name](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                                      std::span<const float> vc,
                                      std::span<float> out) { run(who.c_str(), f, c, q, kc, vc, out); };
  return k;
}

void register_per_format(Registry& r, const CpuAttentionSpec& s) {
  for (const Format f : {Format::fp16, Format::bf16, Format::fp32}) {
    AttentionKernel k = cpu_attention_kernel("cpu.attn." + std::string(s.stem) + "." + format_suffix(f), f, s.run);
    k.info.cache_invariant = s.cache_invariant;
    k.info.mirrors = s.mirrors;
    k.supports = s.supports;
    k.pipeline = [f, pipeline = s.pipeline](const AttentionCall& c) { return pipeline(f, c); };
    r.add(std::move(k));
  }
}

}  // namespace kvconf::kernels::cpu::attn
