// read_results: two shards merge to the unsharded run record for record (and render the same report), an identical
// duplicate is kept once, a conflicting duplicate is an error naming both dirs and the key, a torn last line is
// dropped, any other bad line is an error naming file and line, and a directory with no results is an error.
#include <gtest/gtest.h>

#include <fstream>

#include "kvconf/reports/report.hpp"
#include "synthetic_records.hpp"
#include "temp_dir.hpp"

namespace kvconf::reports {
namespace {

namespace fs = std::filesystem;
using test::synthetic_kernel;
using test::synthetic_pair;

std::vector<results::RunPairRecord> plan() {  // in the order a run would write them (not key order)
  std::vector<results::RunPairRecord> v;
  for (const char* strategy : {"topp", "greedy"})
    for (int i = 5; i >= 0; --i)
      v.push_back(synthetic_pair("fixture:x", "fp16-eager", strategy, static_cast<std::uint64_t>(i % 2),
                                 "ids:0" + std::to_string(i), 6, i % 3 ? std::optional<std::size_t>(i) : std::nullopt,
                                 1e-6, 0.3 * i));
  return v;
}

void write_lines(const fs::path& file, const std::vector<std::string>& lines, const std::string& tail = "") {
  fs::create_directories(file.parent_path());
  std::ofstream o(file, std::ios::binary);
  for (const auto& l : lines) o << l << "\n";
  o << tail;
}

std::vector<std::string> dumps(const ReportInput& in) {
  std::vector<std::string> out;
  for (const auto& p : in.pairs) out.push_back(results::to_json(p).dump());
  for (const auto& k : in.kernels) out.push_back(results::to_json(k).dump());
  return out;
}

TEST(ReadResults, TwoShardsEqualTheUnshardedRun) {
  const fs::path root = test::temp_dir("kvconf_read_results");
  const auto pairs = plan();
  std::vector<results::KernelCaseRecord> kernels = {synthetic_kernel("k.b", "gemm", 32, 0, 0.5),
                                                    synthetic_kernel("k.a", "attention", 64, 64, 0.25)};
  std::vector<std::string> all_p, shard_p[2], all_k, shard_k[2];
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    all_p.push_back(results::to_json(pairs[i]).dump());
    shard_p[i % 2].push_back(all_p.back());
  }
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    all_k.push_back(results::to_json(kernels[i]).dump());
    shard_k[i % 2].push_back(all_k.back());
  }
  write_lines(root / "all" / "pairs.jsonl", all_p);
  write_lines(root / "all" / "kernels.jsonl", all_k);
  for (int s = 0; s < 2; ++s) {
    write_lines(root / ("s" + std::to_string(s)) / "pairs.jsonl", shard_p[s]);
    write_lines(root / ("s" + std::to_string(s)) / "kernels.jsonl", shard_k[s]);
  }
  const ReportInput one = read_results({root / "all"});
  const ReportInput merged = read_results({root / "s1", root / "s0"});
  ASSERT_EQ(one.pairs.size(), pairs.size());
  ASSERT_EQ(one.kernels.size(), kernels.size());
  EXPECT_EQ(dumps(merged), dumps(one));
  // Ordered by key.
  for (std::size_t i = 1; i < one.pairs.size(); ++i) EXPECT_LT(one.pairs[i - 1].key(), one.pairs[i].key());
  EXPECT_EQ(one.kernels[0].kernel, "k.a");
  // Same report apart from the provenance (the source directories).
  auto a = report_json(one, evaluate_rules(one)), b = report_json(merged, evaluate_rules(merged));
  a.erase("meta"), b.erase("meta");
  EXPECT_EQ(a.dump(), b.dump());
  EXPECT_EQ(merged.meta["sources"].size(), 2u);
}

TEST(ReadResults, IdenticalDuplicateKeptOnceConflictingDuplicateFails) {
  const fs::path root = test::temp_dir("kvconf_read_results");
  auto p = plan()[0];
  const std::string line = results::to_json(p).dump();
  p.seconds = 9.0;  // wall time is not content
  write_lines(root / "a" / "pairs.jsonl", {line});
  write_lines(root / "b" / "pairs.jsonl", {results::to_json(p).dump()});
  EXPECT_EQ(read_results({root / "a", root / "b"}).pairs.size(), 1u);

  p.free.kl[2] *= 2;  // a different result for the same key
  write_lines(root / "c" / "pairs.jsonl", {results::to_json(p).dump()});
  try {
    read_results({root / "a", root / "c"});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p.key()), std::string::npos) << m;
    EXPECT_NE(m.find((root / "a").string()), std::string::npos) << m;
    EXPECT_NE(m.find((root / "c").string()), std::string::npos) << m;
  }
}

TEST(ReadResults, TornLastLineDroppedOtherBadLinesNamed) {
  const fs::path root = test::temp_dir("kvconf_read_results");
  const auto pairs = plan();
  const std::string l0 = results::to_json(pairs[0]).dump(), l1 = results::to_json(pairs[1]).dump();
  write_lines(root / "torn" / "pairs.jsonl", {l0, l1}, l1.substr(0, l1.size() / 2));
  EXPECT_EQ(read_results({root / "torn"}).pairs.size(), 2u);

  write_lines(root / "bad" / "pairs.jsonl", {l0, l1.substr(0, 20), l1});
  try {
    read_results({root / "bad"});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pairs.jsonl line 2"), std::string::npos) << m;
  }
  auto j = results::to_json(pairs[0]);
  j["free"]["kl"] = "oops";
  write_lines(root / "field" / "pairs.jsonl", {j.dump()});
  try {
    read_results({root / "field"});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("line 1"), std::string::npos) << m;
    EXPECT_NE(m.find("free.kl"), std::string::npos) << m;
  }
}

TEST(ReadResults, DirectoryWithoutResultsIsAnError) {
  const fs::path root = test::temp_dir("kvconf_read_results");
  fs::create_directories(root / "empty");
  try {
    read_results({root / "empty"});
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((root / "empty").string()), std::string::npos) << e.what();
  }
  write_lines(root / "konly" / "kernels.jsonl", {results::to_json(synthetic_kernel("k", "gemm", 8, 0, 0.1)).dump()});
  const auto in = read_results({root / "konly"});
  EXPECT_TRUE(in.pairs.empty());
  EXPECT_EQ(in.kernels.size(), 1u);
}

}  // namespace
}  // namespace kvconf::reports
