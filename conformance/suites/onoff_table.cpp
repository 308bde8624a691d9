// kvconf_onoff_table: prints the Markdown table of docs/KERNELS.md — for every CPU kernel, the measured cache-ON vs
// cache-OFF difference (max |on − off| in ulps of the output format at the larger of the two, and normwise
// max |on − off| / max |off|) on standard shapes: the K/V projection
// (k 4096, n 1024, prompt 32, total 64: all 64 rows) and the attention decode row vs the last row of a 16-row
// prefill (d 128, n_kv 512 and 4096, GQA 1 and 4, causal). Max over 3 seeds per shape.
// Usage: kvconf_onoff_table [--quick]   (--quick: smaller projection k/n, for a smoke run)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kvconf/conformance/cases.hpp"
#include "kvconf/conformance/checks.hpp"
#include "kvconf/kernels/registry.hpp"

namespace {

using namespace kvconf;
using namespace kvconf::conformance;

constexpr int kSeeds = 3;

std::uint64_t nth_seed(std::uint64_t base, int i) { return base + 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(i); }

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

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const kernels::Registry reg = kernels::cpu_registry();
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
          for (int i = 0; i < kSeeds; ++i) merge(r.d, measure_attention_on_off(k, c, nth_seed(seed_for("onoff_table", c.id()), i)));
        }
        rows.push_back(r);
        std::fprintf(stderr, "done %s %s\n", r.kernel.c_str(), r.shape.c_str());
      }
    }

  std::printf("| kernel | shape (case id) | differing / elements | max ulp | max rel (normwise) | paths (ON vs OFF) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.d.elements == 0) {
      std::printf("| %s | %s | – | – | – | %s |\n", r.kernel.c_str(), r.shape.c_str(), r.d.paths.c_str());
      continue;
    }
    std::printf("| %s | %s | %zu / %zu | %.3g | %.3g | %s |\n", r.kernel.c_str(), r.shape.c_str(), r.d.differing,
                r.d.elements, r.d.max_ulp, r.d.max_rel, r.d.paths.c_str());
  }
  return 0;
}
