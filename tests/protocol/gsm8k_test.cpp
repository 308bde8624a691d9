// GSM8K pieces of the protocol (kvconf/protocol/gsm8k.hpp): reading test.jsonl and its bad lines, gold and last-number
// extraction on worked strings, the seeded sample without replacement, the exemplars and the few-shot prompt.
#include "kvconf/protocol/gsm8k.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "bad_input_message.hpp"
#include "kvconf/protocol/bad_input.hpp"
#include "temp_dir.hpp"

namespace kvconf::protocol {
namespace {

std::filesystem::path write(const std::string& body) {
  const auto f = test::temp_dir("kvconf_gsm8k") / "test.jsonl";
  std::ofstream(f, std::ios::binary) << body;
  return f;
}

TEST(Gsm8k, ReadsProblemsAndGold) {
  const auto f = write(R"({"question": "Q one?", "answer": "It is 2+3=<<2+3=5>>5.\n#### 5"})"
                       "\n"
                       "\n"  // a blank line is skipped but counts as a line
                       R"({"question": "Q two?", "answer": "Total 1,000+234=<<1000+234=1234>>1,234\n#### 1,234"})"
                       "\n");
  const auto v = read_gsm8k(f);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].index, 0u);
  EXPECT_EQ(v[0].question, "Q one?");
  EXPECT_EQ(v[0].gold, "5");
  EXPECT_EQ(v[1].index, 2u);  // the third line of the file
  EXPECT_EQ(v[1].gold, "1234");
}

TEST(Gsm8k, BadLinesNameFileLineAndField) {
  const std::string ok = R"({"question": "Q", "answer": "A\n#### 1"})";
  struct Case {
    std::string second_line, expect;
  } cases[] = {
      {"{not json", ":2: not a JSON object"},
      {"[1, 2]", ":2: expected a JSON object"},
      {R"({"answer": "#### 1"})", ":2: field 'question': missing"},
      {R"({"question": 3, "answer": "#### 1"})", ":2: field 'question': missing or not a string"},
      {R"({"question": "Q"})", ":2: field 'answer': missing"},
      {R"({"question": "Q", "answer": "no marker 7"})", ":2: field 'answer': no '####'"},
      {R"({"question": "Q", "answer": "#### seven"})",
       ":2: field 'answer': the text after '####' is not a number ('seven')"},
  };
  for (const Case& c : cases) {
    const auto f = write(ok + "\n" + c.second_line + "\n");
    const std::string msg = bad_input([&] { read_gsm8k(f); });
    EXPECT_NE(msg.find(f.string() + c.expect), std::string::npos) << "line: " << c.second_line << "\nmessage: " << msg;
  }
  EXPECT_NE(bad_input([&] { read_gsm8k(write("")); }).find("no GSM8K problems"), std::string::npos);
  EXPECT_NE(bad_input([] { read_gsm8k("/nonexistent/test.jsonl"); }).find("/nonexistent/test.jsonl"),
            std::string::npos);
}

TEST(Gsm8k, NormalizesNumbers) {
  EXPECT_EQ(normalize_number("18"), "18");
  EXPECT_EQ(normalize_number(" 1,234 "), "1234");
  EXPECT_EQ(normalize_number("18.0"), "18");
  EXPECT_EQ(normalize_number("18.00"), "18");
  EXPECT_EQ(normalize_number("2.50"), "2.5");
  EXPECT_EQ(normalize_number("$18"), "18");
  EXPECT_EQ(normalize_number("-3"), "-3");
  EXPECT_EQ(normalize_number("-0.0"), "0");
  EXPECT_EQ(normalize_number("007"), "7");
  EXPECT_EQ(normalize_number("18."), "18");
  EXPECT_EQ(normalize_number(".5"), "0.5");
  EXPECT_EQ(normalize_number("abc"), std::nullopt);
  EXPECT_EQ(normalize_number(""), std::nullopt);
  EXPECT_EQ(normalize_number("1.2.3"), std::nullopt);
}

TEST(Gsm8k, GoldAfterTheLastMarker) {
  // The first GSM8K test problem's solution.
  EXPECT_EQ(gsm8k_gold("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every "
                       "day at the farmer’s market.\n#### 18"),
            "18");
  EXPECT_EQ(gsm8k_gold("x #### 3\n#### 1,000.0"), "1000");
  EXPECT_EQ(gsm8k_gold("no marker 12"), std::nullopt);
}

TEST(Gsm8k, LastNumberOfGeneratedText) {
  EXPECT_EQ(last_number(" She makes 9 * 2 = $18 every day.\n#### 18"), "18");
  EXPECT_EQ(last_number("The answer is 1,234.5."), "1234.5");
  EXPECT_EQ(last_number("so 12 apples, 3 pears"), "3");
  EXPECT_EQ(last_number("owes -7 dollars"), "-7");
  EXPECT_EQ(last_number("5-3 = 2"), "2");
  EXPECT_EQ(last_number("10-3"), "3");         // a subtraction, not a negative number
  EXPECT_EQ(last_number("lists 1,2,3"), "3");  // ",2" is not a thousands group
  EXPECT_EQ(last_number("in 2023, then 12,000 people"), "12000");
  EXPECT_EQ(last_number("ends with 18."), "18");
  EXPECT_EQ(last_number("no digits here"), std::nullopt);
  EXPECT_EQ(last_number(""), std::nullopt);
  // With the stop sequence: an invented next exemplar does not count.
  EXPECT_EQ(last_number(cut_at_stop(" 4 + 4 = 8\n#### 8\n\nQuestion: Tom has 5 cats")), "8");
  EXPECT_EQ(cut_at_stop("no stop"), "no stop");
}

TEST(Gsm8k, SampleIsDeterministicWithoutDuplicates) {
  const auto a = sample_indices(1319, 700, 42);
  EXPECT_EQ(a, sample_indices(1319, 700, 42));
  ASSERT_EQ(a.size(), 700u);
  EXPECT_EQ(std::set<std::size_t>(a.begin(), a.end()).size(), 700u);
  EXPECT_LT(*std::max_element(a.begin(), a.end()), 1319u);
  EXPECT_NE(a, sample_indices(1319, 700, 43));
  // Not the first 700 in order (a shuffle happened), and the sample reaches the last half of the file.
  std::vector<std::size_t> first(700);
  for (std::size_t i = 0; i < 700; ++i) first[i] = i;
  EXPECT_NE(a, first);
  EXPECT_TRUE(std::any_of(a.begin(), a.end(), [](std::size_t i) { return i >= 700; }));
}

TEST(Gsm8k, SampleOfAllIsAPermutation) {
  const auto a = sample_indices(50, 50, 7);
  std::vector<std::size_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
  std::vector<std::size_t> identity(50);
  for (std::size_t i = 0; i < 50; ++i) identity[i] = i;
  EXPECT_NE(a, identity);
  EXPECT_TRUE(sample_indices(5, 0, 1).empty());
  EXPECT_NE(bad_input([] { sample_indices(5, 6, 1); }).find("cannot sample 6"), std::string::npos);
}

TEST(Gsm8k, SampleIsUniformEnough) {
  // Every index of 10 drawn first about equally often over 20000 seeds: a chi-square with 9 degrees of freedom stays
  // under 27.88 (the 0.999 quantile) unless the draw is biased.
  std::vector<double> count(10, 0.0);
  const int trials = 20000;
  for (int s = 0; s < trials; ++s) count[sample_indices(10, 1, static_cast<std::uint64_t>(s))[0]] += 1;
  double chi2 = 0.0;
  for (double c : count) chi2 += (c - trials / 10.0) * (c - trials / 10.0) / (trials / 10.0);
  EXPECT_LT(chi2, 27.88);
}

TEST(Gsm8k, ExemplarsComeFromOutsideTheSample) {
  EXPECT_EQ(exemplar_indices(6, {0, 2, 3}, 2), (std::vector<std::size_t>{1, 4}));
  EXPECT_TRUE(exemplar_indices(6, {0, 2, 3}, 0).empty());
  EXPECT_NE(bad_input([] { exemplar_indices(4, {0, 1, 2}, 2); }).find("--shots 2"), std::string::npos);
}

TEST(Gsm8k, FewShotPromptFormat) {
  std::vector<Gsm8kProblem> all(3);
  all[0] = {0, "Q0?", "a <<1+1=2>>2\n#### 2", "2"};
  all[1] = {1, "Q1?", "b 3\n#### 3", "3"};
  all[2] = {2, "Q2?", "c\n#### 4", "4"};
  EXPECT_EQ(strip_calculator("x = <<2*3=6>>6 and <<6+1=7>>7"), "x = 6 and 7");
  EXPECT_EQ(gsm8k_prompt(all, {0, 1}, all[2]),
            "Question: Q0?\nAnswer: a 2\n#### 2\n\nQuestion: Q1?\nAnswer: b 3\n#### 3\n\nQuestion: Q2?\nAnswer:");
  EXPECT_EQ(gsm8k_prompt(all, {}, all[1]), "Question: Q1?\nAnswer:");
}

}  // namespace
}  // namespace kvconf::protocol
