// The planted engine faults (faults.hpp): their names and lists, and one ForwardHooks class per fault.
#include "kvconf/engine/faults.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::engine {

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::none:
      return "none";
    case Fault::rope_decode_off_by_one:
      return "rope_decode_off_by_one";
    case Fault::shifted_cache_row:
      return "shifted_cache_row";
    case Fault::window_recompute_only:
      return "window_recompute_only";
    case Fault::softcap_missing_decode:
      return "softcap_missing_decode";
    case Fault::gqa_modulo_decode:
      return "gqa_modulo_decode";
    case Fault::cache_store_toward_zero:
      return "cache_store_toward_zero";
    case Fault::attn_scale_head_dim:
      return "attn_scale_head_dim";
    case Fault::window_ignored:
      return "window_ignored";
    case Fault::rms_eps_ignored:
      return "rms_eps_ignored";
    case Fault::embed_scale_unrounded:
      return "embed_scale_unrounded";
    case Fault::final_softcap_missing_decode:
      return "final_softcap_missing_decode";
    case Fault::cache_narrow_format:
      return "cache_narrow_format";
  }
  return "?";
}

std::vector<Fault> all_faults() {
  return {Fault::rope_decode_off_by_one, Fault::shifted_cache_row, Fault::window_recompute_only,
          Fault::softcap_missing_decode, Fault::gqa_modulo_decode, Fault::cache_store_toward_zero};
}

std::vector<Fault> architecture_faults() {
  return {Fault::attn_scale_head_dim, Fault::window_ignored, Fault::rms_eps_ignored, Fault::embed_scale_unrounded};
}

std::vector<Fault> head_faults() { return {Fault::final_softcap_missing_decode}; }
std::vector<Fault> cache_faults() { return {Fault::cache_narrow_format}; }

namespace faults {
namespace {

// window_recompute_only: the cached path forgets the sliding window; window_ignored: every path does.
struct WindowDropped : ForwardHooks {
  bool cached_only;
  explicit WindowDropped(bool cached) : cached_only(cached) {}
  void attention_call(kernels::AttentionCall& a, const ModelConfig&, bool cached_path, bool) const override {
    if (cached_path || !cached_only) a.params.window = 0;
  }
};

// attn_scale_head_dim: head_dim^-1/2 instead of query_pre_attn_scalar^-1/2.
struct ScaleHeadDim : ForwardHooks {
  void attention_call(kernels::AttentionCall& a, const ModelConfig& c, bool, bool) const override {
    a.params.scale = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim))));
  }
};

// softcap_missing_decode: decode attention without the score softcap.
struct SoftcapMissingDecode : ForwardHooks {
  void attention_call(kernels::AttentionCall& a, const ModelConfig&, bool, bool decode) const override {
    if (decode) a.params.softcap = 0.0;
  }
};

// rms_eps_ignored: RMSNorm with epsilon 0.
struct EpsIgnored : ForwardHooks {
  float norm_eps(const ModelConfig&) const override { return 0.0f; }
};

// embed_scale_unrounded: √hidden rounded to fp32, not to the model format.
struct EmbedScaleUnrounded : ForwardHooks {
  double embed_scale(const ModelConfig& c, Format) const override {
    return static_cast<double>(static_cast<float>(std::sqrt(static_cast<double>(c.hidden))));
  }
};

// rope_decode_off_by_one: decode rotates q and k at pos + 1.
struct RopeDecodeOffByOne : ForwardHooks {
  std::size_t rope_position(std::size_t pos, bool decode) const override { return decode ? pos + 1 : pos; }
};

// shifted_cache_row: decode writes its row at pos − 1.
struct ShiftedCacheRow : ForwardHooks {
  std::size_t cache_write_row(std::size_t pos0, bool decode) const override { return decode ? pos0 - 1 : pos0; }
};

// final_softcap_missing_decode: decode logits without the final softcap.
struct FinalSoftcapMissingDecode : ForwardHooks {
  bool final_softcap(const ModelConfig& c, bool decode) const override { return c.final_softcap > 0.0 && !decode; }
};

// cache_store_toward_zero: decode stores its rows with the last bit of each value cleared.
struct CacheStoreTowardZero : ForwardHooks {
  void after_cache_store(std::vector<float>& side, std::size_t begin, std::size_t end, Format fmt, bool /*cached_path*/,
                         bool decode) const override {
    if (!decode) return;
    for (std::size_t i = begin; i < end; ++i)
      side[i] = static_cast<float>(::kvconf::decode(fmt, ::kvconf::encode(fmt, static_cast<double>(side[i])) & ~1u));
  }
};

// cache_narrow_format: the cached path stores K/V with 3 fewer significand bits, rounded to nearest (ties away).
struct CacheNarrowFormat : ForwardHooks {
  void after_cache_store(std::vector<float>& side, std::size_t begin, std::size_t end, Format fmt, bool cached_path,
                         bool /*decode*/) const override {
    if (!cached_path) return;
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint32_t b = ::kvconf::encode(fmt, static_cast<double>(side[i]));
      side[i] = static_cast<float>(::kvconf::decode(fmt, (b + 4u) & ~7u));  // + half of the dropped bits' weight
    }
  }
};

// gqa_modulo_decode: decode attention with q head h reading kv head h mod n_kv.
struct GqaModuloDecode : ForwardHooks {
  void attention(const kernels::AttentionKernel& ak, const kernels::AttentionCall& a, const std::vector<float>& q,
                 const std::vector<float>& kc, const std::vector<float>& vc, std::vector<float>& out,
                 bool decode) const override {
    if (!decode) return ak.run(a, q, kc, vc, out);
    // The kernel maps head h' to kv head h' / G, so q head j + i·n_kv goes to slot j·G + i (kv head j) and the
    // output comes back the same way.
    const std::size_t H = a.shape.n_heads, KV = a.shape.n_kv_heads, G = H / KV, d = a.shape.d;
    std::vector<float> qp(q.size()), op(out.size());
    auto slot = [&](std::size_t h) { return (h % KV) * G + h / KV; };
    for (std::size_t h = 0; h < H; ++h) std::copy_n(q.begin() + h * d, d, qp.begin() + slot(h) * d);
    ak.run(a, qp, kc, vc, op);
    for (std::size_t h = 0; h < H; ++h) std::copy_n(op.begin() + slot(h) * d, d, out.begin() + h * d);
  }
};

}  // namespace

const ForwardHooks& hooks(Fault f) {
  static const WindowDropped window_recompute_only(true), window_ignored(false);
  static const ScaleHeadDim attn_scale_head_dim;
  static const SoftcapMissingDecode softcap_missing_decode;
  static const EpsIgnored rms_eps_ignored;
  static const EmbedScaleUnrounded embed_scale_unrounded;
  static const RopeDecodeOffByOne rope_decode_off_by_one;
  static const ShiftedCacheRow shifted_cache_row;
  static const FinalSoftcapMissingDecode final_softcap_missing_decode;
  static const CacheStoreTowardZero cache_store_toward_zero;
  static const GqaModuloDecode gqa_modulo_decode;
  static const CacheNarrowFormat cache_narrow_format;
  switch (f) {
    case Fault::none:
      return plain_forward();
    case Fault::window_recompute_only:
      return window_recompute_only;
    case Fault::window_ignored:
      return window_ignored;
    case Fault::attn_scale_head_dim:
      return attn_scale_head_dim;
    case Fault::softcap_missing_decode:
      return softcap_missing_decode;
    case Fault::rms_eps_ignored:
      return rms_eps_ignored;
    case Fault::embed_scale_unrounded:
      return embed_scale_unrounded;
    case Fault::rope_decode_off_by_one:
      return rope_decode_off_by_one;
    case Fault::shifted_cache_row:
      return shifted_cache_row;
    case Fault::final_softcap_missing_decode:
      return final_softcap_missing_decode;
    case Fault::cache_store_toward_zero:
      return cache_store_toward_zero;
    case Fault::gqa_modulo_decode:
      return gqa_modulo_decode;
    case Fault::cache_narrow_format:
      return cache_narrow_format;
  }
  throw std::invalid_argument("kvconf::engine: unknown fault " + std::to_string(static_cast<int>(f)));
}

}  // namespace faults
ContextOptions with_fault(Fault f, ContextOptions o) {
  o.hooks = f == Fault::none ? nullptr : &faults::hooks(f);
  return o;
}

}  // namespace kvconf::engine
