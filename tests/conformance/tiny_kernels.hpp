// Test-only kernels for the unit tests of the conformance checks: a correct sequential GEMM and a correct eager
// attention (fp16 in, fp32 arithmetic, fp16 out), each with planted-bug variants selected by a Bug value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/kernels/kernel.hpp"

namespace kvconf::test {

enum class GemmBug {
  none,
  drop_last_term,   // the reduction misses its last term
  decode_fp16_acc,  // M = 1 accumulates in fp16 (llama.cpp-style precision switch); path() says so
  fp16_accumulate,  // accumulates in fp16 while path() claims fp32
};

inline kernels::GemmKernel tiny_gemm(GemmBug bug, bool cache_invariant = true) {
  kernels::GemmKernel k;
  k.info.name = "test.gemm.seq.f16";
  k.info.in = Format::fp16;
  k.info.acc = Format::fp32;
  k.info.out = Format::fp16;
  k.info.partial = Format::fp32;
  k.info.cache_invariant = cache_invariant;
  k.supports = [](const kernels::GemmShape&) -> kernels::Reason { return std::nullopt; };
  k.path = [bug](const kernels::GemmShape& s) {
    AccumSpec spec;
    spec.in = Format::fp16;
    spec.acc = bug == GemmBug::decode_fp16_acc && s.m == 1 ? Format::fp16 : Format::fp32;
    spec.out = Format::fp16;
    return kernels::GemmPath{"seq", spec, Sequential{}};
  };
  // x: (m, k), w: (n, k), y: (m, n).
  k.run = [bug](const kernels::GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
    for (std::size_t r = 0; r < s.m; ++r)
      for (std::size_t o = 0; o < s.n; ++o) {
        const float* xr = &x[r * s.k];
        const float* wr = &w[o * s.k];
        const std::size_t len = bug == GemmBug::drop_last_term ? s.k - 1 : s.k;
        float acc = 0.0f;
        if (bug == GemmBug::fp16_accumulate || (bug == GemmBug::decode_fp16_acc && s.m == 1)) {
          for (std::size_t i = 0; i < len; ++i) acc = kernels::fma_format(Format::fp16, xr[i], wr[i], acc);
        } else {
          for (std::size_t i = 0; i < len; ++i) acc = std::fmaf(xr[i], wr[i], acc);
        }
        y[r * s.n + o] = kernels::round_fp16(acc);
      }
  };
  return k;
}

enum class AttnBug {
  none,
  reads_unused_slots,   // loops over the whole capacity and masks by multiplying with 0 (0·NaN = NaN)
  decode_mask_short,    // decode (n_q = 1) misses the newest key
  mask_ignores_offset,  // causal mask uses the row index instead of its absolute position
  decode_fp16_pv,       // decode accumulates PV in fp16 (pipeline() says so)
  capacity_fp16_pv,     // spare capacity switches PV to fp16 accumulation (pipeline() says so)
};

// Eager attention: scores by sequential fp32 FMAs, × scale, softcap and softmax in fp32, P rounded to fp16,
// PV by sequential fp32 FMAs, one rounding to fp16.
inline kernels::AttentionKernel tiny_attention(AttnBug bug, bool cache_invariant = true) {
  kernels::AttentionKernel k;
  k.info.name = "test.attn.eager.f16";
  k.info.in = Format::fp16;
  k.info.acc = Format::fp32;
  k.info.out = Format::fp16;
  k.info.partial = Format::fp32;
  k.info.cache_invariant = cache_invariant;
  k.supports = [](const kernels::AttentionCall&) -> kernels::Reason { return std::nullopt; };
  k.pipeline = [bug](const kernels::AttentionCall& call) {
    ref::AttentionPipeline p;
    p.name = "test eager";
    if ((bug == AttnBug::decode_fp16_pv && call.shape.n_q == 1) ||
        (bug == AttnBug::capacity_fp16_pv && call.cap() > call.shape.n_kv)) {
      p.name += " fp16 PV";
      p.pv_spec.acc = Format::fp16;
      p.pv_spec.out = Format::fp16;
    }
    p.in = Format::fp16;
    p.tanh_rel_error = kernels::kExpRelError;
    p.exp_rel_error = kernels::kExpRelError;
    p.p_cast = Format::fp16;
    p.out = Format::fp16;
    return p;
  };
  // q: (n_q, H, d), k: (cap, Hkv, d), v: (cap, Hkv, d_v), out: (n_q, H, d_v).
  k.run = [bug](const kernels::AttentionCall& call, std::span<const float> q, std::span<const float> kc,
                std::span<const float> vc, std::span<float> out) {
    const auto& s = call.shape;
    const auto& p = call.params;
    const std::size_t group = s.n_heads / s.n_kv_heads;
    const std::size_t keys = bug == AttnBug::reads_unused_slots ? call.cap() : s.n_kv;
    const bool pv16 =
        (bug == AttnBug::decode_fp16_pv && s.n_q == 1) || (bug == AttnBug::capacity_fp16_pv && call.cap() > s.n_kv);
    std::vector<float> sc(keys);
    for (std::size_t i = 0; i < s.n_q; ++i) {
      std::int64_t pos = p.q_offset + static_cast<std::int64_t>(i);
      if (bug == AttnBug::mask_ignores_offset) pos = static_cast<std::int64_t>(i);
      for (std::size_t h = 0; h < s.n_heads; ++h) {
        const std::size_t kh = h / group;
        std::vector<char> vis(keys, 0);
        float m = -std::numeric_limits<float>::infinity();
        for (std::size_t j = 0; j < keys; ++j) {
          const auto jj = static_cast<std::int64_t>(j);
          bool v = j < s.n_kv;
          if (p.causal)
            v = v && jj <= pos && (p.window <= 0 || pos - jj < p.window);
          else
            v = v && (p.window <= 0 || std::llabs(pos - jj) < p.window);
          if (bug == AttnBug::decode_mask_short && s.n_q == 1 && jj == pos) v = false;
          vis[j] = v;
          float d = 0.0f;
          for (std::size_t c = 0; c < s.d; ++c)
            d = std::fmaf(q[(i * s.n_heads + h) * s.d + c], kc[(j * s.n_kv_heads + kh) * s.d + c], d);
          float z = d * static_cast<float>(p.scale);
          if (p.softcap > 0.0) z = static_cast<float>(p.softcap) * kernels::tanh_f32(z / static_cast<float>(p.softcap));
          sc[j] = z;
          if (v) m = std::max(m, z);
        }
        float l = 0.0f;
        for (std::size_t j = 0; j < keys; ++j) {
          sc[j] = vis[j] ? kernels::exp_f32(sc[j] - m) : 0.0f;
          l += sc[j];
        }
        for (std::size_t c = 0; c < s.d_v; ++c) {
          float acc = 0.0f;
          for (std::size_t j = 0; j < keys; ++j) {
            if (!vis[j] && bug != AttnBug::reads_unused_slots) continue;
            const float pj = kernels::round_fp16(sc[j] / l);
            const float vj = vc[(j * s.n_kv_heads + kh) * s.d_v + c];
            acc = pv16 ? kernels::fma_format(Format::fp16, pj, vj, acc) : std::fmaf(pj, vj, acc);
          }
          out[(i * s.n_heads + h) * s.d_v + c] = kernels::round_fp16(acc);
        }
      }
    }
  };
  return k;
}

}  // namespace kvconf::test

namespace kvconf::test {

enum class NormBug {
  none,
  mean_over_d_minus_1,  // divides Σx² by d − 1
};

// HF LlamaRMSNorm / Gemma2RMSNorm in fp32 with a sequential fp32 Σx² (fp16 in and out).
inline kernels::NormKernel tiny_norm(NormBug bug) {
  kernels::NormKernel k;
  k.info.name = "test.norm.seq.f16";
  k.info.in = Format::fp16;
  k.info.acc = Format::fp32;
  k.info.out = Format::fp16;
  k.info.partial = Format::fp32;
  k.supports = [](const kernels::NormShape&) -> kernels::Reason { return std::nullopt; };
  k.path = [](const kernels::NormShape&) {
    AccumSpec spec;
    spec.in = Format::fp16;
    spec.acc = Format::fp32;
    spec.out = Format::fp32;
    return kernels::NormPath{"seq", spec, Sequential{}};
  };
  // x: (rows, d), w: (d), y: (rows, d).
  k.run = [bug](const kernels::NormShape& s, const kernels::NormParams& p, std::span<const float> x,
                std::span<const float> w, std::span<float> y) {
    const float f = 1.0f / static_cast<float>(bug == NormBug::mean_over_d_minus_1 ? s.d - 1 : s.d);
    for (std::size_t r = 0; r < s.rows; ++r) {
      float sum = 0.0f;
      for (std::size_t i = 0; i < s.d; ++i) sum = std::fmaf(x[r * s.d + i], x[r * s.d + i], sum);
      const float mean = sum * f;
      const float rho = kernels::rsqrt_f32(mean + p.eps);
      for (std::size_t i = 0; i < s.d; ++i) {
        const float h = x[r * s.d + i] * rho;
        if (p.one_plus_weight) {
          const float g = 1.0f + w[i];
          y[r * s.d + i] = kernels::round_fp16(h * g);
        } else {
          y[r * s.d + i] = kernels::round_fp16(w[i] * kernels::round_fp16(h));
        }
      }
    }
  };
  return k;
}

}  // namespace kvconf::test
