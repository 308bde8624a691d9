// The base attention kernel of the mutant catalogue: a plain online-softmax (FlashAttention-2 style)
// evaluation, one query row and head at a time, with exactly one optional planted bug (AttnBug).
#include "base_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kvconf/kernels/fast_fp.hpp"

namespace kvconf::kernels::mutants {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Running state of one (query row, head) over a range of keys.
struct RowState {
  float m = kNegInf;       // running max of the visible scores
  float l = 0.0f;          // running row sum of exp(s − m), fp32
  std::vector<float> acc;  // (d_v) running Σ fp16(p)·v, fp32
};

// One call's view of the inputs, plus the path this call takes.
struct Ctx {
  const AttnDesign& design;
  const AttentionCall& call;
  std::span<const float> q;  // (n_q, n_heads, d)
  std::span<const float> k;  // (capacity, n_kv_heads, d)
  std::span<const float> v;  // (capacity, n_kv_heads, d_v)
  bool decode = false;       // n_q == 1
  std::size_t block = 16;    // Bc of this call
  bool bug(AttnBug b) const { return design.bug == b; }
};

std::size_t kv_head_of(const Ctx& c, std::size_t h) {
  const ref::AttentionShape& s = c.call.shape;
  if (c.bug(AttnBug::gqa_modulo)) return h % s.n_kv_heads;
  return h / (s.n_heads / s.n_kv_heads);
}

bool visible(const Ctx& c, std::int64_t pos, std::size_t j) {
  const ref::AttentionParams& p = c.call.params;
  if (j >= c.call.shape.n_kv) return false;
  const auto jj = static_cast<std::int64_t>(j);
  if (p.causal) {
    if (c.bug(AttnBug::causal_off_by_one) ? jj >= pos : jj > pos) return false;
  }
  if (p.window > 0) {
    const std::int64_t dist = p.causal ? pos - jj : (pos > jj ? pos - jj : jj - pos);
    if (c.bug(AttnBug::window_off_by_one) ? dist > p.window : dist >= p.window) return false;
  }
  return true;
}

// The cache row the kernel reads for key j (the stale-row mutant reads the previous one in decode).
std::size_t row_read(const Ctx& c, std::size_t j) {
  const std::size_t n_kv = c.call.shape.n_kv;
  if (c.bug(AttnBug::stale_cache_row) && c.decode && n_kv >= 2 && j == n_kv - 1) return n_kv - 2;
  return j;
}

// ŝ = fl32(fl32(q·k)·scale), q·k one fp32 FMA chain over the head dim; softcap c·tanh(ŝ/c) in fp32.
float score(const Ctx& c, std::size_t row, std::size_t h, std::size_t j) {
  const ref::AttentionShape& s = c.call.shape;
  const float* qr = c.q.data() + (row * s.n_heads + h) * s.d;                               // (d)
  const float* kr = c.k.data() + (row_read(c, j) * s.n_kv_heads + kv_head_of(c, h)) * s.d;  // (d)
  float dot = qr[0] * kr[0];  // exact: fp16 × fp16 fits in fp32
  for (std::size_t i = 1; i < s.d; ++i) dot = std::fmaf(qr[i], kr[i], dot);
  float sc = dot * static_cast<float>(c.call.params.scale);
  const double cap = c.call.params.softcap;
  if (cap > 0.0 && !(c.bug(AttnBug::softcap_missing_decode) && c.decode)) {
    const auto capf = static_cast<float>(cap);
    sc = capf * tanh_f32(sc / capf);
  }
  return sc;
}

// Online softmax over keys [lo, hi) in blocks of c.block aligned at lo (FlashAttention-2: rescale the
// running sum and accumulator by exp(m_old − m_new) when a block raises the max).
void visit_keys(const Ctx& c, std::size_t row, std::int64_t pos, std::size_t h, std::size_t lo, std::size_t hi,
                RowState& st) {
  const ref::AttentionShape& s = c.call.shape;
  const std::size_t g = kv_head_of(c, h);
  std::vector<float> sblk;        // (block) scores of the visible keys of one block
  std::vector<std::size_t> jblk;  // (block) their key indices
  for (std::size_t b0 = lo; b0 < hi; b0 += c.block) {
    const std::size_t b1 = std::min(b0 + c.block, hi);
    sblk.clear();
    jblk.clear();
    for (std::size_t j = b0; j < b1; ++j) {
      if (!visible(c, pos, j)) continue;
      sblk.push_back(score(c, row, h, j));
      jblk.push_back(j);
    }
    if (jblk.empty()) continue;
    float m_new = st.m;
    for (float x : sblk) m_new = std::max(m_new, x);
    float alpha = st.m == kNegInf ? 0.0f : exp_f32(st.m - m_new);
    if (c.bug(AttnBug::no_max_subtraction)) {
      m_new = 0.0f;
      alpha = 1.0f;
    }
    st.l *= alpha;
    for (float& a : st.acc) a *= alpha;
    for (std::size_t t = 0; t < jblk.size(); ++t) {
      const float p = exp_f32(sblk[t] - m_new);
      st.l += p;
      const float p16 = round_fp16(p);                                                   // P → fp16 before PV
      const float* vr = c.v.data() + (row_read(c, jblk[t]) * s.n_kv_heads + g) * s.d_v;  // (d_v)
      for (std::size_t col = 0; col < s.d_v; ++col) st.acc[col] = std::fmaf(p16, vr[col], st.acc[col]);
    }
    st.m = m_new;
  }
}

// out[col] = fp16(acc / l), or +0 when no key is visible.
void finish(const RowState& st, float* out, std::size_t d_v) {
  for (std::size_t col = 0; col < d_v; ++col) out[col] = st.l > 0.0f ? round_fp16(st.acc[col] / st.l) : 0.0f;
}

// Split-KV decode (flash-decoding): keys cut into `splits` contiguous partitions, each normalised by its
// own sum with lse_s = m_s + log(l_s); combined with weights exp(lse_s − lse), ascending, fp32.
void split_decode_row(const Ctx& c, std::size_t h, float* out) {
  const ref::AttentionShape& s = c.call.shape;
  const std::int64_t pos = c.call.params.q_offset;
  const std::size_t n_split = c.design.decode_splits;
  const std::size_t len = (s.n_kv + n_split - 1) / n_split;
  std::vector<RowState> parts;
  for (std::size_t lo = 0; lo < s.n_kv; lo += len) {
    RowState st;
    st.acc.assign(s.d_v, 0.0f);
    visit_keys(c, 0, pos, h, lo, std::min(lo + len, s.n_kv), st);
    if (st.l > 0.0f) parts.push_back(std::move(st));
  }
  if (parts.empty()) {
    std::fill(out, out + s.d_v, 0.0f);
    return;
  }
  if (c.bug(AttnBug::split_combine_unscaled)) {  // Σ acc_s / Σ l_s, each relative to its own max
    float l = 0.0f;
    for (const RowState& p : parts) l += p.l;
    for (std::size_t col = 0; col < s.d_v; ++col) {
      float a = 0.0f;
      for (const RowState& p : parts) a += p.acc[col];
      out[col] = round_fp16(a / l);
    }
    return;
  }
  std::vector<float> lse(parts.size());  // (splits)
  float lse_max = kNegInf;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    lse[i] = parts[i].m + static_cast<float>(std::log(static_cast<double>(parts[i].l)));
    lse_max = std::max(lse_max, lse[i]);
  }
  float sum = 0.0f;
  for (float x : lse) sum += exp_f32(x - lse_max);
  const float lse_all = lse_max + static_cast<float>(std::log(static_cast<double>(sum)));
  for (std::size_t col = 0; col < s.d_v; ++col) {
    float o = 0.0f;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const float o_s = parts[i].acc[col] / parts[i].l;  // split output, fp32
      o = std::fmaf(exp_f32(lse[i] - lse_all), o_s, o);
    }
    out[col] = round_fp16(o);
  }
}

std::size_t block_of(const AttnDesign& d, const AttentionCall& call) {
  if (d.bug == AttnBug::capacity_blocks) return std::max<std::size_t>(1, call.cap() / 4);
  return d.block;
}

bool splits_this_call(const AttnDesign& d, const AttentionCall& call) {
  return d.decode_splits > 0 && call.shape.n_q == 1;
}

void run(const AttnDesign& d, const AttentionCall& call, std::span<const float> q, std::span<const float> k,
         std::span<const float> v, std::span<float> out) {
  const ref::AttentionShape& s = call.shape;
  Ctx c{d, call, q, k, v, s.n_q == 1, block_of(d, call)};
  for (std::size_t row = 0; row < s.n_q; ++row) {
    const std::int64_t pos = d.bug == AttnBug::ignores_q_offset ? static_cast<std::int64_t>(row)
                                                                : call.params.q_offset + static_cast<std::int64_t>(row);
    for (std::size_t h = 0; h < s.n_heads; ++h) {
      float* o = out.data() + (row * s.n_heads + h) * s.d_v;  // (d_v)
      if (splits_this_call(d, call)) {
        split_decode_row(c, h, o);
      } else {
        RowState st;
        st.acc.assign(s.d_v, 0.0f);
        visit_keys(c, row, pos, h, 0, s.n_kv, st);
        if (d.bug == AttnBug::unused_slot_read && call.cap() > s.n_kv) {  // 0 · V[n_kv]: NaN if the slot is
          const float* vr = v.data() + (s.n_kv * s.n_kv_heads + kv_head_of(c, h)) * s.d_v;
          for (std::size_t col = 0; col < s.d_v; ++col) st.acc[col] = std::fmaf(0.0f, vr[col], st.acc[col]);
        }
        finish(st, o, s.d_v);
      }
      if (d.bug == AttnBug::decode_one_ulp_bias && c.decode && h == 0 && s.d_v > 0) {
        const float a = std::fabs(o[0]);
        const int e = a < 0x1p-14f ? -14 : std::ilogb(a);  // fp16 binade (subnormals share 2^-14's spacing)
        o[0] += std::ldexp(1.0f, e - 10);                  // one fp16 ulp up: still an fp16 value
      }
    }
  }
}

Reason supports(const AttentionCall& call) {
  const ref::AttentionShape& s = call.shape;
  if (s.n_kv_heads == 0 || s.n_heads % s.n_kv_heads != 0) return "n_heads must be a multiple of n_kv_heads";
  if (s.d == 0 || s.d_v == 0) return "empty head dimension";
  if (call.cap() < s.n_kv) return "capacity below n_kv";
  if (call.params.exact_inv_sqrt_d) return "the kernel multiplies by params.scale (exact_inv_sqrt_d unsupported)";
  if (call.params.q_offset < 0) return "negative q_offset";
  if (call.params.causal && static_cast<std::size_t>(call.params.q_offset) + s.n_q > s.n_kv)
    return "causal call with queries past the last key";
  return std::nullopt;
}

ref::AttentionPipeline pipeline(const AttnDesign& d, const AttentionCall& call) {
  ref::AttentionPipeline p;
  const std::size_t bc = block_of(d, call);
  const bool split = splits_this_call(d, call);
  p.in = Format::fp16;
  p.qk_spec = AccumSpec{Format::fp16, Format::fp32, Format::fp32, true, {}};
  p.qk_order = Sequential{};
  p.score = Format::fp32;
  p.tanh_rel_error = call.params.softcap > 0.0 ? kExpRelError : 0.0;
  p.softmax = Format::fp32;
  p.exp_rel_error = kExpRelError;
  const std::size_t n_kv = std::max<std::size_t>(call.shape.n_kv, 1);
  const std::size_t len = split ? (n_kv + d.decode_splits - 1) / d.decode_splits : n_kv;
  p.splits = split ? (n_kv + len - 1) / len : 1;
  p.kv_blocks = (len + bc - 1) / bc;
  p.split_out = Format::fp32;
  p.normalize_before_pv = false;
  p.p_cast = Format::fp16;
  p.pv_spec = AccumSpec{Format::fp16, Format::fp32, Format::fp32, true, {}};
  p.pv_order = Sequential{};
  p.out = Format::fp16;
  p.name = split ? "online bc" + std::to_string(bc) + " splitkv s=" + std::to_string(p.splits)
                 : "online bc" + std::to_string(bc) + " blocks=" + std::to_string(p.kv_blocks);
  return p;
}

}  // namespace

AttentionKernel make_attention_kernel(const AttnDesign& design) {
  AttentionKernel k;
  k.info.name = design.name;
  k.info.backend = "mutant";
  k.info.in = Format::fp16;
  k.info.acc = Format::fp32;
  k.info.out = Format::fp16;
  k.info.partial = Format::fp32;
  k.info.cache_invariant = design.claims_cache_invariant;
  k.info.deterministic = true;
  k.info.mirrors = design.mirrors;
  k.supports = [](const AttentionCall& call) { return supports(call); };
  k.pipeline = [design](const AttentionCall& call) { return pipeline(design, call); };
  k.run = [design](const AttentionCall& call, std::span<const float> q, std::span<const float> kc,
                   std::span<const float> vc, std::span<float> out) { run(design, call, q, kc, vc, out); };
  return k;
}

}  // namespace kvconf::kernels::mutants
