// The golden library on synthetic records: an equal run passes; a changed token, a rule whose pass/fail flips, an
// error outside the band, a missing or new entry are reported with key, field, old and new; files round-trip; a
// corrupted file, a wrong schema or a missing field is an error naming the file and field and the update command.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "kvconf/golden/golden.hpp"
#include "temp_dir.hpp"

namespace kvconf::golden {
namespace {

using results::CheckResult;
using results::KernelCaseRecord;
using results::OnOffDiff;
using results::RunPairRecord;

RunPairRecord pair(const std::string& prompt) {
  RunPairRecord r;
  r.model = "fixture:llama2-tiny";
  r.profile = "fp16-eager";
  r.strategy = "greedy";
  r.prompt_id = prompt;
  r.free.tokens_on = {5, 9, 13, 2, 7};
  r.free.tokens_off = {5, 9, 13, 2, 8};
  r.teacher.tokens_on = {5, 9, 13, 2, 7};
  r.teacher.tokens_off = {5, 9, 13, 2, 7};
  return r;
}

KernelCaseRecord kcase(const std::string& kernel) {
  KernelCaseRecord r;
  r.kernel = kernel;
  r.kind = "attention";
  r.case_id = "q4_kv16_d64_h4_gqa1_causal_win0_cap0_sc0_normal";
  CheckResult a;
  a.rule = "oracle_bound";
  a.pass = true;
  a.error = 3.0517578125e-05;
  a.bound = 1.2e-3;
  a.seed = 77;
  CheckResult b;
  b.rule = "on_off_bitwise";
  b.pass = true;
  b.error = 0.0;
  b.bound = 0.0;
  b.headroom = 1.0;
  b.seed = 78;
  r.rules = {a, b};
  OnOffDiff d;
  d.elements = 256;
  d.differing = 3;
  d.max_ulp = 1.0;
  r.on_off = d;
  return r;
}

Provenance prov() {
  Provenance p;
  p.kvconf_version = "0.0-test";
  p.profile = "fp16-eager";
  p.seed = 0;
  p.date = "2025-01-01T00:00:00Z";
  p.command = "kvconf golden update --device cpu";
  return p;
}

struct Records {
  std::vector<RunPairRecord> pairs = {pair("ids:00"), pair("ids:01")};
  std::vector<KernelCaseRecord> kernels = {kcase("cpu.attn.a"), kcase("cpu.attn.b")};
};

TEST(Golden, EqualRunHasNoChanges) {
  const Records run;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  EXPECT_EQ(b.tokens.size(), 2u);
  EXPECT_EQ(b.kernels.size(), 2u);
  EXPECT_TRUE(check(b, run.pairs, run.kernels).empty());
}

TEST(Golden, ChangedTokenIsReportedWithKeyFieldOldAndNew) {
  Records run;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  run.pairs[1].free.tokens_off[3] = 11;
  const auto changes = check(b, run.pairs, run.kernels);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, run.pairs[1].key());
  EXPECT_EQ(changes[0].field, "free.tokens_off[3]");
  EXPECT_EQ(changes[0].old_value.substr(0, 2), "2 ");
  EXPECT_EQ(changes[0].new_value.substr(0, 3), "11 ");
  EXPECT_NE(describe(changes[0]).find("free.tokens_off[3]"), std::string::npos);
}

TEST(Golden, ShorterTokenSequenceIsReported) {
  Records run;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  run.pairs[0].teacher.tokens_on.pop_back();
  const auto changes = check(b, run.pairs, run.kernels);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].field, "teacher.tokens_on.length");
}

TEST(Golden, ErrorOutsideTheBandIsReportedInsideIsNot) {
  Records run;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  const double old_error = run.kernels[0].rules[0].error, rel = b.band.error_rel;
  run.kernels[0].rules[0].error = old_error * (1.0 + rel / 4);  // inside the band
  EXPECT_TRUE(check(b, run.pairs, run.kernels).empty());
  run.kernels[0].rules[0].error = old_error * (1.0 + 4 * rel);  // outside
  const auto changes = check(b, run.pairs, run.kernels);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].key, run.kernels[0].key());
  EXPECT_EQ(changes[0].field, "rule oracle_bound.error");
}

TEST(Golden, PassFailFlipIsReportedEvenWithAWideBand) {
  Records run;
  Band wide;
  wide.error_rel = 10.0;
  wide.deterministic = false;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels, wide);
  run.kernels[1].rules[1].pass = false;
  run.kernels[1].rules[1].error = 1e-3;  // inside the wide band
  const auto changes = check(b, run.pairs, run.kernels);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].field, "rule on_off_bitwise.pass");
  EXPECT_EQ(changes[0].old_value, "pass");
  EXPECT_EQ(changes[0].new_value, "FAIL");
}

TEST(Golden, OnOffDifferingCountIsComparedExactlyOnDeterministicBaselines) {
  Records run;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  run.kernels[0].on_off->differing = 4;
  const auto changes = check(b, run.pairs, run.kernels);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].field, "on_off.differing");
}

TEST(Golden, MissingAndNewEntriesAreReported) {
  Records run;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  run.kernels.pop_back();
  run.pairs.push_back(pair("ids:02"));
  const auto changes = check(b, run.pairs, run.kernels);
  ASSERT_EQ(changes.size(), 2u);
  bool missing = false, added = false;
  for (const auto& c : changes) {
    missing =
        missing || (c.key == "cpu.attn.b|" + run.kernels[0].case_id && c.old_value == "yes" && c.new_value == "no");
    added = added || (c.key == pair("ids:02").key() && c.old_value == "no" && c.new_value == "yes");
  }
  EXPECT_TRUE(missing);
  EXPECT_TRUE(added);
}

TEST(Golden, SkippedStatusChangeIsReported) {
  Records run;
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  run.kernels[0].skipped = "no longer supported";
  run.kernels[0].rules.clear();
  const auto changes = check(b, run.pairs, run.kernels);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].field, "skipped");
}

TEST(Golden, FileRoundTripKeepsEveryFieldIncludingInfinities) {
  const auto dir = kvconf::test::temp_dir("kvconf_golden_test");
  Records run;
  run.kernels[1].rules[1].headroom = -std::numeric_limits<double>::infinity();
  run.kernels[1].rules[0].bound = std::numeric_limits<double>::infinity();
  const Baseline b = make_baseline(prov(), run.pairs, run.kernels);
  write_baseline(dir / "kernels.json", b);
  const Baseline back = read_baseline(dir / "kernels.json");
  EXPECT_EQ(back.provenance.schema, kSchema);
  EXPECT_EQ(back.provenance.command, b.provenance.command);
  EXPECT_EQ(back.provenance.date, b.provenance.date);
  EXPECT_EQ(back.band.error_rel, b.band.error_rel);
  EXPECT_TRUE(std::isinf(back.kernels[1].rules[0].bound));
  EXPECT_TRUE(check(back, run.pairs, run.kernels).empty());
  EXPECT_EQ(to_json(back), to_json(b));
}

// Writes `text` as a golden file and returns the error reading it gives.
std::string read_error(const std::string& text, std::filesystem::path& file) {
  file = kvconf::test::temp_dir("kvconf_golden_test") / "tokens-fp32.json";
  std::ofstream(file) << text;
  try {
    read_baseline(file);
  } catch (const BadGoldenFile& e) {
    return e.what();
  }
  return "";
}

TEST(Golden, CorruptedFileNamesTheFileAndTheUpdateCommand) {
  std::filesystem::path file;
  const std::string err = read_error("{\"provenance\": {\"schema\": \"kvconf.gold", file);
  ASSERT_FALSE(err.empty()) << "a truncated file was accepted";
  EXPECT_NE(err.find(file.string()), std::string::npos) << err;
  EXPECT_NE(err.find("kvconf golden update"), std::string::npos) << err;
}

TEST(Golden, WrongSchemaVersionNamesTheFieldAndTheUpdateCommand) {
  Records run;
  nlohmann::json j = to_json(make_baseline(prov(), run.pairs, run.kernels));
  j["provenance"]["schema"] = "kvconf.golden/0";
  std::filesystem::path file;
  const std::string err = read_error(j.dump(), file);
  ASSERT_FALSE(err.empty()) << "a wrong schema version was accepted";
  EXPECT_NE(err.find(file.string()), std::string::npos) << err;
  EXPECT_NE(err.find("provenance.schema"), std::string::npos) << err;
  EXPECT_NE(err.find("kvconf.golden/1"), std::string::npos) << err;
  EXPECT_NE(err.find("kvconf golden update"), std::string::npos) << err;
}

TEST(Golden, MalformedFieldIsNamed) {
  Records run;
  nlohmann::json j = to_json(make_baseline(prov(), run.pairs, run.kernels));
  j["tokens"][1]["free_on"][2] = "seven";
  std::filesystem::path file;
  std::string err = read_error(j.dump(), file);
  EXPECT_NE(err.find("tokens[1].free_on"), std::string::npos) << err;
  EXPECT_NE(err.find("kvconf golden update"), std::string::npos) << err;
  j = to_json(make_baseline(prov(), run.pairs, run.kernels));
  j.erase("band");
  err = read_error(j.dump(), file);
  EXPECT_NE(err.find("'band'"), std::string::npos) << err;
}

TEST(Golden, MissingFileTellsTheUpdateCommand) {
  const auto dir = kvconf::test::temp_dir("kvconf_golden_test");
  try {
    read_baseline(dir / "absent.json");
    FAIL() << "a missing file was read";
  } catch (const BadGoldenFile& e) {
    EXPECT_NE(std::string(e.what()).find("absent.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kvconf golden update"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvconf::golden
