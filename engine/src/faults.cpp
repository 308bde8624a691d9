// The planted engine faults' hooks (faults.hpp).
#include "faults.hpp"

#include <algorithm>
#include <cmath>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/numerics/rounding.hpp"

namespace kvconf::engine::faults {

void adjust_attention(kernels::AttentionCall& a, const ModelConfig& c, Fault f, bool cached_path, bool decode) {
  if ((cached_path && f == Fault::window_recompute_only) || f == Fault::window_ignored) a.params.window = 0;
  if (f == Fault::attn_scale_head_dim)
    a.params.scale = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim))));
  if (decode && f == Fault::softcap_missing_decode) a.params.softcap = 0.0;
}

float norm_eps(const ModelConfig& c, Fault f) {
  return f == Fault::rms_eps_ignored ? 0.0f : static_cast<float>(c.rms_eps);
}

double embed_scale(const ModelConfig& c, Format fmt, Fault f) {
  const double s = std::sqrt(static_cast<double>(c.hidden));
  return f == Fault::embed_scale_unrounded ? static_cast<double>(static_cast<float>(s)) : kernels::round_double(fmt, s);
}

std::size_t rope_position(std::size_t pos, Fault f, bool decode) {
  return decode && f == Fault::rope_decode_off_by_one ? pos + 1 : pos;
}

std::size_t cache_write_row(std::size_t pos0, Fault f, bool decode) {
  return decode && f == Fault::shifted_cache_row ? pos0 - 1 : pos0;
}

bool final_softcap(const ModelConfig& c, Fault f, bool decode) {
  return c.final_softcap > 0.0 && !(decode && f == Fault::final_softcap_missing_decode);
}

void after_cache_store(std::vector<float>& side, std::size_t begin, std::size_t end, Format fmt, Fault f, bool decode) {
  if (!decode || f != Fault::cache_store_toward_zero) return;
  for (std::size_t i = begin; i < end; ++i)
    side[i] = static_cast<float>(::kvconf::decode(fmt, ::kvconf::encode(fmt, static_cast<double>(side[i])) & ~1u));
}

bool run_attention(const kernels::AttentionKernel& ak, const kernels::AttentionCall& a, const std::vector<float>& q,
                   const std::vector<float>& kc, const std::vector<float>& vc, std::vector<float>& out, Fault f,
                   bool decode) {
  if (!decode || f != Fault::gqa_modulo_decode) return false;
  // The kernel maps head h' to kv head h' / G, so q head j + i·n_kv goes to slot j·G + i (kv head j) and the output
  // comes back the same way.
  const std::size_t H = a.shape.n_heads, KV = a.shape.n_kv_heads, G = H / KV, d = a.shape.d;
  std::vector<float> qp(q.size()), op(out.size());
  auto slot = [&](std::size_t h) { return (h % KV) * G + h / KV; };
  for (std::size_t h = 0; h < H; ++h) std::copy_n(q.begin() + h * d, d, qp.begin() + slot(h) * d);
  ak.run(a, qp, kc, vc, op);
  for (std::size_t h = 0; h < H; ++h) std::copy_n(op.begin() + slot(h) * d, d, out.begin() + h * d);
  return true;
}

}  // namespace kvconf::engine::faults
