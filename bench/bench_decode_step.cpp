// The engine's decode-step benchmark (issue 5): cache-ON decode (one token against a cache of `prefix` rows) and
// cache-OFF recompute (a fresh forward over prefix + 1 tokens) at several prefix lengths, for a checkpoint folder and a
// profile, with the memory-bandwidth roofline of a decode step: bound = weight bytes per step / measured copy bandwidth
// (device: cudaMemcpy D2D for GPU profiles; host memcpy for CPU profiles), counter `ratio` = step time / bound
// (target on the GPU for the 7B-shaped model: <= 2). kv_GB: cache bytes one step reads; kv_copied_GB: K/V bytes the
// CUDA attention kernels actually copied host-to-device per timed step (kernels::gpu_kv_stats; with the device KV
// mirror one new row per layer and side for cache-ON decode, the whole cache for a recompute; 0 for CPU profiles).
//
// Run (GPU, a random full-size checkpoint from kvconf_make_random_checkpoint):
//   build/bench/kvconf_bench_decode --model=/data/llama2-7b --profile=cuda-fp16
// Run (CPU, the tiny fixture):
//   build/bench/kvconf_bench_decode --model=build/fixtures/models/llama2-tiny --profile=fp16-eager
// Flags (or environment): --model=DIR (KVCONF_BENCH_MODEL; default: the llama2-tiny fixture of this build),
// --profile=NAME (KVCONF_BENCH_PROFILE; default cuda-fp16), --prefix=128,512,2048 (KVCONF_BENCH_PREFIX); the rest
// are Google Benchmark's (--benchmark_filter=decode/, --benchmark_format=json, ...).
//
// Cache-ON timing: each timed step is one Context::decode; the cache starts at `prefix` rows (an untimed prefill) and
// is refilled after kGrowth steps, so steps run at prefix .. prefix + kGrowth − 1 rows. Manual time (steady_clock
// around the call, which returns host logits, so a GPU step is complete when it returns).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "device_bandwidth.hpp"
#include "kvconf/engine/context.hpp"
#include "kvconf/engine/model.hpp"
#include "kvconf/engine/profile.hpp"
#include "kvconf/kernels/gpu.hpp"
#include "kvconf/kernels/registry.hpp"

namespace {

using namespace kvconf;

constexpr std::size_t kGrowth = 8;  // decode steps per refill of the cache

struct Setup {
  std::string model_dir;
  std::string profile_name;
  std::vector<std::size_t> prefixes;
  std::optional<std::string> unavailable;  // why nothing can run (printed, and every benchmark skips with it)
  std::unique_ptr<engine::Model> model;
  kernels::Registry registry;
  std::optional<engine::ProfileKernels> kernels;
  std::optional<bench::Bandwidth> bandwidth;  // nullopt: no roofline counters
  std::string bandwidth_note;
  double weight_bytes = 0.0;  // per decode step
};

Setup& setup() {
  static Setup s;
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Bytes of weights one decode step reads: every projection matrix of every layer, the norms, the LM head (the
// embedding table when tied) — in the storage format (what a GPU holds; the engine's host copies are floats).
double weight_bytes_per_step(const engine::ModelConfig& c, Format storage) {
  const double h = static_cast<double>(c.hidden), I = static_cast<double>(c.intermediate);
  const double q = static_cast<double>(c.q_dim()), kv = static_cast<double>(c.kv_dim());
  const double norms_per_layer = c.post_norms ? 4.0 : 2.0;
  const double per_layer = q * h + 2.0 * kv * h + h * q + 3.0 * I * h + norms_per_layer * h;
  const double elements = static_cast<double>(c.n_layers) * per_layer + h + static_cast<double>(c.vocab) * h;
  return elements * static_cast<double>(info(storage).bits) / 8.0;
}

// KV-cache bytes one decode step reads at `rows` cached rows (K and V of every layer).
double kv_bytes_per_step(const engine::ModelConfig& c, Format storage, std::size_t rows) {
  return 2.0 * static_cast<double>(c.n_layers) * static_cast<double>(rows) * static_cast<double>(c.kv_dim()) *
         static_cast<double>(info(storage).bits) / 8.0;
}

// Deterministic token ids in [3, vocab): a prompt of any length without a tokenizer.
std::vector<int> tokens(std::size_t n, std::size_t vocab) {
  std::vector<int> t(n);
  std::uint64_t x = 0x2545F4914F6CDD1Dull;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t[i] = static_cast<int>(3 + x % (vocab - 3));
  }
  if (!t.empty()) t[0] = 1;  // BOS
  return t;
}

// K/V bytes the CUDA attention kernels have copied host-to-device so far (0 for CPU profiles).
double kv_bytes_copied() { return static_cast<double>(kernels::gpu_kv_stats().bytes_uploaded); }

// kv_copied_bytes: K/V bytes copied host-to-device per step, measured over the timed calls only.
void roofline_counters(benchmark::State& state, double step_s, std::size_t rows, double kv_copied_bytes) {
  const Setup& s = setup();
  state.counters["prefix"] = static_cast<double>(rows);
  state.counters["weight_GB"] = s.weight_bytes * 1e-9;
  state.counters["kv_GB"] = kv_bytes_per_step(s.model->config, s.kernels->profile.storage, rows) * 1e-9;
  state.counters["kv_copied_GB"] = kv_copied_bytes * 1e-9;
  state.counters["step_ms"] = step_s * 1e3;
  if (!s.bandwidth) return;
  const double bound_s = s.weight_bytes / s.bandwidth->bytes_per_s;
  state.counters["bw_GBps"] = s.bandwidth->bytes_per_s * 1e-9;
  state.counters["bound_ms"] = bound_s * 1e3;
  state.counters["ratio"] = step_s / bound_s;
}

// The timed steps of one benchmark: step() runs one step under steady_clock, sets it as the iteration's manual time
// and counts the K/V bytes it copied; finish() sets the roofline counters from the means over the steps.
class StepTimer {
 public:
  template <class Step>
  void step(benchmark::State& state, Step&& run) {
    const double copied0 = kv_bytes_copied();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double dt = seconds_since(t0);
    copied_ += kv_bytes_copied() - copied0;
    state.SetIterationTime(dt);
    total_ += dt;
    ++steps_;
  }
  void finish(benchmark::State& state, std::size_t rows) const {
    const double n = static_cast<double>(steps_);
    roofline_counters(state, total_ / n, rows, copied_ / n);
  }

 private:
  double total_ = 0.0, copied_ = 0.0;
  std::size_t steps_ = 0;
};

void decode_cache_on(benchmark::State& state, std::size_t prefix) {
  Setup& s = setup();
  if (s.unavailable) return state.SkipWithError(s.unavailable->c_str());
  const std::vector<int> prompt = tokens(prefix + kGrowth, s.model->config.vocab);
  engine::Context ctx(*s.model, *s.kernels, engine::ContextOptions{prefix + kGrowth});
  StepTimer timer;
  for (auto _ : state) {
    if (ctx.n_cached() == 0 || ctx.n_cached() >= prefix + kGrowth) {  // refill: untimed (manual time)
      ctx.reset();
      ctx.prefill(std::span<const int>(prompt.data(), prefix));
    }
    const int token = prompt[ctx.n_cached()];
    timer.step(state, [&] { benchmark::DoNotOptimize(ctx.decode(token)); });
  }
  timer.finish(state, prefix);
}

void recompute_cache_off(benchmark::State& state, std::size_t prefix) {
  Setup& s = setup();
  if (s.unavailable) return state.SkipWithError(s.unavailable->c_str());
  const std::vector<int> prompt = tokens(prefix + 1, s.model->config.vocab);
  engine::Context ctx(*s.model, *s.kernels);
  StepTimer timer;
  for (auto _ : state) timer.step(state, [&] { benchmark::DoNotOptimize(ctx.recompute(prompt)); });
  timer.finish(state, prefix);
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::vector<std::size_t> parse_prefixes(const std::string& text) {
  std::vector<std::size_t> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(static_cast<std::size_t>(std::stoull(item)));
  return v;
}

// Takes --model=, --profile=, --prefix= out of argv (the rest goes to Google Benchmark).
void parse_flags(int& argc, char** argv, Setup& s) {
#if defined(KVCONF_FIXTURES_DIR)
  const std::string default_model = std::string(KVCONF_FIXTURES_DIR) + "/models/llama2-tiny";
#else
  const std::string default_model;
#endif
  s.model_dir = env_or("KVCONF_BENCH_MODEL", default_model);
  s.profile_name = env_or("KVCONF_BENCH_PROFILE", "cuda-fp16");
  std::string prefixes = env_or("KVCONF_BENCH_PREFIX", "128,512,2048");
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--model=", 0) == 0)
      s.model_dir = a.substr(8);
    else if (a.rfind("--profile=", 0) == 0)
      s.profile_name = a.substr(10);
    else if (a.rfind("--prefix=", 0) == 0)
      prefixes = a.substr(9);
    else
      argv[out++] = argv[i];
  }
  argc = out;
  s.prefixes = parse_prefixes(prefixes);
}

// Loads the model, resolves the profile and measures the bandwidth; a failure becomes s.unavailable.
void prepare(Setup& s) {
  try {
    const engine::Profile& p = engine::find_profile(s.profile_name);
    if (const auto why = engine::profile_unavailable(p)) {
      s.unavailable = "profile " + p.name + ": " + *why;
      return;
    }
    s.registry = kernels::cpu_registry();
    s.kernels = engine::resolve(p, s.registry);
    const auto t0 = std::chrono::steady_clock::now();
    s.model = std::make_unique<engine::Model>(engine::load_model(s.model_dir, p.storage));
    std::fprintf(stderr, "loaded %s in %.1f s: %s\n", s.model_dir.c_str(), seconds_since(t0),
                 s.model->config.describe().c_str());
    engine::pin_gpu_weights(*s.model, p);  // GPU profiles: weights uploaded once, device-resident (no-op on CPU)
    for (std::size_t n : s.prefixes)
      if (n + kGrowth > s.model->config.max_positions)
        throw std::invalid_argument("--prefix " + std::to_string(n) + " + " + std::to_string(kGrowth) +
                                    " steps exceeds max_position_embeddings " +
                                    std::to_string(s.model->config.max_positions));
    s.weight_bytes = weight_bytes_per_step(s.model->config, p.storage);
    try {
      s.bandwidth = p.requires_gpu ? bench::measure_device_copy_bandwidth() : bench::measure_host_copy_bandwidth();
    } catch (const std::exception& e) {
      s.bandwidth_note = e.what();
    }
  } catch (const std::exception& e) {
    s.unavailable = e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Setup& s = setup();
  parse_flags(argc, argv, s);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  prepare(s);
  benchmark::AddCustomContext("kvconf.model", s.model_dir);
  benchmark::AddCustomContext("kvconf.profile", s.profile_name);
  if (s.unavailable) {
    std::fprintf(stderr, "kvconf_bench_decode: %s\n", s.unavailable->c_str());
    benchmark::AddCustomContext("kvconf.unavailable", *s.unavailable);
  }
  if (s.bandwidth) {
    char bw[160];
    std::snprintf(bw, sizeof bw, "%.1f GB/s (%s, %zu-byte copies, best of %d; read + write bytes)",
                  s.bandwidth->bytes_per_s * 1e-9, s.bandwidth->what.c_str(), s.bandwidth->copy_bytes,
                  s.bandwidth->reps);
    benchmark::AddCustomContext("kvconf.bandwidth", bw);
  } else if (!s.bandwidth_note.empty()) {
    benchmark::AddCustomContext("kvconf.bandwidth", "unmeasured: " + s.bandwidth_note);
  }
  for (std::size_t n : s.prefixes) {
    benchmark::RegisterBenchmark(("decode/cache_on/prefix:" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& st) { decode_cache_on(st, n); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode/cache_off_recompute/prefix:" + std::to_string(n)).c_str(),
                                 [n](benchmark::State& st) { recompute_cache_off(st, n); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
