// Golden baselines (DESIGN.md "golden/", docs/GOLDEN.md): what a fixed run of the deterministic CPU profiles and the
// quick kernel sweep produced, with provenance, and the comparison that gates kernel changes — token sequences per
// path must be equal, each rule's pass/fail must not change, and error statistics must stay inside the file's band.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvconf/results/records.hpp"

namespace kvconf::golden {

inline constexpr const char* kSchema = "kvconf.golden/1";
inline constexpr const char* kUpdateCommand = "kvconf golden update";
inline constexpr const char* kKernelFile = "kernels.json";  // the quick sweep's error statistics
std::string token_file_name(const std::string& profile);    // "tokens-<profile>.json"

struct Provenance {
  std::string schema = kSchema;
  std::string kvconf_version;
  std::string profile;     // the numerics profile of a token file; "kernel-sweep-quick" for the kernel file
  std::uint64_t seed = 0;  // token files: the sample seed of the draws; kernel file: the KVCONF_SEED override, or 0
                           // when each rule's seed derives from its case id (recorded per rule)
  std::string date;        // UTC, ISO 8601
  std::string command;     // the command that wrote the file
};

// How far an error statistic may move. Deterministic CPU kernels reproduce bit for bit, so the CPU band only absorbs
// printing/parsing round-off (1e-12 relative); a GPU baseline (golden/<device>/) carries a wider band of its own,
// since GPU exp/division are not bit-specified (docs/GOLDEN.md). Pass/fail of a rule is compared always.
struct Band {
  double error_rel = 1e-12;   // |new − old| <= error_rel · max(|old|, |new|), for error, bound and ON/OFF max ulp
  bool deterministic = true;  // token sequences and the count of ON/OFF differing elements compared exactly
};

// One run pair's tokens: both paths, both regimes.
struct TokenRun {
  std::string key;  // RunPairRecord::key(): "model|profile|strategy|seed|prompt_id"
  std::vector<int> free_on, free_off, teacher_on, teacher_off;
};

struct RuleStat {
  std::string rule;
  bool pass = false;
  double error = 0.0, bound = 0.0;
  std::uint64_t seed = 0;
};

// One kernel case's statistics.
struct KernelStat {
  std::string key;      // KernelCaseRecord::key(): "kernel|case_id"
  std::string skipped;  // non-empty: unsupported (the reason)
  std::vector<RuleStat> rules;
  std::optional<std::size_t> on_off_differing;  // elements whose bits differ between cache-ON and cache-OFF
  std::optional<double> on_off_max_ulp;
};

struct Baseline {
  Provenance provenance;
  Band band;
  std::vector<TokenRun> tokens;
  std::vector<KernelStat> kernels;
};

// One difference between a baseline and a run.
struct Change {
  std::string key;    // the run pair or kernel case
  std::string field;  // "free.tokens_on[3]", "rule oracle_bound.pass", "rule oracle_bound.error", "present", ...
  std::string old_value, new_value;
};
std::string describe(const Change& c);  // "key: field: old -> new"

TokenRun token_run_of(const results::RunPairRecord& r);
KernelStat kernel_stat_of(const results::KernelCaseRecord& r);
Baseline make_baseline(Provenance p, const std::vector<results::RunPairRecord>& pairs,
                       const std::vector<results::KernelCaseRecord>& kernels, Band band = {});

// Compares one entry with a fresh record of the same key (changes of that entry only).
std::vector<Change> compare(const TokenRun& golden, const results::RunPairRecord& now, const Band& band);
std::vector<Change> compare(const KernelStat& golden, const results::KernelCaseRecord& now, const Band& band);
// Every entry of the baseline against the run: changed entries, entries the run lacks ("present": yes -> no) and
// entries the baseline lacks ("present": no -> yes).
std::vector<Change> check(const Baseline& b, const std::vector<results::RunPairRecord>& pairs,
                          const std::vector<results::KernelCaseRecord>& kernels);

// A golden file that cannot be used (missing, corrupted, wrong schema): the message names the file and the field and
// tells the update command.
struct BadGoldenFile : std::runtime_error {
  using std::runtime_error::runtime_error;
};

nlohmann::json to_json(const Baseline& b);
// `file` only names the source in error messages.
Baseline baseline_from_json(const nlohmann::json& j, const std::string& file);
Baseline read_baseline(const std::filesystem::path& file);                  // BadGoldenFile
void write_baseline(const std::filesystem::path& file, const Baseline& b);  // atomic; std::runtime_error on failure

std::string utc_now_iso8601();

}  // namespace kvconf::golden
