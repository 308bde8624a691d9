// Unit tests of the SentencePiece Tokenizer on LLaMA-2's tokenizer.model (../shared): known ids, BOS handling,
// decode round trips, and LoadError on a missing or malformed model file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kvconf/engine/error.hpp"
#include "kvconf/engine/tokenizer.hpp"

namespace fs = std::filesystem;
using kvconf::engine::LoadError;
using kvconf::engine::Tokenizer;

namespace {

fs::path llama2_model() { return fs::path(KVCONF_SHARED_DIR) / "tokenizers" / "llama2" / "tokenizer.model"; }

#define REQUIRE_SHARED(path)                                                                      \
  do {                                                                                            \
    if (!fs::exists(path)) {                                                                      \
      const char* ci = std::getenv("CI");                                                         \
      if (ci != nullptr && std::string(ci) == "true") FAIL() << "CI=true but missing " << (path); \
      GTEST_SKIP() << "shared data not found: " << (path) << " (set KVCONF_SHARED_DIR)";          \
    }                                                                                             \
  } while (0)

std::string load_error(const fs::path& p) {
  try {
    (void)Tokenizer::load(p);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "<no LoadError>";
}

}  // namespace

TEST(Tokenizer, Llama2KnownIds) {
  REQUIRE_SHARED(llama2_model());
  const Tokenizer t = Tokenizer::load(llama2_model());
  EXPECT_EQ(t.vocab_size(), 32000u);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.encode("Hello world"), (std::vector<int>{1, 15043, 3186}));
  EXPECT_EQ(t.encode("Hello world", false), (std::vector<int>{15043, 3186}));
  EXPECT_EQ(t.encode("", true), std::vector<int>{1});
}

TEST(Tokenizer, Llama2DecodeRoundTrips) {
  REQUIRE_SHARED(llama2_model());
  Tokenizer t = Tokenizer::load(llama2_model());
  Tokenizer moved = std::move(t);  // move keeps a working tokenizer
  for (const std::string s : {"Hello world", "Natalia sold clips to 48 of her friends in April.",
                              "  leading spaces, tabs\tand ünïcödé 漢字", "x = 3.14159; y = -2e10"}) {
    const auto ids = moved.encode(s, true);
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(ids.front(), 1);
    EXPECT_EQ(moved.decode(ids), s) << "ids: " << ::testing::PrintToString(ids);
  }
}

TEST(Tokenizer, MissingAndMalformedModel) {
  const fs::path d = fs::temp_directory_path() / ("kvconf_tok_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  std::string msg = load_error(d / "absent.model");
  EXPECT_NE(msg.find((d / "absent.model").string() + ": "), std::string::npos) << msg;
  std::ofstream(d / "junk.model") << "this is not a protobuf";
  msg = load_error(d / "junk.model");
  EXPECT_NE(msg.find((d / "junk.model").string() + ": not a SentencePiece model"), std::string::npos) << msg;
  fs::remove_all(d);
}
