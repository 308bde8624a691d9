// Plugin loading and registration (plugin.hpp): validates each descriptor a worker reports, and registers
// GemmKernel/NormKernel/AttentionKernel entries plugin.<lib>.<kernel> whose run() crosses to the worker, with the
// black-box paths of black_box.hpp for the bounds.
#include "kvconf/kernels/plugin.hpp"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <set>

#include "kvconf/kernels/black_box.hpp"
#include "kvconf/plugin.h"
#include "tensor_bits.hpp"
#include "worker_process.hpp"

namespace kvconf::kernels {

namespace {

using plugin_wire::KernelEntry;
using plugin_wire::Request;

// One fp32 ulp relative to the value it is an ulp of, at most: the unit of exp_error_ulps.
constexpr double kFp32Ulp = 0x1p-23;

const char* format_field_help = "expected KVCONF_FP32 (1), KVCONF_FP16 (2) or KVCONF_BF16 (3)";

std::optional<Format> format_of(std::int32_t f) {
  switch (f) {
    case KVCONF_FP32:
      return Format::fp32;
    case KVCONF_FP16:
      return Format::fp16;
    case KVCONF_BF16:
      return Format::bf16;
    default:
      return std::nullopt;
  }
}

bool name_ok(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char ch : n)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-')) return false;
  return true;
}

// The refusal of kernel[i] for its first bad field, or nothing.
std::optional<std::string> bad_descriptor(const KernelEntry& e, std::size_t i, std::set<std::string>& seen) {
  const std::string at = "kernel[" + std::to_string(i) + "]" + (e.name.empty() ? "" : " '" + e.name + "'") + ": ";
  if (e.name_null || e.name.empty())
    return at + "field name is " + (e.name_null ? "NULL" : "empty") + ", expected 1 to 64 characters of [A-Za-z0-9_.-]";
  if (!name_ok(e.name)) return at + "field name has characters outside [A-Za-z0-9_.-] or is over 64 long";
  if (!seen.insert(e.name).second) return at + "duplicate name (an earlier descriptor has it)";
  if (e.kind != KVCONF_KIND_GEMM && e.kind != KVCONF_KIND_NORM && e.kind != KVCONF_KIND_ATTENTION)
    return at + "field kind = " + std::to_string(e.kind) +
           ", expected KVCONF_KIND_GEMM (1), KVCONF_KIND_NORM (2) or KVCONF_KIND_ATTENTION (3)";
  for (auto [v, field] :
       std::array<std::pair<std::int32_t, const char*>, 3>{{{e.in, "in"}, {e.acc, "acc"}, {e.out, "out"}}})
    if (!format_of(v)) return at + "field " + field + " = " + std::to_string(v) + ", " + format_field_help;
  if (e.abi == 1 && e.acc != KVCONF_FP32)
    return at + "field acc = " + std::to_string(e.acc) +
           ", expected KVCONF_FP32 (1): ABI version 1 describes fp32-accumulating kernels only (version 2 reads "
           "KVCONF_FP16 and KVCONF_BF16)";
  const auto narrower = [](std::int32_t acc, std::int32_t in) {
    return accumulator_narrower_than_inputs(*format_of(acc), *format_of(in));
  };
  if (narrower(e.acc, e.in))
    return at + "field acc = " + std::to_string(e.acc) +
           ", expected a format with at least the significand bits of in = " + std::to_string(e.in);
  if (e.pv_acc != 0) {
    if (e.kind != KVCONF_KIND_ATTENTION)
      return at + "field pv_acc = " + std::to_string(e.pv_acc) + ", expected 0 (only attention kernels have a P·V)";
    if (!format_of(e.pv_acc))
      return at + "field pv_acc = " + std::to_string(e.pv_acc) +
             ", expected 0 (= acc), KVCONF_FP32 (1), KVCONF_FP16 (2) or KVCONF_BF16 (3)";
    if (narrower(e.pv_acc, e.in))
      return at + "field pv_acc = " + std::to_string(e.pv_acc) +
             ", expected a format with at least the significand bits of in = " + std::to_string(e.in);
  }
  if ((e.flags & ~KVCONF_FLAG_EXP2_SCALE) != 0)
    return at + "field flags = " + std::to_string(e.flags) + ", expected 0 or KVCONF_FLAG_EXP2_SCALE (1)";
  if (e.flags != 0 && e.kind != KVCONF_KIND_ATTENTION)
    return at + "field flags = " + std::to_string(e.flags) +
           ", expected 0 (KVCONF_FLAG_EXP2_SCALE describes attention kernels)";
  for (auto [v, field] : std::array<std::pair<std::int32_t, const char*>, 2>{
           {{e.cache_invariant, "cache_invariant"}, {e.deterministic, "deterministic"}}})
    if (v != 0 && v != 1) return at + "field " + field + " = " + std::to_string(v) + ", expected 0 or 1";
  if (e.exp_error_ulps > 1u << 20)
    return at + "field exp_error_ulps = " + std::to_string(e.exp_error_ulps) + ", expected at most 1048576";
  if (!e.has_run) {
    const char* fn = e.kind == KVCONF_KIND_GEMM   ? "gemm_run"
                     : e.kind == KVCONF_KIND_NORM ? "norm_run"
                                                  : "attention_run";
    return at + "field " + fn + " is NULL";
  }
  return std::nullopt;
}

// The accumulators the descriptor declares (pv_acc 0: acc).
DeclaredAcc declared_of(const KernelEntry& e) {
  const Format acc = *format_of(e.acc);
  return {acc, e.pv_acc != 0 ? *format_of(e.pv_acc) : acc};
}

KernelInfo info_of(const std::string& prefix, const KernelEntry& e) {
  KernelInfo i;
  i.name = prefix + e.name;
  i.backend = "plugin";
  i.in = *format_of(e.in);
  i.acc = *format_of(e.acc);
  i.out = *format_of(e.out);
  i.partial = declared_of(e).partial();
  i.cache_invariant = e.cache_invariant == 1;
  i.deterministic = e.deterministic == 1;
  i.mirrors = e.mirrors.empty() ? "external plugin kernel" : e.mirrors;
  return i;
}

// What a kernel's call needs: the worker, its index, its registry name.
struct Target {
  std::shared_ptr<WorkerProcess> w;
  std::uint32_t index = 0;
  std::string name;
  bool has_supports = false;

  // Sends the request; returns the plugin's reason when it declines (supports) or throws (run).
  Reason supports(Request rq) const {
    if (!has_supports) return std::nullopt;
    rq.op = plugin_wire::kSupports;
    rq.kernel = index;
    std::vector<std::byte> out;
    const auto a = w->call(name, rq, {}, out);
    if (a.rc == plugin_wire::kOk) return std::nullopt;
    if (a.rc == plugin_wire::kKernelError) return "plugin: " + a.msg;
    throw PluginAbiViolation("plugin kernel " + name + ": " + a.msg);
  }
  void run(Request rq, std::span<const std::span<const std::byte>> inputs, Format out_format,
           std::span<float> out) const {
    rq.op = plugin_wire::kRun;
    rq.kernel = index;
    std::vector<std::byte> bytes;
    const auto a = w->call(name, rq, inputs, bytes);
    if (a.rc == plugin_wire::kKernelError) throw KernelFailure("plugin kernel " + name + ": " + a.msg);
    if (a.rc != plugin_wire::kOk) throw PluginAbiViolation("plugin kernel " + name + ": " + a.msg);
    if (bytes.size() != out.size() * plugin_bits::bytes_per(out_format))
      throw PluginAbiViolation("plugin kernel " + name + ": the worker returned " + std::to_string(bytes.size()) +
                               " output bytes, expected " +
                               std::to_string(out.size() * plugin_bits::bytes_per(out_format)));
    plugin_bits::decode(out_format, bytes, out);
  }
};

void check_size(const std::string& name, const char* what, std::size_t have, std::size_t want) {
  if (have != want)
    throw std::invalid_argument("plugin kernel " + name + ": " + what + " holds " + std::to_string(have) +
                                " values, expected " + std::to_string(want));
}

GemmKernel gemm_kernel(const Target& t, const KernelInfo& info) {
  GemmKernel k;
  k.info = info;
  auto req = [](const GemmShape& s) {
    Request rq;
    rq.dim[0] = s.m;
    rq.dim[1] = s.n;
    rq.dim[2] = s.k;
    return rq;
  };
  k.supports = [t, req](const GemmShape& s) -> Reason {
    if (s.m == 0 || s.n == 0 || s.k == 0) return std::string("empty GEMM");
    return t.supports(req(s));
  };
  const Format in = info.in, out = info.out, acc = info.acc;
  k.path = [in, out, acc](const GemmShape&) { return black_box_gemm_path(in, out, acc); };
  k.run = [t, req, in, out](const GemmShape& s, std::span<const float> x, std::span<const float> w,
                            std::span<float> y) {
    check_size(t.name, "x", x.size(), s.m * s.k);
    check_size(t.name, "w", w.size(), s.n * s.k);
    check_size(t.name, "y", y.size(), s.m * s.n);
    const auto bx = plugin_bits::encode(in, x), bw = plugin_bits::encode(in, w);
    const std::array<std::span<const std::byte>, 2> ins = {bx, bw};
    t.run(req(s), ins, out, y);
  };
  return k;
}

NormKernel norm_kernel(const Target& t, const KernelInfo& info) {
  NormKernel k;
  k.info = info;
  auto req = [](const NormShape& s, const NormParams& p) {
    Request rq;
    rq.dim[0] = s.rows;
    rq.dim[1] = s.d;
    rq.eps = p.eps;
    rq.one_plus_weight = p.one_plus_weight ? 1 : 0;
    return rq;
  };
  k.supports = [t, req](const NormShape& s) -> Reason {
    if (s.rows == 0 || s.d == 0) return std::string("empty RMSNorm");
    return t.supports(req(s, NormParams{}));
  };
  const Format in = info.in, out = info.out, acc = info.acc;
  k.path = [in, acc](const NormShape&) { return black_box_norm_path(in, acc); };
  k.run = [t, req, in, out](const NormShape& s, const NormParams& p, std::span<const float> x, std::span<const float> w,
                            std::span<float> y) {
    check_size(t.name, "x", x.size(), s.rows * s.d);
    check_size(t.name, "w", w.size(), s.d);
    check_size(t.name, "y", y.size(), s.rows * s.d);
    const auto bx = plugin_bits::encode(in, x), bw = plugin_bits::encode(in, w);
    const std::array<std::span<const std::byte>, 2> ins = {bx, bw};
    t.run(req(s, p), ins, out, y);
  };
  return k;
}

AttentionKernel attention_kernel(const Target& t, const KernelInfo& info, std::uint32_t exp_ulps, DeclaredAcc declared,
                                 bool exp2_scale) {
  AttentionKernel k;
  k.info = info;
  auto req = [](const AttentionCall& c) {
    Request rq;
    const auto& s = c.shape;
    const std::uint64_t dims[7] = {s.n_q, s.n_kv, s.n_heads, s.n_kv_heads, s.d, s.d_v, c.cap()};
    for (int i = 0; i < 7; ++i) rq.dim[i] = dims[i];
    rq.q_offset = c.params.q_offset;
    rq.window = c.params.window;
    rq.causal = c.params.causal ? 1 : 0;
    rq.scale = static_cast<float>(c.params.scale);
    rq.softcap = static_cast<float>(c.params.softcap);
    return rq;
  };
  k.supports = [t, req](const AttentionCall& c) -> Reason {
    const auto& s = c.shape;
    if (s.n_q == 0 || s.n_heads == 0 || s.n_kv_heads == 0 || s.d == 0 || s.d_v == 0)
      return std::string("empty attention call");
    if (s.n_heads % s.n_kv_heads != 0) return std::string("n_heads must be a multiple of n_kv_heads");
    if (c.cap() < s.n_kv) return std::string("capacity below n_kv");
    if (c.params.exact_inv_sqrt_d) return std::string("kernels multiply by the float params.scale");
    if (!std::isfinite(c.params.scale) || !std::isfinite(c.params.softcap) || c.params.softcap < 0 ||
        static_cast<double>(static_cast<float>(c.params.scale)) != c.params.scale ||
        static_cast<double>(static_cast<float>(c.params.softcap)) != c.params.softcap)
      return std::string("the ABI passes scale and softcap as floats: these are not float values");
    return t.supports(req(c));
  };
  // 0 = correctly rounded: charged one ulp (an exp within half an ulp is within one).
  const double exp_rel = static_cast<double>(exp_ulps == 0 ? 1 : exp_ulps) * kFp32Ulp;
  k.pipeline = [info, exp_rel, declared, exp2_scale](const AttentionCall& c) {
    // A flush of e^x < 2^-125 to 0 is allowed (plugin.h), the budget PyTorch's exp_u20 needs.
    ref::AttentionPipeline p = black_box_attention_pipeline(info, c, exp_rel, kExpU20AbsError, declared, exp2_scale);
    p.name = "plugin " + p.name;
    return p;
  };
  const Format in = info.in, out = info.out;
  k.run = [t, req, in, out](const AttentionCall& c, std::span<const float> q, std::span<const float> kc,
                            std::span<const float> vc, std::span<float> o) {
    const auto& s = c.shape;
    check_size(t.name, "q", q.size(), s.n_q * s.n_heads * s.d);
    check_size(t.name, "k_cache", kc.size(), c.cap() * s.n_kv_heads * s.d);
    check_size(t.name, "v_cache", vc.size(), c.cap() * s.n_kv_heads * s.d_v);
    check_size(t.name, "out", o.size(), s.n_q * s.n_heads * s.d_v);
    const auto bq = plugin_bits::encode(in, q), bk = plugin_bits::encode(in, kc), bv = plugin_bits::encode(in, vc);
    const std::array<std::span<const std::byte>, 3> ins = {bq, bk, bv};
    t.run(req(c), ins, out, o);
  };
  return k;
}

bool is_file(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

std::string self_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::string plugin_prefix(const std::filesystem::path& lib) {
  std::string stem = lib.filename().string();
  if (stem.rfind("lib", 0) == 0 && stem.size() > 3) stem = stem.substr(3);
  if (auto dot = stem.find('.'); dot != std::string::npos && dot > 0) stem.resize(dot);
  return "plugin." + stem + ".";
}

PluginOptions plugin_options() {
  PluginOptions o;
  if (const char* t = std::getenv("KVCONF_PLUGIN_TIMEOUT_S"); t != nullptr && *t != '\0') {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(v > 0) || !std::isfinite(v))
      throw PluginError(std::string("KVCONF_PLUGIN_TIMEOUT_S='") + t + "': expected a positive number of seconds");
    o.timeout_s = v;
  }
  return o;
}

std::string plugin_worker_path() {
  if (const char* w = std::getenv("KVCONF_PLUGIN_WORKER"); w != nullptr && *w != '\0') {
    if (!is_file(w)) throw PluginError(std::string("KVCONF_PLUGIN_WORKER='") + w + "': not an executable file");
    return w;
  }
#if defined(KVCONF_PLUGIN_WORKER_PATH)
  if (is_file(KVCONF_PLUGIN_WORKER_PATH)) return KVCONF_PLUGIN_WORKER_PATH;
#endif
  const std::string dir = self_dir();
  for (const char* rel : {"/kvconf_plugin_worker", "/../libexec/kvconf_plugin_worker"})
    if (!dir.empty() && is_file(dir + rel)) return dir + rel;
  throw PluginError("cannot find kvconf_plugin_worker (the process plugins run in): set KVCONF_PLUGIN_WORKER");
}

void register_plugin_kernels(Registry& r, const std::filesystem::path& lib, const PluginOptions& o) {
  const std::string shown = lib.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(lib, ec)) throw PluginError("plugin " + shown + ": no such file");
  // dlopen searches the library path for a bare name: hand the worker a path.
  const std::string path = lib.has_parent_path() ? shown : "./" + shown;
  auto w = std::make_shared<WorkerProcess>(path, o.worker.empty() ? plugin_worker_path() : o.worker, o.timeout_s);
  const auto& table = w->table();
  std::set<std::string> seen;
  for (std::size_t i = 0; i < table.size(); ++i)
    if (auto why = bad_descriptor(table[i], i, seen)) throw PluginError("plugin " + shown + ": " + *why);
  const std::string prefix = plugin_prefix(lib);
  Registry staged;  // all or nothing: r is untouched when a name clashes
  for (std::size_t i = 0; i < table.size(); ++i) {
    const KernelEntry& e = table[i];
    const Target t{w, static_cast<std::uint32_t>(i), prefix + e.name, e.has_supports};
    const KernelInfo info = info_of(prefix, e);
    for (const std::string& n : r.names())
      if (n == info.name)
        throw PluginError("plugin " + shown + ": kernel '" + e.name + "' would register as " + info.name +
                          ", which is already registered (two plugins with the same file name?)");
    if (e.kind == KVCONF_KIND_GEMM)
      staged.add(gemm_kernel(t, info));
    else if (e.kind == KVCONF_KIND_NORM)
      staged.add(norm_kernel(t, info));
    else
      staged.add(attention_kernel(t, info, e.exp_error_ulps, declared_of(e), (e.flags & KVCONF_FLAG_EXP2_SCALE) != 0));
  }
  for (const auto& k : staged.gemm()) r.add(k);
  for (const auto& k : staged.norm()) r.add(k);
  for (const auto& k : staged.attention()) r.add(k);
}

Registry plugin_registry(const std::vector<std::string>& libs, const PluginOptions& o) {
  Registry r;
  for (const auto& lib : libs) register_plugin_kernels(r, lib, o);
  return r;
}

std::vector<std::string> plugins_from_env(const std::string& fallback) {
  std::vector<std::string> libs;
  if (const char* env = std::getenv("KVCONF_PLUGINS"); env != nullptr) {
    std::string s = env;
    std::size_t at = 0;
    while (at <= s.size()) {
      const std::size_t colon = std::min(s.find(':', at), s.size());
      if (colon > at) libs.push_back(s.substr(at, colon - at));
      at = colon + 1;
    }
  }
  if (libs.empty() && !fallback.empty()) libs.push_back(fallback);
  return libs;
}

}  // namespace kvconf::kernels
