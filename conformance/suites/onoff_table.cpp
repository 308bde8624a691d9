// kvconf_onoff_table: prints the Markdown table of docs/KERNELS.md — for every CPU kernel, the measured cache-ON vs
// cache-OFF difference (max |on − off| in ulps of the output format at the larger of the two, and normwise
// max |on − off| / max |off|) on standard shapes: the K/V projection
// (k 4096, n 1024, prompt 32, total 64: all 64 rows) and the attention decode row vs the last row of a 16-row
// prefill (d 128, n_kv 512 and 4096, GQA 1 and 4, causal). Max over 3 seeds per shape.
// With --torch: the same for the libtorch kernels (kernels/torch), and a second table, their oracle accuracy on
// fixed cases (worst element's error, its bound, headroom, over 3 seeds) with the SDPA backend each call took.
// Usage: kvconf_onoff_table [--quick] [--torch]   (--quick: smaller projection k/n, for a smoke run)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/registry.hpp"
#include "kvconf/kernels/torch.hpp"

namespace {

using namespace kvconf;
using namespace kvconf::conformance;

constexpr int kSeeds = 3;

std::uint64_t nth_seed(std::uint64_t base, int i) {
  return base + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i);
}

struct Row {
  std::string kernel, shape;
  OnOffDiff d;
};

void merge(OnOffDiff& acc, const OnOffDiff& x) {
  acc.elements += x.elements;
  acc.differing += x.differing;
  acc.max_ulp = std::max(acc.max_ulp, x.max_ulp);
  acc.max_abs = std::max(acc.max_abs, x.max_abs);
  acc.max_rel = std::max(acc.max_rel, x.max_rel);
  if (acc.paths.empty()) acc.paths = x.paths;
}

AttentionCase attention_shape(std::size_t n_kv, std::size_t kv_heads) {
  AttentionCase c;
  c.call.shape = {16, n_kv, 8, kv_heads, 128, 128};
  c.call.params.q_offset = static_cast<std::int64_t>(n_kv - 16);
  c.call.params.causal = true;
  c.call.params.scale = static_cast<double>(static_cast<float>(1.0 / 11.313708498984761));  // fl32(1/√128)
  return c;
}

}  // namespace

// The worst oracle_bound result over 3 seeds of one kernel on one case ("–" when unsupported).
struct OracleRow {
  std::string kernel, case_id, note;
  CheckResult worst;
  bool ran = false;
};

template <class Check>
OracleRow oracle_row(const std::string& kernel, const std::string& case_id, Check check) {
  OracleRow row{kernel, case_id, "", {}, false};
  for (int i = 0; i < kSeeds; ++i) {
    for (const CheckResult& r : check(nth_seed(seed_for("oracle_table", case_id), i))) {
      if (r.rule != "oracle_bound") continue;
      if (!row.ran || r.headroom < row.worst.headroom) row.worst = r;
      row.ran = true;
    }
  }
  std::fprintf(stderr, "done oracle %s %s\n", kernel.c_str(), case_id.c_str());
  return row;
}

void print_oracle_table(const kernels::Registry& reg) {
  std::vector<OracleRow> rows;
  GemmCase g1, g2;
  g1.shape = {1, 64, 4096};
  g2.shape = {16, 64, 11008};
  for (const auto& k : reg.gemm())
    for (const GemmCase& c : {g1, g2})
      rows.push_back(
          oracle_row(k.info.name, c.id(), [&](std::uint64_t s) { return check_gemm_matches_oracle(k, c, s); }));
  NormCase n1;
  n1.shape = {4, 4096};
  n1.params.eps = 1e-5f;
  for (const auto& k : reg.norm())
    rows.push_back(
        oracle_row(k.info.name, n1.id(), [&](std::uint64_t s) { return check_norm_matches_oracle(k, n1, s); }));
  for (std::size_t n_kv : {std::size_t{512}, std::size_t{4096}}) {
    const AttentionCase c = attention_shape(n_kv, 2);
    for (const auto& k : reg.attention()) {
      OracleRow row =
          oracle_row(k.info.name, c.id(), [&](std::uint64_t s) { return check_attention_matches_oracle(k, c, s); });
      kernels::AttentionCall dec = c.call;
      dec.shape.n_q = 1;
      dec.params.q_offset = static_cast<std::int64_t>(n_kv - 1);
      row.note =
          "prefill: " + kernels::torch_sdpa_choice(k, c.call) + ", decode: " + kernels::torch_sdpa_choice(k, dec);
      rows.push_back(row);
    }
  }
  std::printf(
      "\n| kernel | case id | oracle error (worst element) | its bound | headroom | result | SDPA backend taken |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const OracleRow& r : rows) {
    if (!r.ran) {
      std::printf("| %s | %s | – | – | – | not run | %s |\n", r.kernel.c_str(), r.case_id.c_str(), r.note.c_str());
      continue;
    }
    std::printf("| %s | %s | %.3g | %.3g | %.3f | %s | %s |\n", r.kernel.c_str(), r.case_id.c_str(), r.worst.error,
                r.worst.bound, r.worst.headroom, r.worst.pass ? "pass" : "FAIL", r.note.c_str());
  }
}

int main(int argc, char** argv) {
  bool quick = false, torch = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--torch") == 0)
      torch = true;
    else {
      std::fprintf(stderr, "kvconf_onoff_table: unknown argument '%s' (expected --quick or --torch)\n", argv[i]);
      return 2;
    }
  }
  if (torch && kernels::torch_unavailable()) {
    std::fprintf(stderr, "kvconf_onoff_table: --torch: %s\n", kernels::torch_unavailable()->c_str());
    return 2;
  }
  const kernels::Registry reg = torch ? kernels::torch_registry() : kernels::cpu_registry();
  if (torch) std::printf("%s\n\n", kernels::torch_description().c_str());
  std::vector<Row> rows;

  ProjectionCase pc;
  pc.prompt = 32;
  pc.total = 64;
  pc.n = quick ? 64 : 1024;
  pc.k = quick ? 512 : 4096;
  for (const auto& k : reg.gemm()) {
    Row r{k.info.name, "proj " + pc.id(), {}};
    bool ok = true;
    for (int i = 0; i < kSeeds && ok; ++i) {
      try {
        merge(r.d, measure_projection_on_off(k, pc, nth_seed(seed_for("onoff_table", pc.id()), i)));
      } catch (const std::exception& e) {
        r.d.paths = std::string("unsupported: ") + e.what();
        ok = false;
      }
    }
    rows.push_back(r);
    std::fprintf(stderr, "done %s %s\n", r.kernel.c_str(), r.shape.c_str());
  }
  for (std::size_t n_kv : {std::size_t{512}, std::size_t{4096}})
    for (std::size_t kvh : {std::size_t{8}, std::size_t{2}}) {
      const AttentionCase c = attention_shape(n_kv, kvh);
      for (const auto& k : reg.attention()) {
        Row r{k.info.name, "attn " + c.id(), {}};
        if (auto why = k.supports(c.call)) {
          r.d.paths = "unsupported: " + *why;
        } else {
          for (int i = 0; i < kSeeds; ++i)
            merge(r.d, measure_attention_on_off(k, c, nth_seed(seed_for("onoff_table", c.id()), i)));
        }
        rows.push_back(r);
        std::fprintf(stderr, "done %s %s\n", r.kernel.c_str(), r.shape.c_str());
      }
    }

  std::printf(
      "| kernel | shape (case id) | differing / elements | max ulp | max rel (normwise) | paths (ON vs OFF) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.d.elements == 0) {
      std::printf("| %s | %s | – | – | – | %s |\n", r.kernel.c_str(), r.shape.c_str(), r.d.paths.c_str());
      continue;
    }
    std::printf("| %s | %s | %zu / %zu | %.3g | %.3g | %s |\n", r.kernel.c_str(), r.shape.c_str(), r.d.differing,
                r.d.elements, r.d.max_ulp, r.d.max_rel, r.d.paths.c_str());
  }
  if (torch) print_oracle_table(reg);
  return 0;
}
