// Cpu/GoldenConformance.MatchesGolden/<case>: the committed CPU baselines (golden/baselines/cpu) against a fresh run —
// one test per kernel case of the quick sweep (kernels.json: pass/fail equal, errors inside the band) and one per
// profile's token file (tokens-<profile>.json: every token sequence of both paths equal), and of the real model's
// (tokens-smollm2-135m-<profile>.json, skipped with the reason when the model is absent). A missing or unreadable
// baseline file fails GoldenBaselines.FilesReadable with the update command.
#include <gtest/gtest.h>

#include <cctype>
#include <map>

#include "golden_command.hpp"
#include "kvconf/conformance/sweep.hpp"
#include "kvconf/golden/golden.hpp"

namespace kvconf::golden {
namespace {

const std::filesystem::path kDir = KVCONF_GOLDEN_DIR;

// The baseline files as found (nullopt when missing or unreadable: BaselineFilesReadable reports why).
std::optional<Baseline> load(const std::string& name) {
  try {
    return read_baseline(kDir / name);
  } catch (const BadGoldenFile&) {
    return std::nullopt;
  }
}

const std::optional<Baseline>& kernel_baseline() {
  static const std::optional<Baseline> b = load(kKernelFile);
  return b;
}

std::string sanitize(const std::string& s) {
  std::string out = s;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return out;
}

struct GoldenCase {
  std::string file;           // kernels.json or tokens-<prefix><profile>.json
  std::string key;            // kernel case key; empty for a token file
  std::string profile;        // token file's profile
  tools::GoldenConfig config;   // token file's configuration
  std::string name() const {  // "<kernel>__<case_id>" (as the suites) or "tokens_<prefix><profile>", others as _
    if (key.empty()) return "tokens_" + sanitize(config.file_prefix + profile);
    const auto bar = key.find('|');
    return sanitize(key.substr(0, bar)) + "__" + sanitize(key.substr(bar + 1));
  }
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.file << (c.key.empty() ? "" : " " + c.key); }

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> v;
  if (const auto& b = kernel_baseline())
    for (const auto& k : b->kernels) v.push_back({kKernelFile, k.key, "", {}});
  for (const auto& g : tools::golden_token_configs(false))
    for (const auto& p : g.profiles) v.push_back({g.token_file(p), "", p, g});
  return v;
}

TEST(GoldenBaselines, FilesReadable) {
  std::vector<std::string> files = {kKernelFile};
  for (const auto& g : tools::golden_token_configs(false))
    for (const auto& p : g.profiles) files.push_back(g.token_file(p));
  for (const auto& f : files) {
    try {
      read_baseline(kDir / f);
    } catch (const BadGoldenFile& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Every item of the quick sweep has a baseline entry (a new kernel or case needs `kvconf golden update`).
TEST(GoldenBaselines, EverySweepItemHasABaseline) {
  const auto& b = kernel_baseline();
  if (!b) GTEST_FAIL() << "no readable " << (kDir / kKernelFile) << "; run `kvconf golden update`";
  std::map<std::string, bool> have;
  for (const auto& k : b->kernels) have[k.key] = true;
  conformance::SweepOptions o;
  o.quick = true;
  const auto reg = tools::golden_registry();
  for (const auto& item : conformance::sweep_plan(reg, o))
    EXPECT_TRUE(have.count(item.key())) << item.key() << " has no golden entry; run `kvconf golden update`";
}

class GoldenConformance : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenConformance, MatchesGolden) {
  const GoldenCase& c = GetParam();
  if (!c.key.empty()) {
    const Baseline& b = *kernel_baseline();
    const KernelStat* stat = nullptr;
    for (const auto& k : b.kernels)
      if (k.key == c.key) stat = &k;
    ASSERT_NE(stat, nullptr);
    conformance::SweepOptions o;
    o.quick = true;
    static const kernels::Registry reg = tools::golden_registry();
    const conformance::SweepItem* item = nullptr;
    static const auto plan = conformance::sweep_plan(reg, o);
    for (const auto& it : plan)
      if (it.key() == c.key) item = &it;
    ASSERT_NE(item, nullptr) << c.key << " is in the baseline but no longer in the quick sweep";
    const auto rec = conformance::run_sweep_item(reg, *item, o);
    for (const auto& r : rec.rules) {
      ::testing::Test::RecordProperty(r.rule + ".error", std::to_string(r.error));
      ::testing::Test::RecordProperty(r.rule + ".seed", std::to_string(r.seed));
    }
    std::string changes;
    for (const auto& ch : compare(*stat, rec, b.band)) changes += describe(ch) + "\n";
    EXPECT_TRUE(changes.empty()) << "changed against " << (kDir / kKernelFile)
                                 << " (if intended: kvconf golden update):\n"
                                 << changes;
    return;
  }
  if (const auto why = tools::golden_config_missing(c.config)) GTEST_SKIP() << *why;
  Baseline b;
  try {
    b = read_baseline(kDir / c.file);
  } catch (const BadGoldenFile& e) {
    GTEST_FAIL() << e.what();
  }
  const auto pairs = tools::golden_token_records(c.config, c.profile);
  std::string changes;
  for (const auto& ch : check(b, pairs, {})) changes += describe(ch) + "\n";
  EXPECT_FALSE(pairs.empty()) << "the golden run produced no run pairs";
  EXPECT_TRUE(changes.empty()) << "changed against " << (kDir / c.file) << " (if intended: kvconf golden update):\n"
                               << changes;
}

struct CaseName {
  std::string operator()(const ::testing::TestParamInfo<GoldenCase>& p) const { return p.param.name(); }
};

INSTANTIATE_TEST_SUITE_P(Cpu, GoldenConformance, ::testing::ValuesIn(golden_cases()), CaseName{});
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenConformance);

}  // namespace
}  // namespace kvconf::golden
