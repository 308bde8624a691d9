// The four report files: report.json carries the schema's fields and reads back, junit.xml has one <testcase> per
// verdict with its properties, report.html has one <svg> per plot and no external resource, per model×profile
// sub-reports, statistics that cannot be computed say why, and a failed write leaves no partial file.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "kvconf/reports/report.hpp"
#include "synthetic_records.hpp"
#include "temp_dir.hpp"

namespace kvconf::reports {
namespace {

namespace fs = std::filesystem;
using test::synthetic_kernel;
using test::synthetic_pair;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Two model×profiles (fp16-eager, fp32) × two strategies × 6 prompts × 2 seeds, and three kernel cases.
ReportInput sample() {
  ReportInput in;
  in.title = "sample <report> & \"quotes\"";
  in.meta = {{"kvconf_version", "test"}, {"command", "report_files_test"}};
  for (const char* strategy : {"greedy", "topk"})
    for (std::uint64_t seed = 0; seed < 2; ++seed)
      for (int i = 0; i < 6; ++i) {
        const std::string id = "gsm8k:000" + std::to_string(i);
        in.pairs.push_back(synthetic_pair("fixture:llama2-tiny", "fp16-eager", strategy, seed, id, 16,
                                          static_cast<std::size_t>(i * 2 + seed), 1e-5, 0.5 + 0.1 * i));
        in.pairs.push_back(
            synthetic_pair("fixture:llama2-tiny", "fp32", strategy, seed, id, 16, std::nullopt, 1e-15 * (1 + i), 0));
      }
  in.kernels.push_back(synthetic_kernel("cpu.attn.a1_flash2.f16", "attention", 64, 128, 0.25));
  in.kernels.push_back(synthetic_kernel("cpu.gemm.g1.f16", "gemm", 256, 0, 0.5));
  in.kernels.push_back(synthetic_kernel("cpu.attn.a1_flash2.f16", "attention", 16, 512, 0, "unsupported"));
  return in;
}

TEST(ReportFiles, JsonCarriesTheSchemaAndReadsBack) {
  const fs::path dir = test::temp_dir("kvconf_reports");
  const ReportInput in = sample();
  write_report(in, dir);
  const auto r = nlohmann::json::parse(slurp(dir / "report.json"));
  EXPECT_EQ(r.at("schema"), "kvconf.report/1");
  EXPECT_EQ(r.at("title"), in.title);
  EXPECT_EQ(r.at("meta"), in.meta);
  for (const char* k : {"model_profiles", "conditions", "kernels", "oracle_points", "verdicts", "totals"})
    EXPECT_TRUE(r.contains(k)) << k;
  ASSERT_EQ(r["conditions"].size(), 4u);  // 2 profiles × 2 strategies
  const auto& c = r["conditions"][0];     // fixture:llama2-tiny fp16-eager greedy
  EXPECT_EQ(c["profile"], "fp16-eager");
  EXPECT_EQ(c["strategy"], "greedy");
  EXPECT_EQ(c["pairs"], 12);
  EXPECT_EQ(c["diverged"], 12);
  // mean KL: the mean over pairs of each pair's mean KL, computed here from the records.
  double kl = 0;
  std::size_t n = 0;
  for (const auto& p : in.pairs)
    if (p.profile == "fp16-eager" && p.strategy == "greedy") kl += p.free.mean_kl(), ++n;
  EXPECT_NEAR(c["mean_kl"]["estimate"].get<double>(), kl / double(n), 1e-12);
  EXPECT_LE(c["mean_kl"]["lo"].get<double>(), kl / double(n));
  EXPECT_GE(c["mean_kl"]["hi"].get<double>(), kl / double(n));
  EXPECT_EQ(c["flip_indices"].size(), 12u);
  EXPECT_EQ(c["kl_per_step"]["free"]["mean"].size(), 16u);
  EXPECT_EQ(c["layer_drift"]["mean_l2"].size(), 4u);
  EXPECT_TRUE(c["accuracy"].contains("mcnemar"));
  EXPECT_TRUE(c["accuracy"]["mcnemar"].contains("p_bonferroni"));
  // The fp32 conditions never diverge: flip statistics are n/a with a reason, not numbers.
  const auto& c32 = r["conditions"][2];
  EXPECT_EQ(c32["profile"], "fp32");
  ASSERT_TRUE(c32["early_vs_late_welch"].contains("na"));
  EXPECT_NE(c32["early_vs_late_welch"]["na"].get<std::string>().find("diverged"), std::string::npos);
  EXPECT_TRUE(c32["flip_kl_correlation"]["pearson"].contains("na"));
  // Verdicts in the JSON are the ones evaluate_rules gives.
  const auto v = evaluate_rules(in);
  ASSERT_EQ(r["verdicts"].size(), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(r["verdicts"][i]["suite"], v[i].suite);
    EXPECT_EQ(r["verdicts"][i]["name"], v[i].name);
    EXPECT_EQ(r["verdicts"][i]["pass"], v[i].pass);
  }
  // Re-rendering from the JSON alone gives the same Markdown and HTML as the writer wrote.
  EXPECT_EQ(report_markdown(r), slurp(dir / "report.md"));
  EXPECT_EQ(report_html(r), slurp(dir / "report.html"));
}

TEST(ReportFiles, JunitHasOneTestcasePerVerdictWithProperties) {
  const fs::path dir = test::temp_dir("kvconf_reports");
  ReportInput in = sample();
  in.pairs.push_back(synthetic_pair("fixture:llama2-tiny", "fp32", "greedy", 9, "gsm8k:<&>", 16, 4, 1e-15, 1e-3));
  write_report(in, dir);
  const std::string x = slurp(dir / "junit.xml");
  const auto v = evaluate_rules(in);
  std::size_t failed = 0, skipped = 0;
  for (const auto& r : v) failed += !r.pass && r.skipped.empty(), skipped += !r.skipped.empty();
  ASSERT_GT(failed, 0u);  // the fp32 greedy divergence
  EXPECT_EQ(count(x, "<testcase "), v.size());
  EXPECT_EQ(count(x, "<property name=\"measured\""), v.size());
  EXPECT_EQ(count(x, "<property name=\"headroom\""), v.size());
  EXPECT_EQ(count(x, "<failure "), failed);
  EXPECT_EQ(count(x, "<skipped "), skipped);
  EXPECT_NE(x.find("tests=\"" + std::to_string(v.size()) + "\""), std::string::npos);
  // Escaped: the title's and the prompt id's markup characters never appear raw inside attributes or text.
  EXPECT_EQ(x.find("<report>"), std::string::npos);
  EXPECT_EQ(x.find("gsm8k:<&>"), std::string::npos);
  EXPECT_NE(x.find("gsm8k:&lt;&amp;&gt;"), std::string::npos);
  // Every element opened is closed (a crude well-formedness check; the python minidom test parses it fully).
  EXPECT_EQ(count(x, "<testsuite "), count(x, "</testsuite>"));
  EXPECT_EQ(count(x, "<testcase "), count(x, "</testcase>"));
}

TEST(ReportFiles, HtmlHasOneSvgPerPlotAndNoExternalResource) {
  const fs::path dir = test::temp_dir("kvconf_reports");
  write_report(sample(), dir);
  const std::string h = slurp(dir / "report.html");
  // 2 model×profiles × (KL per step, flip histogram, layer drift) + 2 oracle plots.
  EXPECT_EQ(count(h, "<svg"), 2u * 3u + 2u);
  EXPECT_EQ(count(h, "</svg>"), 2u * 3u + 2u);
  for (const char* bad : {"http://", "https://", "src=", "<link", "@import", "url("})
    EXPECT_EQ(h.find(bad), std::string::npos) << bad;
  EXPECT_EQ(h.find("sample <report>"), std::string::npos);
  EXPECT_NE(h.find("sample &lt;report&gt; &amp; &quot;quotes&quot;"), std::string::npos);
  // Axis ticks and titles are there: a KL plot on a log axis (values span 1e-5 .. 0.5+).
  EXPECT_NE(h.find("KL(p_on‖p_off) per decode step"), std::string::npos);
  EXPECT_NE(h.find("log scale"), std::string::npos);
  const std::string md = slurp(dir / "report.md");
  EXPECT_NE(md.find("10.68–12.83"), std::string::npos);  // the paper's mean KL beside ours
  EXPECT_NE(md.find("| LLaMA-2 | Greedy | 100% | 10.68 |"), std::string::npos);
}

TEST(ReportFiles, SubReportPerModelProfileWhenThereAreSeveral) {
  const fs::path dir = test::temp_dir("kvconf_reports");
  write_report(sample(), dir);
  for (const char* sub : {"fixture-llama2-tiny__fp16-eager", "fixture-llama2-tiny__fp32"})
    for (const char* f : {"report.json", "report.md", "report.html", "junit.xml"})
      EXPECT_TRUE(fs::is_regular_file(dir / sub / f)) << sub << "/" << f;
  const auto r = nlohmann::json::parse(slurp(dir / "fixture-llama2-tiny__fp32" / "report.json"));
  EXPECT_EQ(r["conditions"].size(), 2u);
  // The fp32 sub-report keeps Fp32KlRatio, evaluated against the fp16 pairs of the whole input.
  bool ratio = false;
  for (const auto& v : r["verdicts"]) ratio |= v["name"] == "Fp32KlRatio" && v["skipped"] == "";
  EXPECT_TRUE(ratio);

  const fs::path one = test::temp_dir("kvconf_reports_one");
  ReportInput single;
  single.pairs.push_back(synthetic_pair("m", "fp16-eager", "greedy", 0, "ids:00", 4, 1, 1e-6, 1.0));
  write_report(single, one);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(one)) ++entries;
  EXPECT_EQ(entries, 4u);  // no sub-directory for a single model×profile
}

TEST(ReportFiles, FailedWriteLeavesNoPartialFile) {
  const fs::path dir = test::temp_dir("kvconf_reports");
  write_report(sample(), dir);
  const std::string before = slurp(dir / "report.json");
  ReportInput changed = sample();
  changed.title = "second";
  fs::remove(dir / "junit.xml");
  fs::create_directory(dir / "junit.xml");  // rename onto a directory fails
  fs::create_directory(dir / "junit.xml" / "x");
  EXPECT_THROW(write_report(changed, dir), std::runtime_error);
  for (const auto& e : fs::recursive_directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
  // Files are whole: the old version or the new one, and they parse.
  const auto r = nlohmann::json::parse(slurp(dir / "report.json"));
  EXPECT_TRUE(r["title"] == "second" || slurp(dir / "report.json") == before);

  // An unwritable destination (a regular file where the directory should be): an error naming the path.
  std::ofstream(dir / "blocker") << "x";
  try {
    write_report(changed, dir / "blocker" / "out");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("blocker"), std::string::npos) << e.what();
  }
}

TEST(ReportFiles, TerminalSummaryIsAFixedWidthTable) {
  const ReportInput in = sample();
  const auto v = evaluate_rules(in);
  const std::string t = terminal_summary(in, v);
  EXPECT_NE(t.find("fixture:llama2-tiny"), std::string::npos);
  EXPECT_NE(t.find("FlipsAreNearTies"), std::string::npos);
  EXPECT_NE(t.find("kernels.cpu.attn.a1_flash2.f16"), std::string::npos);
  std::size_t passed = 0, failed = 0, skipped = 0;
  for (const auto& r : v) {
    if (!r.skipped.empty())
      ++skipped;
    else if (r.pass)
      ++passed;
    else
      ++failed;
  }
  EXPECT_NE(t.find(std::to_string(v.size()) + " rule verdicts: " + std::to_string(passed) + " passed, " +
                   std::to_string(failed) + " failed, " + std::to_string(skipped) + " skipped"),
            std::string::npos)
      << t;
  // The verdict rows share one width: the header and every model rule line start the rule column at one offset.
  std::istringstream lines(t);
  std::string line;
  std::size_t rule_col = std::string::npos;
  while (std::getline(lines, line)) {
    if (line.rfind("suite ", 0) == 0) rule_col = line.find("rule");
    if (line.rfind("model.", 0) == 0 && rule_col != std::string::npos) {
      EXPECT_EQ(line[rule_col - 1], ' ') << line;
    }
  }
  EXPECT_NE(rule_col, std::string::npos);
}

}  // namespace
}  // namespace kvconf::reports
