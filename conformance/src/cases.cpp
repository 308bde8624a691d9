// The conformance case tables (GEMM, projection, RMSNorm, attention), their stable ids, per-rule seeds
// (FNV-1a of "rule/id", KVCONF_SEED overrides) and the seeded input generators.
#include "kvconf/conformance/cases.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/numerics/number_text.hpp"

namespace kvconf::conformance {

namespace {

// Scores are q·k/√d with q_i, k_i ~ N(0, σ²): their spread is σ² (independent of d). These σ give
// logits with max ≈ 9–14 over 128–4096 keys (near_exp_overflow: e^11 ≈ 6e4 ≈ fp16's largest finite value)
// and logit gaps ≈ 20 per standard deviation (p_flush: e^-17 < 2^-24, fp16's smallest subnormal).
constexpr double kNearExpOverflowSigma = 1.9;
constexpr double kPFlushSigma = 4.5;

// Shorthands for the tables below.
GemmCase gemm(std::size_t m, std::size_t n, std::size_t k, Data d, bool slow = false) {
  return gemm_case(m, n, k, d, slow);
}

ProjectionCase proj(std::size_t prompt, std::size_t total, std::size_t n, std::size_t k, Data d, bool slow = false) {
  return projection_case(prompt, total, n, k, d, slow);
}

NormCase norm(std::size_t rows, std::size_t d, float eps, bool gemma, Data data, bool slow = false) {
  NormCase c;
  c.shape = {rows, d};
  c.params.eps = eps;
  c.params.one_plus_weight = gemma;
  c.data = data;
  c.slow = slow;
  return c;
}

struct AttnSpec {
  std::size_t n_q, n_kv, d, heads, kv_heads;
  bool causal = true;
  std::int64_t window = 0;
  std::size_t capacity = 0;
  double softcap = 0.0;
  Data data = Data::normal;
  bool slow = false;
};

AttentionCase attn(const AttnSpec& s) {
  AttentionCase c;
  c.call.shape = {s.n_q, s.n_kv, s.heads, s.kv_heads, s.d, s.d};
  c.call.params.q_offset = static_cast<std::int64_t>(s.n_kv - s.n_q);
  c.call.params.causal = s.causal;
  c.call.params.window = s.window;
  // The float a kernel multiplies by: 1/√d rounded to fp32 (exact for d = 64, 256; Gemma-2's query scale
  // 256^-0.5 is 1/16).
  c.call.params.scale = static_cast<double>(static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d))));
  c.call.params.softcap = s.softcap;
  c.call.capacity = s.capacity;
  c.data = s.data;
  c.slow = s.slow;
  return c;
}

}  // namespace

const char* data_name(Data d) {
  switch (d) {
    case Data::normal:
      return "normal";
    case Data::same_sign:
      return "same_sign";
    case Data::wide_range:
      return "wide_range";
    case Data::near_exp_overflow:
      return "near_exp_overflow";
    case Data::p_flush:
      return "p_flush";
  }
  return "?";
}

// Ids are built by appending (GCC 12 warns falsely, -Wrestrict, on "literal" + std::string chains).
std::string GemmCase::id() const {
  std::string id = "m";
  id += std::to_string(shape.m);
  id += "_n";
  id += std::to_string(shape.n);
  id += "_k";
  id += std::to_string(shape.k);
  id += "_";
  id += data_name(data);
  return id;
}

std::string ProjectionCase::id() const {
  std::string id = "p";
  id += std::to_string(prompt);
  id += "_t";
  id += std::to_string(total);
  id += "_n";
  id += std::to_string(n);
  id += "_k";
  id += std::to_string(k);
  id += "_";
  id += data_name(data);
  return id;
}

std::string NormCase::id() const {
  std::string id = "r";
  id += std::to_string(shape.rows);
  id += "_d";
  id += std::to_string(shape.d);
  id += "_eps";
  id += num_option(static_cast<double>(params.eps));
  id += params.one_plus_weight ? "_gemma_" : "_llama_";
  id += data_name(data);
  return id;
}

std::string AttentionCase::id() const {
  const auto& s = call.shape;
  const auto& p = call.params;
  std::string id = "q";
  id += std::to_string(s.n_q);
  id += "_kv";
  id += std::to_string(s.n_kv);
  id += "_d";
  id += std::to_string(s.d);
  if (s.d_v != s.d) {
    id += "_dv";
    id += std::to_string(s.d_v);
  }
  id += "_h";
  id += std::to_string(s.n_heads);
  id += "_gqa";
  id += std::to_string(s.n_kv_heads ? s.n_heads / s.n_kv_heads : 0);
  id += p.causal ? "_causal" : "_noncausal";
  id += "_win";
  id += std::to_string(p.window);
  id += "_cap";
  id += std::to_string(call.capacity);
  id += "_sc";
  id += num_option(p.softcap);
  id += "_";
  id += data_name(data);
  return id;
}

GemmCase gemm_case(std::size_t m, std::size_t n, std::size_t k, Data d, bool slow) {
  GemmCase c;
  c.shape = {m, n, k};
  c.data = d;
  c.slow = slow;
  return c;
}

ProjectionCase projection_case(std::size_t prompt, std::size_t total, std::size_t n, std::size_t k, Data d, bool slow) {
  ProjectionCase c;
  c.prompt = prompt;
  c.total = total;
  c.n = n;
  c.k = k;
  c.data = d;
  c.slow = slow;
  return c;
}

// GEMM: decode (m = 1, the GEMV paths) and prefill shapes, reduction lengths of the models in scope
// (1024 … 4096; the real MLP and hidden reductions Llama-2 11008, Gemma-2 2304 and Mistral 14336 at M = 1 by
// default, prefill-sized slow), split-K-prone tall-k shapes. 11008 and 2304 are not multiples of the 512-deep
// split-K slice, and K = 1000 of neither the 64-deep tiles nor the GEMV's 64 half2 lanes: the tails run.
std::vector<GemmCase> gemm_cases() {
  return {
      gemm(1, 256, 1024, Data::normal),
      gemm(16, 128, 1024, Data::normal),
      gemm(1, 64, 4096, Data::normal),
      gemm(33, 64, 4096, Data::normal),
      gemm(1, 64, 4096, Data::same_sign),
      gemm(8, 64, 2048, Data::wide_range),
      gemm(3, 96, 256, Data::same_sign),
      gemm(1, 16, 11008, Data::normal),
      gemm(1, 16, 2304, Data::same_sign),
      gemm(1, 16, 14336, Data::wide_range),
      gemm(1, 24, 1000, Data::normal),
      gemm(64, 1024, 4096, Data::normal, true),
      gemm(1, 4096, 4096, Data::normal, true),
      gemm(32, 256, 11008, Data::same_sign, true),
      gemm(7, 256, 14336, Data::wide_range, true),
      gemm(128, 512, 2304, Data::normal, true),
  };
}

// Projection K/V rows (the paper's Experiment 3): prompt prefill (M = prompt), decode steps (M = 1) and the
// full-prefix recompute (M = total).
std::vector<ProjectionCase> projection_cases() {
  return {
      proj(8, 16, 256, 1024, Data::normal),         proj(5, 9, 128, 4096, Data::normal),
      proj(8, 12, 64, 2048, Data::same_sign),       proj(4, 8, 64, 2048, Data::wide_range),
      proj(3, 5, 16, 11008, Data::normal),    // Llama-2's MLP down-projection reduction at decode (M = 1)
      proj(3, 5, 16, 2304, Data::same_sign),  // Gemma-2-2B's hidden size
      proj(32, 64, 1024, 4096, Data::normal, true), proj(100, 130, 512, 4096, Data::same_sign, true),
      proj(16, 48, 256, 2304, Data::normal, true),
  };
}

// RMSNorm: Llama (weight after a rounding, eps 1e-5/1e-6) and Gemma-2 ((1 + w), eps 1e-6) styles,
// decode (1 row) and prefill rows, hidden sizes 64 (stories260K) … 4096.
std::vector<NormCase> norm_cases() {
  return {
      norm(1, 4096, 1e-6f, false, Data::normal),        norm(16, 4096, 1e-5f, false, Data::normal),
      norm(1, 2304, 1e-6f, true, Data::normal),         norm(8, 2304, 1e-6f, true, Data::wide_range),
      norm(4, 64, 1e-5f, false, Data::same_sign),       norm(1, 4096, 1e-6f, false, Data::wide_range),
      norm(64, 4096, 1e-6f, false, Data::normal, true), norm(32, 2304, 1e-6f, true, Data::same_sign, true),
  };
}

// Attention: head dims 64/128/256, n_kv 1 … 4096, GQA 1/2/4/8 (8 query heads over 8/4/2/1 KV heads),
// causal and not, sliding windows, Gemma-2's softcap 50, spare cache capacity, adversarial data.
std::vector<AttentionCase> attention_cases() {
  using D = Data;
  return {
      // default set: the MPFR oracle costs about n_q·heads·n_kv·d; these stay small.
      attn({16, 128, 128, 8, 8}),                     // MHA (Llama-2)
      attn({16, 128, 128, 8, 2}),                     // GQA 4 (Mistral)
      attn({8, 64, 64, 8, 1}),                        // MQA (GQA 8)
      attn({16, 160, 256, 8, 4, true, 64, 0, 50.0}),  // Gemma-2: d 256, GQA 2, window, softcap
      attn({1, 1, 128, 4, 2}),                        // first token: one key
      attn({1, 512, 128, 8, 2}),                      // decode over a 512-row cache
      attn({16, 96, 64, 4, 2, false}),                // non-causal
      attn({12, 80, 64, 4, 4, false, 16}),            // non-causal symmetric window
      attn({16, 200, 128, 4, 2, true, 32, 256}),      // sliding window, spare capacity
      attn({16, 256, 128, 8, 4, true, 0, 0, 0.0, D::near_exp_overflow}),
      attn({16, 128, 128, 8, 4, true, 0, 0, 0.0, D::p_flush}),
      attn({16, 128, 256, 8, 4, true, 0, 0, 50.0, D::p_flush}),  // softcap binds
      attn({16, 128, 128, 4, 1, true, 0, 0, 0.0, D::same_sign}),
      attn({16, 128, 128, 4, 2, true, 0, 0, 0.0, D::wide_range}),
      // slow: long caches (n_kv >= 1024).
      attn({64, 1024, 128, 8, 2, true, 0, 0, 0.0, D::normal, true}),
      attn({16, 4096, 128, 8, 8, true, 0, 0, 0.0, D::normal, true}),
      attn({16, 4096, 128, 8, 2, true, 0, 0, 0.0, D::normal, true}),
      attn({1, 4096, 128, 8, 1, true, 0, 0, 0.0, D::normal, true}),
      attn({16, 4096, 256, 8, 4, true, 4096, 4352, 50.0, D::normal, true}),  // Gemma-2 local layer at its window
      attn({16, 2048, 256, 8, 4, true, 0, 0, 50.0, D::p_flush, true}),
      attn({32, 1024, 64, 8, 1, false, 0, 0, 0.0, D::near_exp_overflow, true}),
      attn({16, 1024, 128, 8, 4, true, 0, 0, 0.0, D::wide_range, true}),
      attn({16, 2048, 128, 8, 2, true, 1000, 0, 0.0, D::same_sign, true}),
  };
}

// The quick set: each case chosen for the properties it adds (coverage.hpp; coverage_test checks that these cover every
// property of attention_cases()), 4 query heads and few rows so that the oracle's cost, n_q·heads·n_kv·d summed over
// the cases, stays that of the sweep's 9 quick shapes (3.1e6 against 3.3e6). The first two are the sweep's first two.
std::vector<AttentionCase> quick_attention_cases() {
  using D = Data;
  return {
      attn({4, 16, 64, 4, 4}),                                           // MHA, d 64
      attn({4, 64, 64, 4, 1}),                                           // MQA
      attn({8, 200, 128, 4, 2, true, 32, 256}),                          // GQA 2 × 2 KV heads, window, spare capacity,
                                                                         // chunks of 4 rows, a partial tile of 64
      attn({4, 512, 128, 4, 2}),                                         // a long cache
      attn({4, 128, 256, 4, 2, true, 0, 0, 50.0, D::p_flush}),           // d 256, softcap binds, p flushed to zero
      attn({4, 96, 64, 4, 2, false, 16}),                                // non-causal, symmetric window
      attn({4, 128, 128, 4, 2, true, 0, 0, 0.0, D::near_exp_overflow}),  // scores near fp16's exp overflow
      attn({4, 64, 128, 4, 2, true, 0, 0, 0.0, D::same_sign}),           // no cancellation, scores near √d
      attn({4, 64, 128, 4, 2, true, 0, 0, 0.0, D::wide_range}),          // wide dynamic range
      attn({1, 1, 128, 4, 2}),                                           // first token: one key, one row
  };
}

std::uint64_t seed_for(const std::string& rule, const std::string& case_id) {
  if (const char* s = std::getenv("KVCONF_SEED"); s != nullptr && *s != '\0') return std::strtoull(s, nullptr, 0);
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](unsigned char ch) {
    h ^= ch;
    h *= 1099511628211ull;
  };
  for (unsigned char ch : rule) mix(ch);
  mix('/');
  for (unsigned char ch : case_id) mix(ch);
  return h;
}

std::vector<float> make_values(std::size_t n, Format f, Data data, std::uint64_t seed, double scale) {
  if (f != Format::fp16 && f != Format::bf16 && f != Format::fp32)
    throw std::invalid_argument("kvconf::conformance::make_values: format must be fp16, bf16 or fp32");
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  std::vector<float> x(n);
  for (auto& v : x) {
    double r = 0.0;
    switch (data) {
      case Data::normal:
        r = nd(g);
        break;
      case Data::same_sign:
        r = 0.5 + ud(g);
        break;
      case Data::wide_range:
        r = std::ldexp(nd(g), 0) * std::exp2(-8.0 + 16.0 * ud(g));
        break;
      case Data::near_exp_overflow:
        r = kNearExpOverflowSigma * nd(g);
        break;
      case Data::p_flush:
        r = kPFlushSigma * nd(g);
        break;
    }
    v = kernels::round_double(f, r * scale);
  }
  return x;
}

DataMoments data_moments(Data data, double scale) {
  DataMoments m;
  switch (data) {
    case Data::normal:
      m = {0.0, 1.0};
      break;
    case Data::same_sign:  // U(0.5, 1.5): mean 1, variance 1/12
      m = {1.0, 1.0 + 1.0 / 12.0};
      break;
    case Data::wide_range:  // E[z²]·E[2^(2(16u − 8))] = ∫₀¹ 2^(32u − 16) du = (2^16 − 2^-16) / (32 ln 2)
      m = {0.0, (0x1p16 - 0x1p-16) / (32.0 * std::log(2.0))};
      break;
    case Data::near_exp_overflow:
      m = {0.0, kNearExpOverflowSigma * kNearExpOverflowSigma};
      break;
    case Data::p_flush:
      m = {0.0, kPFlushSigma * kPFlushSigma};
      break;
  }
  return {m.mean * scale, m.second * scale * scale};
}

}  // namespace kvconf::conformance
