// The calls into libtorch: SDPA with one backend forced, at::linear, HF's RMSNorm in torch ops. Every call runs
// under one mutex (the SDPA backend flags are process-global) with one intra-op thread (results independent of
// the machine's core count). Inputs are floats holding values of the kernel's format: the conversion to the
// torch dtype is exact, and so is the conversion of the output back to float. Built as the module
// kvconf_torch_ops (only kvconf_torch_ops_table exported), loaded on first use by torch_loader.cpp.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <mutex>
#include <stdexcept>

#include "torch_ops.hpp"

namespace kvconf::kernels::torch_impl {
using torch_ops::Calling;
using torch_ops::Sdpa;

#if defined(KVCONF_TORCH_CUDA)
constexpr at::DeviceType kDevice = at::kCUDA;  // this build: kvconf_torch_cuda_ops
#else
constexpr at::DeviceType kDevice = at::kCPU;  // this build: kvconf_torch_ops
#endif

namespace {

std::mutex& torch_mutex() {
  static std::mutex m;
  return m;
}

// Once per process: one intra-op thread, and math SDPA computing fp16/bf16 in fp32 (PyTorch's default, stated).
void init_once() {
  static const bool done = [] {
    at::set_num_threads(1);
    auto& c = at::globalContext();
    c.setAllowFP16BF16ReductionMathSDP(false);
#if defined(KVCONF_TORCH_CUDA)
    // GEMMs as the black-box bound reads them: fp32 stays fp32 (no TF32), fp16/bf16 reduce in fp32 (no reduced-
    // precision split-K reductions in cuBLAS).
    c.setAllowTF32CuBLAS(false);
    c.setAllowTF32CuDNN(false);
    c.setAllowFP16ReductionCuBLAS(false);
    c.setAllowBF16ReductionCuBLAS(false);
#endif
    return true;
  }();
  (void)done;
}

at::ScalarType dtype_of(Format f) {
  switch (f) {
    case Format::fp32:
      return at::kFloat;
    case Format::bf16:
      return at::kBFloat16;
    case Format::fp16:
      return at::kHalf;
    default:
      break;
  }
  throw std::invalid_argument(std::string("kvconf torch kernels: format #") + std::to_string(static_cast<int>(f)) +
                              " has no torch dtype here (fp32, bf16, fp16)");
}

// A torch tensor of dtype f with the values of x (copied), shaped `sizes`.
at::Tensor tensor_of(std::span<const float> x, at::IntArrayRef sizes, Format f) {
  at::Tensor t = at::from_blob(const_cast<float*>(x.data()), sizes, at::TensorOptions().dtype(at::kFloat));
  return t.to(at::TensorOptions().dtype(dtype_of(f)).device(kDevice), /*non_blocking=*/false, /*copy=*/true);
}

// Copies t (any dtype, any strides) into y as floats, checking the element count.
void store(const at::Tensor& t, std::span<float> y, const char* who) {
  at::Tensor f = t.to(at::TensorOptions().dtype(at::kFloat).device(at::kCPU)).contiguous();  // synchronises
  if (static_cast<std::size_t>(f.numel()) != y.size())
    throw std::runtime_error(std::string(who) + ": torch returned " + std::to_string(f.numel()) + " values, expected " +
                             std::to_string(y.size()));
  std::copy_n(f.data_ptr<float>(), y.size(), y.data());
}

const char* backend_name(std::int64_t b) {
  switch (static_cast<at::SDPBackend>(b)) {
    case at::SDPBackend::math:
      return "math";
    case at::SDPBackend::flash_attention:
      return "flash_attention";
    case at::SDPBackend::efficient_attention:
      return "efficient_attention";
    case at::SDPBackend::cudnn_attention:
      return "cudnn_attention";
    case at::SDPBackend::overrideable:
      return "overrideable";
    default:
      return "error";
  }
}

// Forces one SDPA backend for its lifetime, restoring the previous flags.
class ForceBackend {
 public:
  explicit ForceBackend(Sdpa b) {
    auto& c = at::globalContext();
    saved_ = {c.userEnabledFlashSDP(), c.userEnabledMathSDP(), c.userEnabledMemEfficientSDP(), c.userEnabledCuDNNSDP(),
              c.userEnabledOverrideableSDP()};
    c.setSDPUseFlash(b == Sdpa::flash);
    c.setSDPUseMath(b == Sdpa::math);
    c.setSDPUseMemEfficient(b == Sdpa::efficient);
    c.setSDPUseCuDNN(b == Sdpa::cudnn);
    c.setSDPUseOverrideable(false);
  }
  ~ForceBackend() {
    auto& c = at::globalContext();
    c.setSDPUseFlash(saved_[0]);
    c.setSDPUseMath(saved_[1]);
    c.setSDPUseMemEfficient(saved_[2]);
    c.setSDPUseCuDNN(saved_[3]);
    c.setSDPUseOverrideable(saved_[4]);
  }
  ForceBackend(const ForceBackend&) = delete;
  ForceBackend& operator=(const ForceBackend&) = delete;

 private:
  std::array<bool, 5> saved_{};
};

bool visible(const ref::AttentionParams& p, std::int64_t pos, std::int64_t j) {
  if (p.causal && j > pos) return false;
  if (p.window > 0) {
    const std::int64_t dist = p.causal ? pos - j : (pos > j ? pos - j : j - pos);
    if (dist >= p.window) return false;
  }
  return true;
}

// The SDPA arguments an engine builds for the call: q (1, H, n_q, d) from the (n_q, H, d) rows transposed (HF's
// .view().transpose(1, 2)), K/V (1, H, n_kv', d) as a cache holds them (contiguous, Hkv heads) repeated to H heads
// (HF repeat_kv), and the mask, causal flag and scale.
struct SdpaArgs {
  at::Tensor q, k, v;
  std::optional<at::Tensor> mask;  // (n_q, n_kv'), true = attend
  bool is_causal = false;
  double scale = 1.0;
};

SdpaArgs build(Format f, Calling how, const AttentionCall& call, std::span<const float> q, std::span<const float> kc,
               std::span<const float> vc) {
  const auto& s = call.shape;
  const auto& p = call.params;
  const std::int64_t nq = static_cast<std::int64_t>(s.n_q), H = static_cast<std::int64_t>(s.n_heads);
  const std::int64_t Hkv = static_cast<std::int64_t>(s.n_kv_heads), d = static_cast<std::int64_t>(s.d);
  const std::int64_t dv = static_cast<std::int64_t>(s.d_v);
  std::int64_t nkv = static_cast<std::int64_t>(s.n_kv);
  if (how == Calling::missing_cache_row && nq == 1 && nkv > 1) --nkv;
  if (q.size() != s.n_q * s.n_heads * s.d || kc.size() < s.n_kv * s.n_kv_heads * s.d ||
      vc.size() < s.n_kv * s.n_kv_heads * s.d_v)
    throw std::invalid_argument("kvconf torch sdpa: q, k_cache, v_cache spans do not match the call's shape");
  SdpaArgs a;
  a.q = tensor_of(q, {1, nq, H, d}, f).transpose(1, 2);  // (1, H, n_q, d), strided as an engine's
  const std::int64_t rep = H / Hkv;
  auto cache = [&](std::span<const float> c, std::int64_t dim) {
    at::Tensor t = tensor_of(c.first(static_cast<std::size_t>(nkv * Hkv * dim)), {1, nkv, Hkv, dim}, f)
                       .transpose(1, 2)
                       .contiguous();  // (1, Hkv, n_kv, dim)
    if (rep == 1) return t;
    return t.unsqueeze(2).expand({1, Hkv, rep, nkv, dim}).reshape({1, H, nkv, dim});  // (1, H, n_kv, dim)
  };
  a.k = cache(kc, d);
  a.v = cache(vc, dv);
  a.scale = how == Calling::scale_from_hidden ? 1.0 / std::sqrt(static_cast<double>(H * d)) : p.scale;
  if (how == Calling::causal_flag_always) {
    a.is_causal = true;
    return a;
  }
  // Which keys each row sees; no mask when it sees all of them.
  bool all = true, square_causal = p.causal && p.window == 0 && nq == nkv && p.q_offset == 0;
  at::Tensor m = at::empty({nq, nkv}, at::kBool);
  auto acc = m.accessor<bool, 2>();
  for (std::int64_t i = 0; i < nq; ++i)
    for (std::int64_t j = 0; j < nkv; ++j) {
      acc[i][j] = visible(p, p.q_offset + i, j);
      all = all && acc[i][j];
    }
  if (all) return a;
  if (square_causal) {
    a.is_causal = true;  // top-left = bottom-right when the rows are the whole prefix
    return a;
  }
  a.mask = m.to(kDevice);
  return a;
}

// The padded batch of a decode step (sdpa_batch's layout); the caller's spans are read only when `fill` is true
// (sdpa_batch_choice builds zeros of the same shapes).
SdpaArgs build_batch(Format f, std::span<const AttentionCall> calls, std::span<const AttentionSeq> seqs, bool fill) {
  if (calls.empty()) throw std::invalid_argument("kvconf torch sdpa batch: no sequences");
  const auto& s0 = calls[0].shape;
  const std::int64_t B = static_cast<std::int64_t>(calls.size()), H = static_cast<std::int64_t>(s0.n_heads);
  const std::int64_t Hkv = static_cast<std::int64_t>(s0.n_kv_heads), d = static_cast<std::int64_t>(s0.d);
  const std::int64_t dv = static_cast<std::int64_t>(s0.d_v);
  std::int64_t L = 0;
  for (const AttentionCall& c : calls) {
    const auto& s = c.shape;
    if (s.n_q != 1 || s.n_heads != s0.n_heads || s.n_kv_heads != s0.n_kv_heads || s.d != s0.d || s.d_v != s0.d_v ||
        c.params.scale != calls[0].params.scale || c.params.softcap > 0.0)
      throw std::invalid_argument(
          "a padded SDPA batch takes decode rows (n_q = 1) with the same heads, head dims and scale, no softcap");
    L = std::max(L, static_cast<std::int64_t>(s.n_kv));
  }
  // Host buffers: q (B, 1, H, d), K (B, L, Hkv, d), V (B, L, Hkv, dv), left-padded with zeros; mask (B, 1, 1, L).
  std::vector<float> q(static_cast<std::size_t>(B * H * d), 0.0f), k(static_cast<std::size_t>(B * L * Hkv * d), 0.0f),
      v(static_cast<std::size_t>(B * L * Hkv * dv), 0.0f);
  at::Tensor m = at::zeros({B, 1, 1, L}, at::kBool);
  auto acc = m.accessor<bool, 4>();
  for (std::int64_t b = 0; b < B; ++b) {
    const AttentionCall& c = calls[static_cast<std::size_t>(b)];
    const std::int64_t n = static_cast<std::int64_t>(c.shape.n_kv), pad = L - n;
    for (std::int64_t j = 0; j < n; ++j) acc[b][0][0][pad + j] = visible(c.params, c.params.q_offset, j);
    if (!fill) continue;
    const AttentionSeq& x = seqs[static_cast<std::size_t>(b)];
    if (x.q.size() != static_cast<std::size_t>(H * d) || x.k_cache.size() < static_cast<std::size_t>(n * Hkv * d) ||
        x.v_cache.size() < static_cast<std::size_t>(n * Hkv * dv) || x.out.size() != static_cast<std::size_t>(H * dv))
      throw std::invalid_argument("kvconf torch sdpa batch: a sequence's spans do not match its call's shape");
    std::copy(x.q.begin(), x.q.end(), q.begin() + b * H * d);
    std::copy_n(x.k_cache.begin(), n * Hkv * d, k.begin() + (b * L + pad) * Hkv * d);
    std::copy_n(x.v_cache.begin(), n * Hkv * dv, v.begin() + (b * L + pad) * Hkv * dv);
  }
  SdpaArgs a;
  a.q = tensor_of(q, {B, 1, H, d}, f).transpose(1, 2);  // (B, H, 1, d)
  const std::int64_t rep = H / Hkv;
  auto cache = [&](const std::vector<float>& c, std::int64_t dim) {
    at::Tensor t = tensor_of(c, {B, L, Hkv, dim}, f).transpose(1, 2).contiguous();  // (B, Hkv, L, dim)
    if (rep == 1) return t;
    return t.unsqueeze(2).expand({B, Hkv, rep, L, dim}).reshape({B, H, L, dim});  // (B, H, L, dim): repeat_kv
  };
  a.k = cache(k, d);
  a.v = cache(v, dv);
  a.scale = calls[0].params.scale;
  a.mask = m.to(kDevice);
  return a;
}

// The backend at::_fused_sdp_choice takes for the arguments build() makes, or nullopt with `refusal` and SDPA's
// first line in *why.
template <class Build>
std::optional<std::string> choice_of(Sdpa forced, const char* refusal, std::string* why, Build build) {
  try {
    const SdpaArgs a = build();
    ForceBackend force(forced);
    return std::string(backend_name(at::_fused_sdp_choice(a.q, a.k, a.v, a.mask, 0.0, a.is_causal, a.scale)));
  } catch (const std::exception& e) {
    if (why) {
      const std::string msg = e.what();
      *why = std::string(refusal) + ": " + msg.substr(0, msg.find('\n'));
    }
    return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> sdpa_batch_choice(Sdpa forced, Format f, std::span<const AttentionCall> calls,
                                             std::string* why) {
  std::lock_guard<std::mutex> lock(torch_mutex());
  init_once();
  return choice_of(forced, "SDPA takes no padded batch under the forced backend", why,
                   [&] { return build_batch(f, calls, {}, false); });
}

void sdpa_batch(Sdpa forced, Format f, std::span<const AttentionSeq> seqs) {
  std::lock_guard<std::mutex> lock(torch_mutex());
  init_once();
  std::vector<AttentionCall> calls;
  for (const AttentionSeq& x : seqs) calls.push_back(x.call);
  const SdpaArgs a = build_batch(f, calls, seqs, true);
  ForceBackend force(forced);
  const at::Tensor o =
      at::scaled_dot_product_attention(a.q, a.k, a.v, a.mask, 0.0, false, a.scale).transpose(1, 2);  // (B, 1, H, d_v)
  for (std::size_t b = 0; b < seqs.size(); ++b)
    store(o[static_cast<std::int64_t>(b)], seqs[b].out, "kvconf torch sdpa batch");
}

#if defined(KVCONF_TORCH_CUDA)
std::optional<std::string> unavailable() {
  if (!at::hasCUDA()) return std::string("this libtorch has no usable CUDA runtime (no driver or no CUDA device)");
  if (at::getNumGPUs() == 0) return std::string("no CUDA device");
  return std::nullopt;
}

std::string description() {
  return "torch " TORCH_VERSION " CUDA (" + std::to_string(at::getNumGPUs()) + " device(s); device 0; no TF32)";
}
#else
std::optional<std::string> unavailable() { return std::nullopt; }

std::string description() {
  std::string s = "torch " TORCH_VERSION " (CPU capability ";
  s += at::get_cpu_capability();  // "AVX512", "AVX2", ...: the kernels libtorch dispatches to here
  s += ", 1 intra-op thread)";
  return s;
}
#endif

std::optional<std::string> sdpa_choice(Sdpa forced, Format f, const AttentionCall& call, Calling how,
                                       std::string* why) {
  std::lock_guard<std::mutex> lock(torch_mutex());
  init_once();
  const auto& s = call.shape;
  const std::vector<float> q(s.n_q * s.n_heads * s.d, 0.0f), k(s.n_kv * s.n_kv_heads * s.d, 0.0f),
      v(s.n_kv * s.n_kv_heads * s.d_v, 0.0f);
  return choice_of(forced, "SDPA takes no forced backend for this call", why,
                   [&] { return build(f, how, call, q, k, v); });
}

void sdpa(Sdpa forced, Format f, Calling how, const AttentionCall& call, std::span<const float> q,
          std::span<const float> k_cache, std::span<const float> v_cache, std::span<float> out) {
  std::lock_guard<std::mutex> lock(torch_mutex());
  init_once();
  const SdpaArgs a = build(f, how, call, q, k_cache, v_cache);
  ForceBackend force(forced);
  const at::Tensor o = at::scaled_dot_product_attention(a.q, a.k, a.v, a.mask, 0.0, a.is_causal, a.scale);
  store(o.transpose(1, 2), out, "kvconf torch sdpa");  // (1, n_q, H, d_v)
}

void linear(Format f, const GemmShape& s, std::span<const float> x, std::span<const float> w, std::span<float> y) {
  std::lock_guard<std::mutex> lock(torch_mutex());
  init_once();
  const auto m = static_cast<std::int64_t>(s.m), n = static_cast<std::int64_t>(s.n), k = static_cast<std::int64_t>(s.k);
  if (x.size() != s.m * s.k || w.size() != s.n * s.k || y.size() != s.m * s.n)
    throw std::invalid_argument("kvconf torch linear: x, w, y must hold m·k, n·k, m·n values");
  const at::Tensor xt = tensor_of(x, {1, m, k}, f);  // (1, m, k): batch, tokens, hidden
  const at::Tensor wt = tensor_of(w, {n, k}, f);     // (n, k): nn.Linear's weight
  store(at::linear(xt, wt), y, "kvconf torch linear");
}

void hf_rms_norm(Format f, const NormShape& s, const NormParams& p, std::span<const float> x, std::span<const float> w,
                 std::span<float> y) {
  std::lock_guard<std::mutex> lock(torch_mutex());
  init_once();
  const auto rows = static_cast<std::int64_t>(s.rows), d = static_cast<std::int64_t>(s.d);
  if (x.size() != s.rows * s.d || w.size() != s.d || y.size() != s.rows * s.d)
    throw std::invalid_argument("kvconf torch rms_norm: x, y must hold rows·d values and w d values");
  const at::Tensor xt = tensor_of(x, {1, rows, d}, f);  // (1, rows, d)
  const at::Tensor wt = tensor_of(w, {d}, f);           // (d)
  // hidden = x.float(); variance = hidden.pow(2).mean(-1, keepdim=True); hidden = hidden * rsqrt(variance + eps)
  const at::Tensor h = xt.to(at::kFloat);
  const at::Tensor var = h.pow(2).mean(-1, /*keepdim=*/true);
  const at::Tensor normed = h * at::rsqrt(var + static_cast<double>(p.eps));
  if (p.one_plus_weight) {
    // Gemma2RMSNorm: output * (1.0 + weight.float()), then .type_as(x).
    store((normed * (1.0 + wt.to(at::kFloat))).to(dtype_of(f)), y, "kvconf torch rms_norm");
  } else {
    // LlamaRMSNorm: weight * hidden.to(input_dtype).
    store(wt * normed.to(dtype_of(f)), y, "kvconf torch rms_norm");
  }
}

}  // namespace kvconf::kernels::torch_impl

extern "C" __attribute__((visibility("default"))) const kvconf::kernels::torch_ops::Table* kvconf_torch_ops_table() {
  namespace impl = kvconf::kernels::torch_impl;
  static const kvconf::kernels::torch_ops::Table table{kvconf::kernels::torch_ops::kTableVersion,
                                                       &impl::unavailable,
                                                       &impl::description,
                                                       &impl::sdpa_choice,
                                                       &impl::sdpa,
                                                       &impl::linear,
                                                       &impl::hf_rms_norm,
                                                       &impl::sdpa_batch_choice,
                                                       &impl::sdpa_batch};
  return &table;
}
