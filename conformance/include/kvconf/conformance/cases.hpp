// The case tables the conformance suites instantiate over (llama.cpp test-backend-ops style), their
// stable ids (the same string keys filters, reports and golden baselines), seeds, and input data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvconf/kernels/kernel.hpp"

namespace kvconf::conformance {

// How inputs are drawn (all values then rounded to the kernel's input format).
enum class Data : std::uint8_t {
  normal,             // N(0, 1)
  same_sign,          // U(0.5, 1.5): no cancellation, the accumulation-error worst case for sums
  wide_range,         // N(0,1) · 2^U(−8, 8): large dynamic range
  near_exp_overflow,  // attention: logits large (|s| up to ~11 in fp16 terms: exp(s) near fp16 overflow)
  p_flush,            // attention: a few dominant keys, most probabilities below fp16's smallest subnormal
};
const char* data_name(Data d);

struct GemmCase {
  kernels::GemmShape shape;
  Data data = Data::normal;
  bool slow = false;       // heavy: runs only under the `slow` label
  std::string id() const;  // "m1_n256_k4096_normal"
};

struct ProjectionCase {
  std::size_t prompt = 8;  // tokens in the prompt prefill that filled the cache
  std::size_t total = 16;  // sequence length at the step checked (cache-OFF GEMM has M = total)
  std::size_t n = 256;     // output features (e.g. kv_heads · head_dim)
  std::size_t k = 1024;    // hidden size
  Data data = Data::normal;
  bool slow = false;
  std::string id() const;  // "p8_t16_n256_k1024_normal"
};

struct NormCase {
  kernels::NormShape shape;
  kernels::NormParams params;
  Data data = Data::normal;
  bool slow = false;
  std::string id() const;  // "r1_d4096_eps1e-06_llama_normal"
};

struct AttentionCase {
  kernels::AttentionCall call;  // the full-prefill (cache-OFF) call: n_q query rows ending at n_kv
  Data data = Data::normal;
  bool slow = false;
  std::string id() const;  // "q16_kv128_d128_h8_gqa2_causal_win0_cap0_sc0_normal"
};

// One case each (the tables below and the kernel sweep's quick set are built from these).
GemmCase gemm_case(std::size_t m, std::size_t n, std::size_t k, Data d = Data::normal, bool slow = false);
ProjectionCase projection_case(std::size_t prompt, std::size_t total, std::size_t n, std::size_t k, Data d,
                               bool slow = false);

// The standard tables (fast and slow cases). Head dims 64/128/256, lengths 1…4096, GQA 1/2/4/8, causal and
// not, windows, softcap, adversarial data.
std::vector<GemmCase> gemm_cases();
std::vector<ProjectionCase> projection_cases();
std::vector<NormCase> norm_cases();
std::vector<AttentionCase> attention_cases();

// The quick attention set (Python's attention_cases("quick"), the pytest plugin's default): ten small cases chosen so
// that together they exercise every property of coverage.hpp that attention_cases() exercises, at about the oracle
// cost of the kernel sweep's quick shapes (which `kvconf run` and the golden baselines keep).
std::vector<AttentionCase> quick_attention_cases();

// Seed of a (rule, case id): FNV-1a of "rule/id", unless the KVCONF_SEED environment variable overrides it.
std::uint64_t seed_for(const std::string& rule, const std::string& case_id);

// Seeded inputs: n values of format f drawn per `data` (deterministic for a seed).
std::vector<float> make_values(std::size_t n, Format f, Data data, std::uint64_t seed, double scale = 1.0);

// The first two moments of one value make_values draws per `data` (before rounding, times `scale`): E[x] and E[x²].
struct DataMoments {
  double mean = 0.0;
  double second = 0.0;
};
DataMoments data_moments(Data data, double scale = 1.0);

}  // namespace kvconf::conformance
