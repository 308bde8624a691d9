// register_mutant_kernels() and mutant_catalogue(): the correct bases and the planted-bug kernels, each
// bug described in one sentence with the conformance rules that must catch it.
#include "kvconf/kernels/mutants.hpp"

#include "base_attention.hpp"
#include "base_gemm.hpp"

namespace kvconf::kernels {
namespace {

using mutants::AttnBug;
using mutants::AttnDesign;
using mutants::GemmBug;
using mutants::GemmDesign;

constexpr std::size_t kBlock = 16;  // Bc of the attention bases
constexpr std::size_t kSplits = 4;  // split-KV partitions of the split base's decode path

struct Entry {
  MutantInfo info;
  AttnBug attn_bug = AttnBug::none;
  GemmBug gemm_bug = GemmBug::none;
  bool split_base = false;  // attention: built on mutant.base.attn.splitkv (decode runs split-KV)
  bool claims_invariant = true;
};

Entry attn(std::string name, AttnBug bug, std::string text, std::vector<std::string> rules, bool split = false,
           bool claims_invariant = true) {
  return Entry{
      {std::move(name), "attention", std::move(text), std::move(rules)}, bug, GemmBug::none, split, claims_invariant};
}
Entry gemm(std::string name, GemmBug bug, std::string text, std::vector<std::string> rules) {
  return Entry{{std::move(name), "gemm", std::move(text), std::move(rules)}, AttnBug::none, bug, false, true};
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      attn("mutant.attn.no_max_subtraction", AttnBug::no_max_subtraction,
           "exponentiates the raw scores without subtracting the running max, so fp16(p) overflows to inf once a "
           "logit exceeds ln(65504) ~ 11.09",
           {"oracle_bound", "two_sided"}),
      gemm("mutant.gemm.fp16_acc_claims_fp32", GemmBug::fp16_accumulation,
           "accumulates in fp16 (HFMA) while KernelInfo and path() claim an fp32 accumulator",
           {"oracle_bound", "two_sided"}),
      attn("mutant.attn.causal_off_by_one", AttnBug::causal_off_by_one,
           "the causal mask hides the key at the query's own position (j < pos instead of j <= pos)",
           {"oracle_bound", "two_sided"}),
      attn("mutant.attn.gqa_modulo", AttnBug::gqa_modulo,
           "query head h reads KV head h % n_kv_heads instead of h / (n_heads / n_kv_heads)",
           {"oracle_bound", "two_sided"}),
      attn("mutant.attn.window_off_by_one", AttnBug::window_off_by_one,
           "the sliding window keeps keys with pos - j <= w instead of pos - j < w (one key too many)",
           {"oracle_bound", "two_sided"}),
      attn("mutant.attn.softcap_missing_decode", AttnBug::softcap_missing_decode,
           "the decode path (q_len = 1) skips the logit softcap that the prefill path applies",
           {"on_off_bound", "oracle_bound", "two_sided", "chunked_bound"}, /*split=*/true,
           /*claims_invariant=*/false),
      attn("mutant.attn.split_combine_unscaled", AttnBug::split_combine_unscaled,
           "the split-KV decode combine adds each split's accumulator and row sum without the exp(m_s - m) "
           "rescale to the common max",
           {"on_off_bound", "oracle_bound", "two_sided", "chunked_bound"}, /*split=*/true,
           /*claims_invariant=*/false),
      attn("mutant.attn.decode_one_ulp_bias", AttnBug::decode_one_ulp_bias,
           "the decode path adds one fp16 ulp to output element (head 0, column 0) of a kernel that claims "
           "cache invariance",
           {"on_off_bitwise", "chunked_bitwise"}),
      attn("mutant.attn.stale_cache_row", AttnBug::stale_cache_row,
           "the decode path reads key/value row n_kv - 2 in place of the newly written row n_kv - 1",
           {"on_off_bound", "on_off_bitwise", "oracle_bound", "two_sided", "chunked_bound", "chunked_bitwise"}),
      attn("mutant.attn.false_cache_invariance", AttnBug::none,
           "decode runs split-KV (4 partitions) while prefill runs one online pass, yet the kernel claims "
           "cache_invariant",
           {"on_off_bitwise", "chunked_bitwise"}, /*split=*/true, /*claims_invariant=*/true),
      attn("mutant.attn.unused_slot_read", AttnBug::unused_slot_read,
           "the PV loop also reads V row n_kv (the first unused cache slot) with a zero weight, so a NaN there "
           "reaches the output (0 * NaN)",
           {"unused_slots"}),
      gemm("mutant.gemm.m1_drops_last_k", GemmBug::m1_drops_last_k,
           "the M = 1 (decode) path sums only the first K - 1 products",
           {"oracle_bound", "two_sided", "on_off_bound", "on_off_bitwise"}),
      gemm("mutant.gemm.m1_splitk_claims_invariant", GemmBug::m1_splitk_invariant,
           "the M = 1 path runs split-K(4) with fp16 slice sums (honestly reported by path() and KernelInfo::partial) "
           "while the kernel claims cache_invariant",
           {"on_off_bitwise"}),
      attn("mutant.attn.capacity_blocks", AttnBug::capacity_blocks,
           "the KV block size is derived from the allocated cache capacity (capacity / 4) in a kernel that "
           "claims cache invariance",
           {"capacity_bitwise"}),
      attn("mutant.attn.ignores_q_offset", AttnBug::ignores_q_offset,
           "query row i is placed at absolute position i (q_offset ignored), so decode and chunked prefill see "
           "the wrong causal prefix",
           {"on_off_bound", "on_off_bitwise", "oracle_bound", "two_sided", "chunked_bound", "chunked_bitwise"}),
  };
  return e;
}

AttnDesign attn_design(std::string name, std::string mirrors, bool split, bool invariant, AttnBug bug) {
  AttnDesign d;
  d.name = std::move(name);
  d.mirrors = std::move(mirrors);
  d.block = kBlock;
  d.decode_splits = split ? kSplits : 0;
  d.claims_cache_invariant = invariant;
  d.bug = bug;
  return d;
}

}  // namespace

std::vector<std::string> mutant_base_names() {
  return {"mutant.base.gemm.seq32", "mutant.base.attn.online", "mutant.base.attn.splitkv"};
}

void register_mutant_kernels(Registry& r) {
  r.add(mutants::make_gemm_kernel(GemmDesign{"mutant.base.gemm.seq32",
                                             "base of the GEMM mutants: fp32 FMA chain in ascending k (G1-like)", true,
                                             GemmBug::none}));
  r.add(mutants::make_attention_kernel(
      attn_design("mutant.base.attn.online",
                  "base of the attention mutants: online softmax, Bc = 16 at key 0, both paths (A1/A7-like)",
                  /*split=*/false, /*invariant=*/true, AttnBug::none)));
  r.add(mutants::make_attention_kernel(attn_design(
      "mutant.base.attn.splitkv", "base of the split-KV mutants: decode runs 4 partitions + lse combine (A2-like)",
      /*split=*/true, /*invariant=*/false, AttnBug::none)));
  for (const Entry& e : entries()) {
    if (e.info.kind == "gemm") {
      r.add(
          mutants::make_gemm_kernel(GemmDesign{e.info.name, "mutant: " + e.info.bug, e.claims_invariant, e.gemm_bug}));
    } else {
      r.add(mutants::make_attention_kernel(
          attn_design(e.info.name, "mutant: " + e.info.bug, e.split_base, e.claims_invariant, e.attn_bug)));
    }
  }
}

std::vector<MutantInfo> mutant_catalogue() {
  std::vector<MutantInfo> out;
  for (const Entry& e : entries()) out.push_back(e.info);
  return out;
}

}  // namespace kvconf::kernels
