// Replays the committed fuzz seeds and regressions through the harnesses' drivers in the normal build: each input is
// accepted or rejected with the parser's documented error type, never anything else; each regression also has a case
// asserting its error names the file, the field and what was expected (docs/FUZZING.md "Findings").
#include <gtest/gtest.h>

#include <cxxabi.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "drivers.hpp"

namespace kvconf::fuzz {
namespace {

namespace fs = std::filesystem;
const fs::path kFuzzDir = KVCONF_FUZZ_DIR;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<fs::path> inputs(const std::string& kind, const std::string& harness) {
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path dir = kFuzzDir / kind / harness;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string type_name(const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> n(abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  return status == 0 ? n.get() : typeid(e).name();
}

// What one input does: nullopt when the driver returns, else the message of the exception (checked to be of the
// documented type: anything else fails the test, naming the file).
std::optional<std::string> outcome(const Driver& d, const fs::path& file) {
  const std::string bytes = read_bytes(file);
  try {
    d.run(Bytes(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
  } catch (const std::exception& e) {
    EXPECT_TRUE(d.accepts(e)) << file << ": " << type_name(e) << " escaped the " << d.name << " driver (expected "
                              << d.error_type << "): " << e.what();
    return std::string(e.what());
  }
  return std::nullopt;
}

class CommittedInputs : public ::testing::TestWithParam<std::string> {};

// Every seed and every regression: accepted or the documented error. At least one seed must be accepted, so the
// harness reaches past the parser into what the CLI does next (a harness whose every seed is refused fuzzes only
// the first check).
TEST_P(CommittedInputs, AreAcceptedOrRejectedWithTheDocumentedError) {
  const Driver& d = driver(GetParam());
  const auto seeds = inputs("corpus", d.name);
  ASSERT_FALSE(seeds.empty()) << "no seeds in " << (kFuzzDir / "corpus" / d.name);
  std::size_t accepted = 0;
  for (const fs::path& f : seeds) accepted += !outcome(d, f).has_value();
  EXPECT_GE(accepted, 1u) << "every seed of " << d.name << " is rejected";
  for (const fs::path& f : inputs("regressions", d.name)) {
    const auto what = outcome(d, f);
    EXPECT_TRUE(what.has_value()) << f << ": a fuzz regression is accepted (each is bad input)";
  }
}

std::vector<std::string> harness_names() {
  std::vector<std::string> n;
  for (const Driver& d : drivers()) n.push_back(d.name);
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fuzz, CommittedInputs, ::testing::ValuesIn(harness_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The drivers' split of one input into several files: the separator line, and no separator (one part).
TEST(FuzzDrivers, SplitPartsCutsAtTheSeparatorLine) {
  const auto p = split_parts("a\n=====\nb\n=====\n");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "a");
  EXPECT_EQ(p[1], "b");
  EXPECT_EQ(p[2], "");
  EXPECT_EQ(split_parts("no separator").size(), 1u);
}

// The message a regression input gets from its driver (fails the test when it is accepted).
std::string message_of(const std::string& harness, const std::string& file) {
  const fs::path f = kFuzzDir / "regressions" / harness / file;
  EXPECT_TRUE(fs::is_regular_file(f)) << f << " is missing";
  const auto what = outcome(driver(harness), f);
  EXPECT_TRUE(what.has_value()) << f << " is accepted";
  return what.value_or("");
}

// Each case: the input a fuzzer found (fuzz/regressions/<harness>/<file>), what went wrong before the fix, and the
// clear error it gets now.

// nlohmann::json throws out_of_range (not parse_error) for a number beyond double ("1e9999"); the readers caught only
// parse_error, so the raw "[json.exception.out_of_range.406]" escaped without the file or line.
TEST(FuzzRegressions, Gsm8kNumberOverflowNamesTheLine) {
  const std::string m = message_of("gsm8k", "number_overflow");
  EXPECT_NE(m.find("test.jsonl:1: "), std::string::npos) << m;
  EXPECT_NE(m.find("not a JSON object"), std::string::npos) << m;
  EXPECT_NE(m.find("number overflow"), std::string::npos) << m;
}

TEST(FuzzRegressions, GoldenNumberOverflowNamesTheFileAndTheFix) {
  const std::string m = message_of("golden", "number_overflow");
  EXPECT_NE(m.find("golden file "), std::string::npos) << m;
  EXPECT_NE(m.find("tokens-fp16-eager.json: not valid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("kvconf golden update"), std::string::npos) << m;
}

TEST(FuzzRegressions, ResultStoreNumberOverflowNamesTheLine) {
  const std::string m = message_of("result_store", "number_overflow");
  EXPECT_NE(m.find("pairs.jsonl line "), std::string::npos) << m;
  EXPECT_NE(m.find("not a JSON record"), std::string::npos) << m;
  EXPECT_NE(m.find("number overflow"), std::string::npos) << m;
}

TEST(FuzzRegressions, ReportNumberOverflowNamesTheLine) {
  const std::string m = message_of("report", "number_overflow");
  EXPECT_NE(m.find("pairs.jsonl line "), std::string::npos) << m;
  EXPECT_NE(m.find("not a JSON record"), std::string::npos) << m;
  EXPECT_NE(m.find("number overflow"), std::string::npos) << m;
}

// libsentencepiece's trie builder threw Darts::Details::Exception out of Tokenizer::load for a model with an empty
// piece; now it is the file's LoadError.
TEST(FuzzRegressions, TokenizerEmptyPieceIsNotASentencePieceModel) {
  const std::string m = message_of("tokenizer", "darts_zero_length_key");
  EXPECT_NE(m.find("tokenizer.model: not a SentencePiece model: "), std::string::npos) << m;
  EXPECT_NE(m.find("zero-length key"), std::string::npos) << m;
}

// A kernel table announcing ~10^9 kernels in 84 bytes: deserialize allocated count × sizeof(KernelEntry) (170 GB,
// out of memory) before reading any; now the count is checked against the bytes that follow.
TEST(FuzzRegressions, PluginTableHugeCountIsTruncatedNotAllocated) {
  const std::string m = message_of("plugin_table", "huge_count");
  EXPECT_NE(m.find("truncated kernel table from the worker: "), std::string::npos) << m;
  EXPECT_NE(m.find("kernels announced, 84 bytes follow (at least 56 per kernel)"), std::string::npos) << m;
}

}  // namespace
}  // namespace kvconf::fuzz
